#!/bin/sh
# test_vq_cli.sh — the `vq` command line: help, version, demo and bench on
# tiny inputs, --json reports, progress lines, and exit status 2 with a
# message naming the option and value for every kind of bad argument
# (the model commands: test_vq_cli_model.sh).
# Usage: test_vq_cli.sh <path to vq>. Exit 0 pass, 1 fail.
. "$(dirname "$0")/vq_cli_expect.sh"

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
# The presets: those named by what they buy first, with their bits; --json rows.
expect 0 "balanced-3bit  *3\.0" presets
expect 0 '"name": "quality-4bit", .*"recipe": true, "bits": 4\.' presets --json
expect 2 "unexpected argument 'x'" presets x
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
# every preset that needs no tables, the named ones first after f16, the last method preset too
expect 0 "balanced-3bit" bench cache --skv 256 --layers 1 --hkv 2 --hq 4 --dim 64 --page 128 --repeats 1 --methods all
expect 0 "qjl" bench cache --skv 256 --layers 1 --hkv 2 --hq 4 --dim 64 --page 128 --repeats 1 --methods all
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
expect 1 "vecinfer_subspaces" calibrate --keys "$ex/keys.npy" -o "$tmp/c.vqcal" --pq-subspaces 5
expect_json calibrate --keys "$ex/keys.npy" -o "$tmp/c.vqcal" --commvq-stages 1 --commvq-centroids 8 --iters 2 --json

vq_cli_finish "vq command line"
