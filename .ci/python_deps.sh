#!/bin/sh
# python_deps.sh — the Python package's requirements, into the virtual
# environment build-pyenv/ (PY_ENV): created when missing, with the system's
# site-packages visible, so that what is installed there already (torch,
# transformers, gguf, accelerate, numpy, pytest, scikit-build-core) is not
# downloaded again; what is missing comes from PyPI, and the time that takes
# is printed ("python deps: ... s").
#
# Called by .ci/python_test.sh (make test-python). .ci/run also starts it in
# the background before `make test`: the download (~2.5 min on CI, mostly the
# torch wheel and its CUDA libraries) then overlaps the C builds, which use
# the cores, not the network. An exclusive lock on build-pyenv.lock (flock,
# where present) makes the second call wait for the first and then find
# everything installed; if the first failed, the second tries again.
set -eu
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
ENV=${PY_ENV:-build-pyenv}

if command -v flock >/dev/null 2>&1; then
    exec 9>"$ENV.lock"
    if ! flock -n 9; then
        echo "python deps: waiting for the install already running ($ENV.lock)"
        t=$(date +%s)
        flock 9
        echo "python deps: waited $(( $(date +%s) - t )) s"
    fi
fi

if [ ! -x "$ENV/bin/python" ]; then
    "$PYTHON" -m venv --system-site-packages "$ENV"
fi
py="$ENV/bin/python"

# Each requirement is imported by name: only what is missing is installed.
need=""
for spec in numpy:numpy pytest:pytest scikit_build_core:scikit-build-core torch:torch \
            transformers:transformers gguf:gguf accelerate:accelerate; do
    mod=${spec%%:*}
    pkg=${spec#*:}
    "$py" -c "import $mod" >/dev/null 2>&1 || need="$need $pkg"
done
if [ -z "$need" ]; then
    exit 0
fi
echo "python deps: installing$need from PyPI"
t=$(date +%s)
# retries and a long timeout: the torch wheel and its CUDA libraries are large
"$py" -m pip install --quiet --retries 5 --timeout 120 --upgrade pip
# shellcheck disable=SC2086
"$py" -m pip install --quiet --retries 5 --timeout 120 $need
echo "python deps: installed in $(( $(date +%s) - t )) s"
