#!/bin/sh
# python_test.sh — `make test-python`: builds and installs the Python package
# with pip from this checkout, then runs its pytest suite (python/tests).
#
# The package goes into a virtual environment, build-pyenv/ (so nothing is
# installed into the system Python, and Debian's "externally managed" rule
# does not apply), with its requirements: .ci/python_deps.sh (downloads only
# what the system's site-packages lack).
#
# The package is built CPU-only here unless PY_CUDA=ON: CI has no GPU, and
# compiling the CUDA backend a second time costs ~20 minutes on 2 cores (the
# C build has compiled and tested it already). The CUDA tests of the package
# (python/tests/test_cuda.py) skip without a GPU; run them on a GPU machine with
#   PY_CUDA=ON make test-python
#
# The model test needs models/SmolLM2-135M-Instruct.Q4_1.gguf, fetched by
# tools/fetch_model.sh when that script exists; the tuner's test compares
# with the vq binary at $VQ_BIN (default build/tools/vq, which `make test`
# builds first).
set -eu
cd "$(dirname "$0")/.."
ENV=${PY_ENV:-build-pyenv}
PY_CUDA=${PY_CUDA:-OFF}
start=$(date +%s)

sh .ci/python_deps.sh
py="$ENV/bin/python"

echo "python: pip install . (VQ_CUDA=$PY_CUDA)"
t=$(date +%s)
SKBUILD_CMAKE_DEFINE="VQ_CUDA=$PY_CUDA" "$py" -m pip install --quiet --no-deps --no-build-isolation \
    --force-reinstall .
echo "python: package built and installed in $(( $(date +%s) - t )) s"

if [ -f tools/fetch_model.sh ]; then
    PATH="$(pwd)/$ENV/bin:$PATH" sh tools/fetch_model.sh
fi

# From the repository root, `import veloxquant` finds the installed package
# (python/ is not on sys.path), so the tests run what pip installed.
"$py" -m pytest -q -p no:cacheprovider python/tests
echo "python: tests passed ($(( $(date +%s) - start )) s in all)"
