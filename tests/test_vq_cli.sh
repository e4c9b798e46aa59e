#!/bin/sh
# test_vq_cli.sh — the `vq` command line: help, version, demo and bench on
# tiny inputs, and exit status 2 with a message for every kind of bad argument.
# Usage: test_vq_cli.sh <path to vq>. Exit 0 pass, 1 fail.
set -u
vq=${1:?usage: test_vq_cli.sh <path to vq>}
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

expect 0 "usage: vq" --help
expect 0 "usage: vq" help
expect 2 "usage: vq"
expect 2 "unknown command 'frobnicate'" frobnicate
expect 0 "veloxquant 0\." version
expect 2 "unexpected argument 'x'" version x

# demo and bench codecs on a tiny cache (the full runs take seconds to minutes).
small="--heads 2 --seq 64 --dim 32 --calib 256"
# shellcheck disable=SC2086  # $small is a list of arguments
expect 0 "KIVI 4-bit keys" demo $small --queries 4
expect 0 "usage: vq demo" demo --help
expect 2 "unknown option '--bogus'" demo --bogus
expect 2 "--seq expects an integer" demo --seq 0
expect 2 "--queries needs a value" demo --queries
expect 2 "--dim must be a power of two" demo --dim 48
expect 2 "which benchmark" bench
expect 2 "unknown benchmark 'nope'" bench nope
expect 0 "usage: vq bench attention" bench attention --help
expect 2 "usage: vq bench attention" bench attention --bogus
expect 0 "usage: vq bench codecs" bench codecs --help
expect 2 "--sizes expects" bench codecs --sizes 7
expect 2 "unknown option '-x'" bench codecs -x
tiny="--sizes 64 --dim 32 --calib 256 --min-time 0"
# shellcheck disable=SC2086
expect 0 "KIVI 2-bit keys" bench codecs $tiny
# shellcheck disable=SC2086
expect 0 '"benchmark": "codecs"' bench codecs $tiny --json
if command -v python3 >/dev/null 2>&1; then
    if python3 -m json.tool "$tmp/out" >/dev/null; then echo "ok   bench codecs --json is valid JSON"
    else echo "FAIL: bench codecs --json is not valid JSON"; failures=$((failures + 1)); fi
fi

[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo "vq command line: all passed"
