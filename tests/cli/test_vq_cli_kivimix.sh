#!/bin/sh
# test_vq_cli_kivimix.sh — perplexity's --kv suffixes of the KIVI_MIX wide
# channels and the TurboQuant value scales (+wideN, :wideN, :widebitsN,
# +vs16) on the model: their errors always, and one run of five methods
# whose bits must order as the suffixes say when tools/fetch_model.sh has
# installed the model. Apart from test_vq_cli_model.sh so that ctest runs the
# two side by side: under ASan that run alone takes ~2 minutes.
# Usage: test_vq_cli_kivimix.sh <path to vq>. Exit 0 pass, 1 fail.
. "$(dirname "$0")/vq_cli_expect.sh"

if [ -s "$model" ]; then
    # +wideN / :wideN (KIVI_MIX wide channels, ctx 128: one whole 128-token key group) and +vs16 (f16
    # TurboQuant value scales) cut bits; one layer at 40 wide channels beside 29 at 20 lies between
    expect 2 "is not :wideN" perplexity -m "$model" --kv kivimix-turbo2:wide64 "$text"
    expect 2 "needs KIVI_MIX keys" perplexity -m "$model" --kv kivi4-turbo2:wide20 "$text"
    expect 2 ":widebitsN (N in 2..8" perplexity -m "$model" --kv kivimix-turbo2:wide8:widebits9 "$text"
    expect 2 "given twice (or a second window)" perplexity -m "$model" --kv kivi2+w8+w6 "$text"
    expect 2 "no layer has KIVI_MIX" perplexity -m "$model" --kv kivi2+wide20 "$text"
    # every layer has its own width (":wideN", or the recipe preset's): the suffix would change nothing
    expect 2 "without a width of their own" perplexity -m "$model" --kv kivimix-turbo2:wide20+wide40 "$text"
    expect 2 "without a width of their own" perplexity -m "$model" --kv balanced-3bit+wide32 "$text"
    expect 2 "no layer has TurboQuant values" perplexity -m "$model" --kv kivi2+vs16 "$text"
    expect 0 "kivimix-turbo2+vs16" perplexity -m "$model" --kv \
        kivimix-turbo2,kivimix-turbo2+wide20,kivimix-turbo2+vs16,kivimix-turbo2@1=kivimix-turbo2:wide40+wide20,kivimix-turbo2:wide20:widebits8 \
        --ctx 128 --windows 1 --threads 1 "$text"
    if awk '$2 == "kivimix-turbo2" { a = $NF } $2 == "kivimix-turbo2+wide20" { b = $NF }
            $2 == "kivimix-turbo2+vs16" { c = $NF } $2 == "kivimix-turbo2@1=kivimix-turbo2:wide40+wide20" { d = $NF }
            $2 == "kivimix-turbo2:wide20:widebits8" { e = $NF }
            END { exit !(a != "" && b < a && c < a && d > b && d < a && e > b) }' "$tmp/out"; then
        echo "ok   perplexity --kv +wideN, :wideN, :widebitsN and +vs16 set the bits they should"
    else echo "FAIL: perplexity --kv +wideN / :wideN / +vs16"; cat "$tmp/out"; failures=$((failures + 1)); fi
else
    echo "skip the model runs: $model is not installed (sh tools/fetch_model.sh)"
fi

vq_cli_finish "vq --kv KIVI_MIX and value-scale suffixes"
