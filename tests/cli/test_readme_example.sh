#!/bin/sh
# test_readme_example.sh ROOT: the README's decode-loop block is the loop of
# examples/decode_loop.c, which CI builds and runs (example_decode_loop), so the
# code a reader copies is code that compiles and runs. The README block sits
# between <!-- example:decode_loop:begin/end --> (its ``` fences dropped); the
# example's loop between its "the loop (README)" and "end of the loop" comments,
# one indentation level (4 spaces) removed.
set -eu
root=$1
readme=$(sed -n '/<!-- example:decode_loop:begin -->/,/<!-- example:decode_loop:end -->/p' "$root/README.md" |
         sed '1d;$d' | sed '/^```/d')
example=$(sed -n '/---- the loop (README) ----/,/---- end of the loop ----/p' "$root/examples/decode_loop.c" |
          sed '1d;$d' | sed 's/^    //')
if [ -z "$readme" ] || [ -z "$example" ]; then
    echo "test_readme_example: markers not found (README: ${#readme} chars, example: ${#example} chars)"
    exit 1
fi
if [ "$readme" != "$example" ]; then
    echo "test_readme_example: README.md's decode loop differs from examples/decode_loop.c's:"
    printf '%s\n' "$readme" > "${TMPDIR:-/tmp}/vq_readme_loop.$$"
    printf '%s\n' "$example" | diff "${TMPDIR:-/tmp}/vq_readme_loop.$$" - || true
    rm -f "${TMPDIR:-/tmp}/vq_readme_loop.$$"
    exit 1
fi
echo "test_readme_example: README decode loop = examples/decode_loop.c"
