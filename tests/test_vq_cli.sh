#!/bin/sh
# test_vq_cli.sh — the `vq` command line: help, version, demo and bench on
# tiny inputs, --json reports, progress lines, and exit status 2 with a
# message naming the option and value for every kind of bad argument.
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

# Help: every command and group, on stdout, exit 0.
expect 0 "usage: vq" --help
expect 0 "usage: vq" help
expect 0 "usage: vq version" version --help
expect 0 "usage: vq demo" demo --help
expect 0 "usage: vq bench <what>" bench --help
expect 0 "usage: vq bench attention" bench attention --help
expect 0 "usage: vq bench codecs" bench codecs --help
expect 0 "usage: vq bench prefill" bench prefill --help
expect 0 "usage: vq bench cache" bench cache --help
expect 0 "usage: vq bench attention" bench attention --bogus --help
# No command, unknown commands and sub-commands: exit 2 with a hint.
expect 2 "usage: vq"
expect 2 "unknown command 'frobnicate'" frobnicate
expect 2 "did you mean 'bench'" bnch
expect 2 "try 'vq --help'" frobnicate
expect 2 "usage: vq bench" bench
expect 2 "unknown sub-command 'nope'" bench nope
expect 2 "did you mean 'attention'" bench atention
expect 0 "veloxquant 0\." version
expect 0 "veloxquant 0\." --version
expect 2 "unexpected argument 'x'" version x
# Unknown options, with the closest known one.
expect 2 "unknown option '--bogus'" demo --bogus
expect 2 "did you mean --seq" demo --sq 3
expect 2 "unknown option '-x'" bench codecs -x
expect 2 "try 'vq bench attention --help'" bench attention --bogus
# Values: the option and the bad value named; both spellings; size suffixes.
expect 2 "--seq: bad value '0'" demo --seq 0
expect 2 "--seq: bad value '12q'" demo --seq=12q
expect 2 "--queries needs a value" demo --queries
expect 2 "--json takes no value" demo --json=1
expect 2 "--dim must be a power of two" demo --dim 48
expect 2 "--max-skv: bad value '10x'" bench attention --max-skv 10x
expect 2 "--repeats: bad value '5000'" bench attention --repeats 5000
expect 2 "--repeats: bad value '2.5'" bench attention --repeats=2.5
expect 2 "no decode Skv" bench attention --max-skv 100 --no-prefill
expect 2 "--backend: bad value 'gpu'" bench attention --backend gpu
expect 2 "apply to --backend cuda only" bench attention --b1
expect 2 "needs --backend cuda" bench prefill
expect 2 "--sizes: bad value '7'" bench codecs --sizes 7
expect 2 "not a multiple of 8" bench codecs --sizes 1k,100
expect 2 "must start with f16" bench cache --methods kivi2
expect 2 "unknown preset 'kivi3'" bench cache --methods f16,kivi3
expect 2 "not a multiple of --hkv" bench cache --hq 12
expect 2 "expected one of wall, cpu" bench cache --clock gpu
expect 2 "it needs --backend cpu" bench cache --backend cuda --clock cpu

# demo and bench on tiny inputs (the full runs take seconds to minutes).
small="--heads 2 --seq 64 --dim 32 --calib 256"
# shellcheck disable=SC2086  # $small is a list of arguments
expect 0 "KIVI 4-bit keys" demo $small --queries 4
# shellcheck disable=SC2086
expect_json demo $small --queries=4 --json
tiny="--sizes 64 --dim 32 --calib 256 --min-time 0"
# shellcheck disable=SC2086
expect 0 "KIVI 2-bit keys" bench codecs $tiny
# shellcheck disable=SC2086
expect_json bench codecs $tiny --json
cache="--skv 64 --layers 1 --hkv 2 --hq 4 --dim 32 --page 32 --repeats 1 --methods f16,kivi2,turbo2"
# shellcheck disable=SC2086
expect 0 "kivi2" bench cache $cache
# shellcheck disable=SC2086
expect 0 "by the cpu clock" bench cache $cache --clock cpu
# shellcheck disable=SC2086
expect_json bench cache $cache --json
# 1k is 1024: the 512-token decode rows run, the 2K ones do not.
att="--max-skv 1k --hkv 8 --repeats 1 --no-prefill --only kivi --threads 1"
# shellcheck disable=SC2086
expect 0 "kivi" bench attention $att
if grep -q " 2048 " "$tmp/out"; then echo "FAIL: --max-skv 1k ran Skv 2048"; failures=$((failures + 1)); fi
# shellcheck disable=SC2086
expect_json bench attention $att --json
expect_json version --json
# Progress goes to stderr, a line per step when it is not a terminal.
# shellcheck disable=SC2086
"$vq" bench attention $att >"$tmp/out" 2>"$tmp/err"
if grep -q "\[1/" "$tmp/err" && ! grep -q "\[1/" "$tmp/out"; then echo "ok   progress lines on stderr"
else echo "FAIL: no progress lines on stderr"; cat "$tmp/err"; failures=$((failures + 1)); fi

