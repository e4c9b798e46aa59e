#!/bin/sh
# test_vq_cli_tune.sh — `vq tune`: its arguments always; with the model
# installed, two small real runs (64 tokens: ~30 and ~15 CPU-seconds), one
# measured from the f16 cache, whose profile the model commands take back at
# the bits it promised, and one from the cheapest plan, whose measurements
# file must give back its base's KL and its plan; on a text of one window,
# the tuner's KL of a plan is vq perplexity's (each installed model); with
# Gemma 3 270M installed, the bits of its sliding-window layers.
# Registered only outside the sanitizer builds, where the run takes minutes.
# Usage: test_vq_cli_tune.sh <path to vq>. Exit 0 pass, 1 fail.
. "$(dirname "$0")/vq_cli_expect.sh"

expect 0 "usage: vq tune" tune --help
expect 2 "are required" tune -m "$model" --bits 3
expect 2 "must be even" tune -m "$model" --bits 3 --ctx 65 -o "$tmp/x.vqprof"
expect 2 "--base 'x': expected f16 or cheapest" tune -m "$model" --bits 3 --base x -o "$tmp/x.vqprof"

# info KEY: the value of KEY in the info of the JSON report in $tmp/json
info() { sed -n 's/.*"info": {.*"'"$1"'": \("[^"]*"\|[^,}]*\).*/\1/p' "$tmp/json"; }
# check WHAT CONDITION: one test line, counted
check() {
    if eval "$2"; then echo "ok   $1"; else echo "FAIL: $1"; failures=$((failures + 1)); fi
}
# same A B: two numbers within 2e-9 relative (the file's %.9e and the report's %.9g round the same double)
same() { awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; m = a < 0 ? -a : a;
                                          exit !(a != "" && b != "" && d <= 2e-9 * m) }'; }
