#!/bin/bash
# sync_to_main.sh — copies this worktree's files (tracked and untracked, not
# ignored) into /work/main/.cudawork, the folder the device tool carries
# (device runs send /work/main, not a helper's worktree).
set -eu
cd "$(dirname "$0")/../.."
dst=/work/main/.cudawork
rm -rf "$dst" && mkdir -p "$dst"
git ls-files -co --exclude-standard -z | xargs -0 cp --parents -t "$dst/"
mkdir -p "$dst/dlpack_include" && cp -r /usr/include/dlpack "$dst/dlpack_include/"
git log -1 --format='commit %H (worktree, plus uncommitted changes)' > "$dst/COMMIT"
du -sh "$dst"
