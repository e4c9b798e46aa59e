# veloxquant — the two commands of the README:
#   make        installs what is missing (Debian/Ubuntu; the SmolLM2 model into
#               models/ by tools/fetch_model.sh), builds (Release) and
#               runs `vq demo`. The CUDA backend is built when a GPU is visible
#               (nvidia-smi) and nvcc is found, for that GPU; else CPU-only.
#               CUDA=1 builds it regardless (for the visible GPU, or for sm_90
#               + compute_80 PTX without one), CUDA=0 never;
#               CUDA_ARCH=90-real (CMake's list syntax) picks the targets.
#   make test   the whole test suite: ctest on the Release build (includes the
#               install test), the Python package's pytest suite (pip install .
#               into build-pyenv/, .ci/python_test.sh), then ctest on an
#               ASan+UBSan build (CPU only), once per ISA pass in SANITIZE_ISAS,
#               then every libFuzzer target for FUZZ_SECONDS each (clang)
# The real build system is CMake; this file only strings the steps together.

BUILD         ?= build
SANITIZE_BUILD ?= build-sanitize
JOBS          ?= $(shell nproc 2>/dev/null || echo 2)
# VQ_ISA values for the sanitizer passes: "best" leaves VQ_ISA unset. The
# passes after the first skip SANITIZE_ONCE: test_model_forward runs its golden
# part on every ISA itself, and test_vq_cli drives the commands (their kernels
# are the other tests' business) at 300 s under ASan on the scalar kernels,
# most of a CI pass (2121 s in all at 9c9c687).
SANITIZE_ISAS ?= best scalar
SANITIZE_ONCE ?= ^(test_model_forward|test_vq_cli)$$
FUZZ_BUILD    ?= build-fuzz
FUZZ_SECONDS  ?= 60
CMAKE_FLAGS   ?=
CUDA          ?= auto
CUDA_ARCH     ?=
# CUDA_DEVICE_OPT=0 compiles the device code without optimisation (nvcc
# -Xcicc -O0 -Xptxas -O0): every kernel template is still instantiated,
# compiled and linked, at ~7 s instead of ~170 s for the largest file. For CI,
# where no GPU runs the result; never for a build that runs kernels.
CUDA_DEVICE_OPT ?= 1

# nvcc on PATH, else the usual toolkit location; empty when there is none.
NVCC := $(shell command -v nvcc 2>/dev/null || { test -x /usr/local/cuda/bin/nvcc && echo /usr/local/cuda/bin/nvcc; })
ifeq ($(CUDA),1)
CUDA_FLAGS := -DVQ_CUDA=ON
else ifeq ($(CUDA),0)
CUDA_FLAGS := -DVQ_CUDA=OFF
else ifeq ($(CUDA),auto)
CUDA_FLAGS := -DVQ_CUDA=AUTO
else
$(error CUDA is '$(CUDA)', expected 1, 0 or auto)
endif
ifneq ($(NVCC),)
ifneq ($(CUDA),0)
CUDA_FLAGS += -DCMAKE_CUDA_COMPILER=$(NVCC)
endif
endif
ifneq ($(CUDA_ARCH),)
CUDA_FLAGS += -DCMAKE_CUDA_ARCHITECTURES=$(CUDA_ARCH)
endif
ifeq ($(CUDA_DEVICE_OPT),0)
CUDA_FLAGS += "-DCMAKE_CUDA_FLAGS=-Xcicc -O0 -Xptxas -O0"
endif

VQ := $(BUILD)/tools/vq

.PHONY: all deps model build demo quality-table test test-release test-python test-sanitize test-fuzz install clean

all: demo

deps:
	@sh .ci/deps.sh
	@sh tools/fetch_model.sh

# the model of the model runtime's tests and README (skipped when present)
model:
	@sh tools/fetch_model.sh

build: deps
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CUDA_FLAGS) $(CMAKE_FLAGS)
	cmake --build $(BUILD) -j $(JOBS)
	@grep -q '^VQ_WITH_CUDA_BUILT:INTERNAL=ON' $(BUILD)/CMakeCache.txt || \
	    echo "veloxquant: built CPU-only (no usable GPU, or CUDA=0); 'make CUDA=1' also builds the CUDA backend (needs nvcc)"

demo: build
	$(VQ) demo

# the README's perplexity table (every preset at 2048 and 8192 tokens on
# SmolLM2-135M: hours on 2 cores); QUALITY_ARGS="--ctx 2048" for one context
quality-table: build
	python3 tools/quality_table.py --vq $(VQ) $(QUALITY_ARGS)

test: test-release test-python test-sanitize test-fuzz

test-release: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# The Python package: pip install . into build-pyenv/, then pytest python/tests.
test-python: deps
	sh .ci/python_test.sh

# RelWithDebInfo so that sanitizer reports carry file:line.
test-sanitize: deps
	cmake -S . -B $(SANITIZE_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	    -DVQ_SANITIZE=ON -DVQ_CUDA=OFF $(CMAKE_FLAGS)
	cmake --build $(SANITIZE_BUILD) -j $(JOBS)
	@set -e; for isa in $(SANITIZE_ISAS); do \
	    echo "== ASan+UBSan ctest, VQ_ISA=$$isa"; \
	    if [ "$$isa" = best ]; then \
	        (cd $(SANITIZE_BUILD) && ctest --output-on-failure -j $(JOBS)); \
	    else \
	        (cd $(SANITIZE_BUILD) && VQ_ISA=$$isa ctest --output-on-failure -j $(JOBS) -E '$(SANITIZE_ONCE)'); \
	    fi; \
	done

# The fuzz targets (tests/fuzz/): built with clang, each run FUZZ_SECONDS over
# its committed seed corpus; a crash fails.
test-fuzz: deps
	JOBS=$(JOBS) sh tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)

# PREFIX=/some/where make install
PREFIX ?= /usr/local
install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

clean:
	rm -rf $(BUILD) $(SANITIZE_BUILD) $(FUZZ_BUILD) build-py build-pyenv