if [ -s "$model" ]; then
    expect 2 "no plan of these candidates fits" tune -m "$model" --bits 1.5 -o "$tmp/x.vqprof"
    expect 2 "'kivi9' is not a preset" tune -m "$model" --bits 3 --keys kivi9 -o "$tmp/x.vqprof"
    expect 2 "'vecinfer2' is not a preset" tune -m "$model" --bits 3 --values vecinfer2 -o "$tmp/x.vqprof"
    # base f16: the tuner's plan and profile as before the base was an option
    expect 0 "measured KL" tune -m "$model" --bits 3 --keys kivi2 --values turbo2 --tokens 64 --ctx 64 \
        --threads 1 --text "$text" -o "$tmp/t.vqprof" --plot "$tmp/tune.png" --frontier "$tmp/front.png" --smooth \
        --measurements "$tmp/m.txt" --base f16
    # the measurements are for these candidates only
    expect 2 "its keys candidate 1 is 'kivi2', here 'kivi4'" tune -m "$model" --bits 4 --keys kivi4 --values turbo2 \
        --tokens 64 --ctx 64 --text "$text" -o "$tmp/x.vqprof" --measurements "$tmp/m.txt" --base f16
    # and for their base: a version-1 file (no base line) is from f16, as the shipped ones are
    { echo "vq-tune-measurements 1"; tail -n +3 "$tmp/m.txt"; } >"$tmp/m1.txt"
    expect 2 "--measurements '$tmp/m1.txt': measured from the f16 cache, this run asks --base cheapest" tune \
        -m "$model" --bits 3 --keys kivi2 --values turbo2 --tokens 64 --ctx 64 --text "$text" -o "$tmp/x.vqprof" \
        --measurements "$tmp/m1.txt" --base cheapest
    expect 0 "measured KL" tune -m "$model" --bits 3 --keys kivi2 --values turbo2 --tokens 64 --ctx 64 \
        --threads 1 --text "$text" -o "$tmp/t1.vqprof" --smooth --measurements "$tmp/m1.txt" --base f16
    check "a version-1 measurements file gives the same profile under --base f16" 'cmp -s "$tmp/t.vqprof" "$tmp/t1.vqprof"'

    # base cheapest: kivi2 keys (3 bits) and turbo2 values (2.5 bits) in every layer, 2.75 bits,
    # is the base; f16 is named for the keys only, so each layer's keys at f16 are the 30 measured parts
    # (2 + 30 + 5 runs) and one fits 3 bits (+13/60); the values' f16 is no candidate, never measured
    cheap="--keys f16,kivi2 --values turbo2 --tokens 64 --ctx 64 --threads 1 --text $text --smooth --base cheapest"
    expect_json tune -m "$model" --bits 3 $cheap -o "$tmp/c.vqprof" --measurements "$tmp/mc.txt" --json
    cp "$tmp/json" "$tmp/c.json"
    base_kl=$(sed -n 's/^base cheapest //p' "$tmp/mc.txt")
    check "the report's base is the file's" '[ "$(info base)" = "\"cheapest\"" ] && same "$(info base_kl)" "$base_kl"'
    check "every part's loss at its cheapest candidate is the cheapest plan's KL" \
        'awk -v b="$base_kl" '"'"'/^keys [0-9]/ { n++; if ($4 != b || $3 == "nan") bad++ }
            /^values [0-9]/ { n++; if ($4 != b || $3 != "nan") bad++ } END { exit !(n == 60 && !bad) }'"'"' "$tmp/mc.txt"'
    # the chosen plan is the cheapest with the keys of the layer that f16 saves the most: a measured plan, so
    # its KL is that part's loss, run again (the runs are deterministic)
    best=$(awk '/^keys [0-9]/ && (m == "" || $3 < m) { m = $3 } END { print m }' "$tmp/mc.txt")
    check "the chosen plan's measured KL is its part's loss ($best)" 'same "$(info measured_kl)" "$best"'
    check "the chosen plan has one layer's keys f16" 'case "$(info kv)" in \"kivi2/turbo2@[0-9]*=f16/turbo2\") ;; *) false ;; esac'
    # from the file: the same plan and profile, no model run but the reference and the checks
    expect_json tune -m "$model" --bits 3 $cheap -o "$tmp/c2.vqprof" --measurements "$tmp/mc.txt" --json
    check "the cheapest-base measurements give back the plan" \
        '[ "$(info kv)" = "$(sed -n "s/.*\"info\": {.*\"kv\": \(\"[^\"]*\"\).*/\1/p" "$tmp/c.json")" ]'
    check "the cheapest-base measurements give back the profile" 'cmp -s "$tmp/c.vqprof" "$tmp/c2.vqprof"'
    # at the cheapest plan's bits the plan is the base: predicted and measured are its KL
    expect_json tune -m "$model" --bits 2.75 $cheap -o "$tmp/c3.vqprof" --measurements "$tmp/mc.txt" --json
    check "at the cheapest plan's bits the plan is the cheapest" \
        '[ "$(info bits)" = "$(info min_bits)" ] && [ "$(info kv)" = "\"kivi2/turbo2\"" ]'
    check "its predicted KL is the base's" '[ "$(info predicted_kl)" = "$(info base_kl)" ]'
    check "its measured KL is the base's" 'same "$(info measured_kl)" "$base_kl"'
    # the scored search from the same measurements: the cheapest plan (its KL from a file is not taken), then
    # one upgrade fits 3 bits, so one round tries the 2 best ranked (runs of the measured parts again: the best
    # is the allocation's plan, at its KL) and the next finds none that fits; the allocation's plan stays the
    # profile's (not strictly worse)
    expect_json tune -m "$model" --bits 3 $cheap -o "$tmp/s.vqprof" --measurements "$tmp/mc.txt" --search 2 --json
    check "the search ran the cheapest plan and one round of two" \
        '[ "$(info search_rounds)" = 1 ] && [ "$(info search_runs)" = 3 ]'
    check "the search's plan measured the allocation's KL" 'same "$(info searched_measured_kl)" "$best"'
    check "a search that finds no lower KL keeps the allocation's plan" \
        '[ "$(info plan)" = "\"allocated\"" ] && cmp -s "$tmp/c.vqprof" "$tmp/s.vqprof"'
    expect 2 "--search" tune -m "$model" --bits 3 $cheap -o "$tmp/x.vqprof" --search 9
    expect 2 "--measurements '$tmp/mc.txt': measured from the cheapest plan, this run asks --base f16" tune \
        -m "$model" --bits 3 $cheap -o "$tmp/x.vqprof" --measurements "$tmp/mc.txt" --base f16
    expect 2 "f16 was not measured there for the values, this run takes it" tune -m "$model" --bits 3 \
        --keys f16,kivi2 --values f16,turbo2 --tokens 64 --ctx 64 --text "$text" -o "$tmp/x.vqprof" \
        --measurements "$tmp/mc.txt" --base cheapest
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
# same_window_kl MODEL: a text of one window (its N tokens: even, at least 64), so the tuner's calibration
# window (the last N tokens) and vq perplexity's first window are the same tokens; the tuner's KL of its one
# plan must be the perplexity's KL of that plan (same runs: the first token BOS where the model wants one)
same_window_kl() {
    head -c 550 "$text" | tail -c 480 >"$tmp/one.txt"
    "$vq" perplexity -m "$1" --kv f16 --ctx 65536 --windows 1 "$tmp/one.txt" >"$tmp/out" 2>&1
    n=$(sed -n 's/.*: \([0-9]*\) tokens are fewer than one window.*/\1/p' "$tmp/out")
    run="--sink 4 --batch 1 --threads 1"
    expect_json tune -m "$1" --bits 16 --keys kivi2 --values turbo2 --base cheapest --tokens "$n" --ctx "$n" \
        --text "$tmp/one.txt" $run -o "$tmp/one.vqprof" --json
    tune_kl=$(info measured_kl)
    kv=$(info kv | tr -d '"')
    expect_json perplexity -m "$1" --kv "$kv" --ctx "$n" --windows 1 $run "$tmp/one.txt" --json
    ppl_kl=$(sed -n 's|.*"kv": "'"$kv"'"[^}]*"kl": \([^,}]*\).*|\1|p' "$tmp/json")
    check "$(basename "$1"): the tuner's KL on a window ($tune_kl) is vq perplexity's ($ppl_kl)" \
        'awk -v a="$tune_kl" -v b="$ppl_kl" '"'"'BEGIN { d = a - b; if (d < 0) d = -d;
                                                       exit !(a > 0 && b != "" && d <= 1e-6 * a) }'"'"
}
[ -s "$model" ] && same_window_kl "$model"
# Gemma 3: its 15 local layers hold their 512-token window (768 tokens at 2048 with 256-token pages and 4
# sinks), not 2048, and the bits are counted over what each layer holds (a model load, no model run)
gemma="$root/models/gemma-3-270m-q4_k_m.gguf"
if [ -s "$gemma" ]; then
    same_window_kl "$gemma"
    expect 2 "(local layers, sliding window 512, hold 768 of them)" \
        tune -m "$gemma" --bits 1.5 --keys kivi2 --values turbo2 --bits-ctx 2048 --window +w8 --sink 4 -o "$tmp/x.vqprof"
    if grep -q "the cheapest takes 2.776 bits per element at 2048 tokens" "$tmp/out"; then
        echo "ok   the cheapest Gemma plan weighs each layer by the tokens it holds"
    else echo "FAIL: the cheapest Gemma plan's bits"; cat "$tmp/out"; failures=$((failures + 1)); fi
fi
vq_cli_finish test_vq_cli_tune
