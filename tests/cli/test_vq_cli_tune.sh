#!/bin/sh
# test_vq_cli_tune.sh — `vq tune`: its arguments always; with the model
# installed, a small real run (two candidates, 64 tokens: ~30 CPU-seconds)
# whose profile the model commands take back at the bits it promised; with
# Gemma 3 270M installed, the bits of its sliding-window layers.
# Registered only outside the sanitizer builds, where the run takes minutes.
# Usage: test_vq_cli_tune.sh <path to vq>. Exit 0 pass, 1 fail.
. "$(dirname "$0")/vq_cli_expect.sh"

expect 0 "usage: vq tune" tune --help
expect 2 "are required" tune -m "$model" --bits 3
expect 2 "must be even" tune -m "$model" --bits 3 --ctx 65 -o "$tmp/x.vqprof"
if [ -s "$model" ]; then
    expect 2 "no plan of these candidates fits" tune -m "$model" --bits 1.5 -o "$tmp/x.vqprof"
    expect 2 "'kivi9' is not a preset" tune -m "$model" --bits 3 --keys kivi9 -o "$tmp/x.vqprof"
    expect 2 "'vecinfer2' is not a preset" tune -m "$model" --bits 3 --values vecinfer2 -o "$tmp/x.vqprof"
    expect 0 "measured KL" tune -m "$model" --bits 3 --keys kivi2 --values turbo2 --tokens 64 --ctx 64 \
        --threads 1 --text "$text" -o "$tmp/t.vqprof" --plot "$tmp/tune.png" --frontier "$tmp/front.png" --smooth \
        --measurements "$tmp/m.txt"
    # the measurements are for these candidates only
    expect 2 "its keys candidate 1 is 'kivi2', here 'kivi4'" tune -m "$model" --bits 4 --keys kivi4 --values turbo2 \
        --tokens 64 --ctx 64 --text "$text" -o "$tmp/x.vqprof" --measurements "$tmp/m.txt"
    expect 2 "--window '+vs16'" tune -m "$model" --bits 3 --window +vs16 -o "$tmp/x.vqprof"
    # the profile carries the sink tokens and transforms it was tuned with: flags may not contradict them
    expect 1 "--sink differs from the profile, which gives the sink tokens (0)" perplexity -m "$model" \
        --kv "$tmp/t.vqprof" --sink 3 --ctx 64 --windows 1 "$text"
    for f in tune front; do
        if [ "$(head -c 4 "$tmp/$f.png" | tail -c 3)" = "PNG" ]; then echo "ok   tune wrote $f.png"
        else echo "FAIL: tune wrote no $f.png"; failures=$((failures + 1)); fi
    done
    # the profile it wrote: every model command takes it, at no more than the budget
    expect 0 "t.vqprof" perplexity -m "$model" --kv "$tmp/t.vqprof" --ctx 64 --windows 1 --threads 1 "$text"
    if awk '$2 ~ /t.vqprof$/ { b = $NF } END { exit !(b != "" && b + 0 <= 3.0) }' "$tmp/out"; then
        echo "ok   the tuned profile stores at most --bits"
    else echo "FAIL: the tuned profile's bits"; cat "$tmp/out"; failures=$((failures + 1)); fi
fi
# Gemma 3: its 15 local layers hold their 512-token window (768 tokens at 2048 with 256-token pages and 4
# sinks), not 2048, and the bits are counted over what each layer holds (a model load, no model run)
gemma="$root/models/gemma-3-270m-q4_k_m.gguf"
if [ -s "$gemma" ]; then
    expect 2 "(local layers, sliding window 512, hold 768 of them)" \
        tune -m "$gemma" --bits 1.5 --keys kivi2 --values turbo2 --bits-ctx 2048 --window +w8 --sink 4 -o "$tmp/x.vqprof"
    if grep -q "the cheapest takes 2.776 bits per element at 2048 tokens" "$tmp/out"; then
        echo "ok   the cheapest Gemma plan weighs each layer by the tokens it holds"
    else echo "FAIL: the cheapest Gemma plan's bits"; cat "$tmp/out"; failures=$((failures + 1)); fi
fi
vq_cli_finish test_vq_cli_tune
