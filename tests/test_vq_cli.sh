#!/bin/sh
# test_vq_cli.sh — the `vq` command line: help, version, and exit status 2
# with a message for every kind of bad argument.
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

[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo "vq command line: all passed"