# cache-eval on the committed example set (one layer, four methods), its
# --json and --plot, and its argument and input errors.
ex="$(dirname "$0")/../data/kv_example"
ce="--keys $ex/keys.npy --values $ex/values.npy --queries $ex/queries.npy --repeats 1 --threads 1"
expect 0 "usage: vq cache-eval" cache-eval --help
expect 2 "are required" cache-eval --keys "$ex/keys.npy"
# shellcheck disable=SC2086
expect 2 "unknown method 'kivi3'" cache-eval $ce --methods f16,kivi3
# shellcheck disable=SC2086
expect 2 "unknown method 'kivi2+kivi4'" cache-eval $ce --methods kivi2+kivi4
# shellcheck disable=SC2086
expect 0 "turbo3+v-turbo3" cache-eval $ce --methods f16,kivi2,v-kivi4,turbo3+v-turbo3,qjl --plot "$tmp/plot.png"
if [ "$(head -c 8 "$tmp/plot.png" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ]; then echo "ok   --plot wrote a PNG"
else echo "FAIL: --plot did not write a PNG"; failures=$((failures + 1)); fi
# shellcheck disable=SC2086
expect_json cache-eval $ce --methods pq,v-codebook4 --layers 1 --json
head -c 1000 "$ex/keys.npy" >"$tmp/short.npy"
expect 1 "the file has" cache-eval --keys "$tmp/short.npy" --values "$ex/values.npy" --queries "$ex/queries.npy"
expect 1 "shapes disagree" cache-eval --keys "$ex/keys.npy" --values "$ex/queries.npy" --queries "$ex/queries.npy"

# capture-kv: its usage and argument errors (the model run itself is in bench/results/persist.md)
expect 0 "usage: vq capture-kv" capture-kv --help
expect 2 "--out is required" capture-kv
expect 1 "capture-kv" capture-kv --model "$tmp/none.gguf" -o "$tmp"
# output paths are checked before any work: a directory is created, a file's
# directory must exist, a directory is not a file
expect 1 "capture-kv" capture-kv --model "$tmp/none.gguf" -o "$tmp/new/dir"
if [ -d "$tmp/new/dir" ]; then echo "ok   capture-kv -o created its directory"
else echo "FAIL: capture-kv -o did not create $tmp/new/dir"; failures=$((failures + 1)); fi
: >"$tmp/a_file"
expect 2 "cannot write '$tmp/a_file/x'" capture-kv -o "$tmp/a_file/x"
expect 2 "cannot write '$tmp/nodir/c.vqcal': its directory does not exist" calibrate -o "$tmp/nodir/c.vqcal"
expect 2 "--plot: cannot write '$tmp': it is a directory" perplexity --plot "$tmp" x.txt

# calibrate: fit on the example set, write a file, and its errors
expect 0 "usage: vq calibrate" calibrate --help
expect 2 "nothing to fit" calibrate --keys "$ex/keys.npy" -o "$tmp/c.vqcal"
expect 2 "needs --values" calibrate --keys "$ex/keys.npy" -o "$tmp/c.vqcal" --value-centroids 4
expect 0 "wrote" calibrate --keys "$ex/keys.npy" --values "$ex/values.npy" -o "$tmp/c.vqcal" --pq-subspaces 16 \
    --pq-centroids 16 --value-centroids 16 --iters 3 --threads 1
if [ "$(head -c 7 "$tmp/c.vqcal")" = "VQCALIB" ]; then echo "ok   calibrate wrote a calibration file"
else echo "FAIL: no calibration file"; failures=$((failures + 1)); fi
expect 1 "pq_subspaces" calibrate --keys "$ex/keys.npy" -o "$tmp/c.vqcal" --pq-subspaces 5
expect_json calibrate --keys "$ex/keys.npy" -o "$tmp/c.vqcal" --commvq-stages 1 --commvq-centroids 8 --iters 2 --json

# generate / perplexity (the model runtime): arguments always; a tiny real run
# when tools/fetch_model.sh has installed the model
root=$(cd "$(dirname "$0")/.." && pwd)
model="$root/models/SmolLM2-135M-Instruct.Q4_1.gguf"
text="$root/data/pride_and_prejudice.txt"
expect 0 "usage: vq generate" generate --help
expect 0 "usage: vq perplexity" perplexity --help
expect 0 "usage: vq bench model" bench model --help
expect 2 "--sink is not timed" bench model --sink 1
expect 2 "one PROMPT argument" generate -m "$model"
expect 2 "one text FILE" perplexity -m "$model"
expect 2 "must be even" perplexity -m "$model" --ctx 63 "$text"
expect 1 "cannot open" generate -m "$tmp/none.gguf" "hi"
expect 1 "not a GGUF" generate -m "$text" "hi"
if [ -s "$model" ]; then
    expect 2 "not a preset" generate -m "$model" --kv kivi3 "hi"
    expect 2 "needs fitted tables" perplexity -m "$model" --kv vecinfer2 "$text"
    # --calibration: tables fitted on the model's own keys (the text's tail, disjoint from the scored windows)
    expect 0 "keys,values,queries" capture-kv --model "$model" --text "$text" -o "$tmp/cap" --tokens 96 --queries 1 --offset 4000 --threads 1
    expect 0 "fitted 30 layers" calibrate --keys "$tmp/cap/keys.npy" -o "$tmp/pq.vqcal" --pq-subspaces 16 --pq-centroids 16 \
        --iters 2 --threads 1
    expect 0 "vecinfer2" perplexity -m "$model" --kv vecinfer2,vecinfer2/turbo2 --calibration "$tmp/pq.vqcal" --ctx 32 \
        --windows 1 --threads 1 "$text"
    expect 1 "--calibration $text" perplexity -m "$model" --kv vecinfer2 --calibration "$text" --ctx 32 --windows 1 "$text"
    expect 1 "no VQ_CAL_PQ_CODEBOOK" generate -m "$model" --kv vecinfer2 --calibration "$tmp/c.vqcal" -n 1 "hi"
    expect 2 "not a layer index" generate -m "$model" --f16-layers 30 "hi"
    expect 0 "bits per element" generate -m "$model" --kv kivi2 -n 3 --threads 1 "The capital of France is"
    expect_json generate -m "$model" --kv turbo3/kivi2 --sink 1 --smooth -n 2 --json "Hello"
    expect 0 "turbo3" perplexity -m "$model" --kv turbo3 --ctx 64 --windows 1 --sink 1 --plot "$tmp/ppl.png" "$text"
    expect 0 "kivi4-turbo2" perplexity -m "$model" --kv kivi4-turbo2 --ctx 64 --windows 1 --sink 1 --center-keys "$text"
    if [ "$(head -c 4 "$tmp/ppl.png" | tail -c 3)" = "PNG" ]; then echo "ok   perplexity --plot wrote a PNG"
    else echo "FAIL: perplexity --plot wrote no PNG"; failures=$((failures + 1)); fi
    # per-layer overrides: every layer overridden = the preset itself (same ppl and bits); one layer of 30
    # quantized = bits between the two
    expect 2 "not LAYERS=METHOD" perplexity -m "$model" --kv kivi2@3 "$text"
    expect 2 "are not A-B.C" perplexity -m "$model" --kv kivi2@2-30=f16 "$text"
    expect 2 "not a preset" perplexity -m "$model" --kv f16@3=kivi3 "$text"
    expect 0 "f16@3=kivi2/turbo2" perplexity -m "$model" --kv kivi2,f16@0-29=kivi2,f16@3=kivi2/turbo2 --ctx 32 \
        --windows 1 --threads 1 "$text"
    if awk '$2 == "kivi2" { p = $5; b = $NF } $2 == "f16@0-29=kivi2" { q = $5; c = $NF }
            $2 == "f16@3=kivi2/turbo2" { m = $NF }
            END { exit !(p != "" && p == q && b == c && m > b && m < 16) }' "$tmp/out"; then
        echo "ok   perplexity --kv @LAYERS=METHOD overrides layers"
    else echo "FAIL: perplexity --kv @LAYERS=METHOD"; cat "$tmp/out"; failures=$((failures + 1)); fi
    # +w8: the window (16 tokens of a partial 32-token KIVI group at ctx 48) at 8 bits: fewer bits, same pages
    expect 2 "none of +w8 / +w1..+w7" perplexity -m "$model" --kv kivi2+w9 "$text"
    expect 2 "given twice" perplexity -m "$model" --kv kivi2+r4+w8+r8 "$text"
    expect 0 "kivi2+w8" perplexity -m "$model" --kv kivi2,kivi2+w8,f16@3=kivi2+w8 --ctx 48 --windows 1 --threads 1 "$text"
    if awk '$2 == "kivi2" { b = $NF } $2 == "kivi2+w8" { c = $NF } $2 == "f16@3=kivi2+w8" { m = $NF }
            END { exit !(b != "" && c < b && c > 2 && m < 16 && m > b) }' "$tmp/out"; then
        echo "ok   perplexity --kv +w8 stores the window at 8 bits"
    else echo "FAIL: perplexity --kv +w8"; cat "$tmp/out"; failures=$((failures + 1)); fi
    # +w6: the same window at 6 bits (VQ_WINDOW_TURBO: packed codes, f16 scales): fewer bits still
    expect 0 "kivi2+w6" perplexity -m "$model" --kv kivi2+w8,kivi2+w6 --ctx 48 --windows 1 --threads 1 "$text"
    if awk '$2 == "kivi2+w8" { b = $NF } $2 == "kivi2+w6" { c = $NF } END { exit !(b != "" && c < b && c > 2) }' \
        "$tmp/out"; then echo "ok   perplexity --kv +w6 stores the window at 6 bits"
    else echo "FAIL: perplexity --kv +w6"; cat "$tmp/out"; failures=$((failures + 1)); fi
    # +rN: this method's residual (ctx 48, kivi2's 32-token key groups): +r32 keeps all 48 tokens in the window,
    # --residual 32 with +r0 the same 16 as plain kivi2
    expect 0 "kivi2+r32+w8" perplexity -m "$model" --residual 32 --kv kivi2+r0,kivi2+r32,kivi2+r32+w8 --ctx 48 --windows 1 \
        --threads 1 "$text"
    if awk '$2 == "kivi2+r0" { b = $NF } $2 == "kivi2+r32" { c = $NF } $2 == "kivi2+r32+w8" { w = $NF }
            END { exit !(b != "" && b < 10 && c > 15 && w < c && w > 8) }' "$tmp/out"; then
        echo "ok   perplexity --kv +rN sets the method's residual window"
    else echo "FAIL: perplexity --kv +rN"; cat "$tmp/out"; failures=$((failures + 1)); fi
    # +wideN / :wideN (KIVI_MIX wide channels, ctx 256: two whole 128-token key groups) and +vs16 (f16
    # TurboQuant value scales) cut bits; one layer at 40 wide channels beside 29 at 20 lies between
    expect 2 "is not :wideN" perplexity -m "$model" --kv kivimix-turbo2:wide64 "$text"
    expect 2 "needs KIVI_MIX keys" perplexity -m "$model" --kv kivi4-turbo2:wide20 "$text"
    expect 2 ":widebitsN (N in 2..8" perplexity -m "$model" --kv kivimix-turbo2:wide8:widebits9 "$text"
    expect 2 "given twice (or a second window)" perplexity -m "$model" --kv kivi2+w8+w6 "$text"
    expect 2 "no layer has KIVI_MIX" perplexity -m "$model" --kv kivi2+wide20 "$text"
    expect 2 "no layer has TurboQuant values" perplexity -m "$model" --kv kivi2+vs16 "$text"
    expect 0 "kivimix-turbo2+vs16" perplexity -m "$model" --kv \
        kivimix-turbo2,kivimix-turbo2+wide20,kivimix-turbo2+vs16,kivimix-turbo2@1=kivimix-turbo2:wide40+wide20,kivimix-turbo2:wide20:widebits8 \
        --ctx 256 --windows 1 --threads 1 "$text"
    if awk '$2 == "kivimix-turbo2" { a = $NF } $2 == "kivimix-turbo2+wide20" { b = $NF }
            $2 == "kivimix-turbo2+vs16" { c = $NF } $2 == "kivimix-turbo2@1=kivimix-turbo2:wide40+wide20" { d = $NF }
            $2 == "kivimix-turbo2:wide20:widebits8" { e = $NF }
            END { exit !(a != "" && b < a && c < a && d > b && d < a && e > b) }' "$tmp/out"; then
        echo "ok   perplexity --kv +wideN, :wideN, :widebitsN and +vs16 set the bits they should"
    else echo "FAIL: perplexity --kv +wideN / :wideN / +vs16"; cat "$tmp/out"; failures=$((failures + 1)); fi
    expect_json perplexity -m "$model" --kv kivi2 --ctx 32 --windows 1 --json --tokens "$tmp/tok.tsv" "$text"
    # --tokens: a header and one line per window position, nll only in the scored second half
    if [ "$(wc -l < "$tmp/tok.tsv")" -eq 33 ] && head -1 "$tmp/tok.tsv" | grep -q "nll_f16.nll_kivi2" &&
       [ "$(awk 'NR > 1 && $5 != "nan"' "$tmp/tok.tsv" | wc -l)" -eq 16 ] &&
       grep -q '"ppl_change_se"' "$tmp/json"; then echo "ok   perplexity --tokens wrote 32 positions, 16 scored"
    else echo "FAIL: perplexity --tokens file or ppl_change_se"; cat "$tmp/tok.tsv"; failures=$((failures + 1)); fi
    # checked when parsed (exit 2, usage), not after the run
    expect 2 "its directory does not exist" perplexity -m "$model" --ctx 32 --windows 1 --tokens "$tmp/no/such/dir.tsv" "$text"
else
    echo "skip the model runs: $model is not installed (sh tools/fetch_model.sh)"
fi

[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo "vq command line: all passed"
