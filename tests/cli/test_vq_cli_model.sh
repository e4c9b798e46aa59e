#!/bin/sh
# test_vq_cli_model.sh — the `vq` commands of the model runtime (generate,
# perplexity, capture-kv on a model, calibrate on captured keys): their
# arguments always, tiny real runs when tools/fetch_model.sh has installed
# the model (and Gemma 3 270M with --gemma). Apart from test_vq_cli.sh so that ctest runs the two side by
# side (under ASan these runs take minutes); the KIVI_MIX suffixes of --kv
# are test_vq_cli_kivimix.sh, for the same reason.
# Usage: test_vq_cli_model.sh <path to vq>. Exit 0 pass, 1 fail.
. "$(dirname "$0")/vq_cli_expect.sh"

# a calibration file without a VECINFER codebook (CommVQ tables only)
"$vq" calibrate --keys "$ex/keys.npy" -o "$tmp/c.vqcal" --commvq-stages 1 --commvq-centroids 8 --iters 2 >/dev/null 2>&1 ||
    { echo "FAIL: calibrate for the setup"; exit 1; }

# generate / perplexity (the model runtime): arguments always; a tiny real run
# when tools/fetch_model.sh has installed the model
expect 0 "usage: vq generate" generate --help
expect 0 "usage: vq perplexity" perplexity --help
expect 0 "usage: vq bench model" bench model --help
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
    expect 1 "no VQ_CAL_VECINFER_CODEBOOK" generate -m "$model" --kv vecinfer2 --calibration "$tmp/c.vqcal" -n 1 "hi"
    expect 2 "not a layer index" generate -m "$model" --f16-layers 30 "hi"
    # profiles: vq profile writes a --kv method's plan; --kv FILE takes it back (the same cache: same ppl, bits)
    expect 2 "are required" profile -m "$model" --kv kivi2
    expect 0 "30 layers, 3 kv heads, head dim 64" profile -m "$model" --kv kivi2@0=f16 -o "$tmp/k2.vqprof"
    expect 2 "is a profile already" profile -m "$model" --kv "$tmp/k2.vqprof" -o "$tmp/x.vqprof"
    expect_json profile -m "$model" --kv turbo3 -o "$tmp/t3.vqprof" --json
    expect 0 "k2.vqprof" perplexity -m "$model" --kv kivi2@0=f16,"$tmp/k2.vqprof" --ctx 32 --windows 1 --threads 1 "$text"
    if awk '$2 == "kivi2@0=f16" { p = $5; b = $NF } $2 ~ /k2.vqprof$/ { q = $5; c = $NF }
            END { exit !(p != "" && p == q && b == c) }' "$tmp/out"; then
        echo "ok   perplexity --kv PROFILE = the method it was written from"
    else echo "FAIL: perplexity --kv PROFILE"; cat "$tmp/out"; failures=$((failures + 1)); fi
    # a preset named by what it buys: its profile carries the sink, transforms and window (the same cache)
    expect 0 "residual window 64 tokens" profile -m "$model" --kv balanced-3bit -o "$tmp/b3.vqprof"
    expect 1 "sink tokens (4) and the transforms (center keys on, values on, smooth on)" perplexity -m "$model" \
        --kv "$tmp/b3.vqprof" --sink 3 --ctx 64 --windows 1 "$text"
    expect 0 "b3.vqprof" perplexity -m "$model" --kv balanced-3bit,"$tmp/b3.vqprof" --ctx 64 --windows 1 --threads 1 \
        "$text"
    if awk '$2 == "balanced-3bit" { p = $5; b = $NF } $2 ~ /b3.vqprof$/ { q = $5; c = $NF }
            END { exit !(p != "" && p == q && b == c) }' "$tmp/out"; then
        echo "ok   perplexity --kv PROFILE of balanced-3bit = balanced-3bit"
    else echo "FAIL: perplexity --kv PROFILE of balanced-3bit"; cat "$tmp/out"; failures=$((failures + 1)); fi
    expect 2 "drop --f16-layers" generate -m "$model" --kv "$tmp/k2.vqprof" --f16-layers 0 "hi"
    head -c 600 "$tmp/k2.vqprof" > "$tmp/cut.vqprof"
    expect 2 "truncated" generate -m "$model" --kv "$tmp/cut.vqprof" "hi"
    expect 2 "not a veloxquant profile" generate -m "$model" --kv "$text" "hi"
    expect 0 "bits per element" generate -m "$model" --kv kivi2 -n 3 --threads 1 "The capital of France is"
    expect_json generate -m "$model" --kv turbo3/kivi2 --sink 1 --smooth -n 2 --json "Hello"
    expect 0 "turbo3" perplexity -m "$model" --kv turbo3 --ctx 64 --windows 1 --sink 1 --plot "$tmp/ppl.png" "$text"
    expect 0 "kivi4-turbo2" perplexity -m "$model" --kv kivi4-turbo2 --ctx 64 --windows 1 --sink 1 --center-keys "$text"
    # a named preset brings its sink, transforms and window, also as the base of per-layer overrides
    expect 0 "compact-2.5bit@0=kivi4" perplexity -m "$model" --kv balanced-3bit,compact-2.5bit@0=kivi4 --ctx 64 \
        --windows 1 "$text"
    expect 2 "'balanced-3bits' is not a preset" perplexity -m "$model" --kv balanced-3bits --ctx 64 "$text"
    # --skip-tokens: the windows start later in the text; two windows from the start are the first one
    # and the one at token 64 (perplexities multiply: ppl(2 windows)^2 = ppl(first) * ppl(skipped))
    expect 2 "the text has only" perplexity -m "$model" --skip-tokens 10G "$text"
    ppl_of() { "$vq" perplexity -m "$model" --kv f16 --ctx 64 --threads 1 "$@" "$text" 2>/dev/null | awk '$2 == "f16" { p = $5 } END { print p }'; }
    both=$(ppl_of --windows 2) first=$(ppl_of --windows 1) second=$(ppl_of --windows 1 --skip-tokens 64)
    if awk -v a="$both" -v b="$first" -v c="$second" 'BEGIN { d = a * a / (b * c) - 1; exit !(a > 0 && b != c && d < 1e-4 && d > -1e-4) }'; then
        echo "ok   perplexity --skip-tokens 64 scores the second window"
    else echo "FAIL: perplexity --skip-tokens ($both, $first, $second)"; failures=$((failures + 1)); fi
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
# Gemma 3 270M (the second model family): generate and perplexity run it
gemma="$(dirname "$model")/gemma-3-270m-q4_k_m.gguf"
if [ -s "$gemma" ]; then
    expect 0 "the capital of" generate -m "$gemma" -n 4 --threads 1 "The capital of France is"
    expect 0 "kivi4" perplexity -m "$gemma" --kv kivi4 --ctx 32 --windows 1 --threads 1 "$text"
else
    echo "skip the Gemma runs: $gemma is not installed (sh tools/fetch_model.sh --gemma)"
fi

vq_cli_finish "vq model commands"
