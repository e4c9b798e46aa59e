# vq_cli_expect.sh — sourced by the vq command-line tests (test_vq_cli.sh,
# test_vq_cli_model.sh, test_vq_cli_kivimix.sh): $vq from the first
# argument, a scratch $tmp removed on exit, $ex the committed example KV set
# (data/kv_example), $model (installed by tools/fetch_model.sh: test for it)
# and $text (the novel), expect / expect_json, and vq_cli_finish (exit 1 on
# any failure).
set -u
vq=${1:?usage: $0 <path to vq>}
ex="$(dirname "$0")/../../data/kv_example"
root=$(cd "$(dirname "$0")/../.." && pwd)
model="$root/models/SmolLM2-135M-Instruct.Q4_1.gguf"
text="$root/data/pride_and_prejudice.txt"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0

# expect <status> <text expected in stdout+stderr> <vq arguments...>
expect() {
    want_status=$1 want_text=$2
    shift 2
    "$vq" "$@" >"$tmp/out" 2>&1
    status=$?
    if [ "$status" -ne "$want_status" ]; then
        echo "FAIL: vq $* exited $status, expected $want_status"; cat "$tmp/out"; failures=$((failures + 1))
    elif ! grep -q -- "$want_text" "$tmp/out"; then
        echo "FAIL: vq $* output lacks '$want_text'"; cat "$tmp/out"; failures=$((failures + 1))
    else
        echo "ok   vq $*"
    fi
}

# expect_json <vq arguments...>: exit 0 and stdout is one valid report of the
# common schema (python3's json module checks it, when python3 is present).
expect_json() {
    "$vq" "$@" >"$tmp/json" 2>"$tmp/err"
    status=$?
    if [ "$status" -ne 0 ]; then
        echo "FAIL: vq $* exited $status"; cat "$tmp/err"; failures=$((failures + 1)); return
    fi
    if command -v python3 >/dev/null 2>&1; then
        if ! python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
for k in ("schema", "tool", "version", "commit", "date", "command", "args", "machine", "backend", "isa",
          "threads", "info", "units", "rows"):
    assert k in d, "missing " + k
assert d["schema"] == "vq-report/1" and d["tool"] == "vq"
assert isinstance(d["rows"], list) and len(d["rows"]) > 0, "no rows"
assert d["commit"] and isinstance(d["machine"], dict) and "cpu" in d["machine"]
fields = set(d["info"]) | {k for r in d["rows"] for k in r}
for k in d["units"]: assert k in fields, "unit of an absent field " + k
' "$tmp/json"; then
            echo "FAIL: vq $* --json is not a valid report"; cat "$tmp/json"; failures=$((failures + 1)); return
        fi
    elif ! grep -q '"schema": "vq-report/1"' "$tmp/json"; then
        echo "FAIL: vq $* --json lacks the schema"; failures=$((failures + 1)); return
    fi
    echo "ok   vq $* (JSON report)"
}

# the exit status: 0 when every check passed, else 1 with the count
vq_cli_finish() {
    [ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
    echo "$1: all passed"
}
