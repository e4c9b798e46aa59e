# veloxquant — the two commands of the README:
#   make        installs what is missing (Debian/Ubuntu; the SmolLM2 and Gemma 3
#               models into models/ by tools/fetch_model.sh), builds (Release) and
#               runs `vq demo`. The CUDA backend is built when a GPU is visible
#               (nvidia-smi) and nvcc is found, for that GPU; else CPU-only.
#               CUDA=1 builds it regardless (for the visible GPU, or for sm_90
#               + compute_80 PTX without one), CUDA=0 never;
#               CUDA_ARCH=90-real (CMake's list syntax) picks the targets.
#   make test   the whole test suite: ctest on the Release build (includes the
#               install test), the Python package's pytest suite (pip install .
#               into build-pyenv/, .ci/python_test.sh), then ctest on an
#               ASan+UBSan build (CPU only), once per ISA pass in SANITIZE_ISAS,
#               then every libFuzzer target for FUZZ_SECONDS each (clang),
#               then the NEON kernels' tests: an aarch64 cross build run
#               under qemu-user (test-aarch64; x86-64 hosts only)
# The real build system is CMake; this file only strings the steps together.

BUILD         ?= build
SANITIZE_BUILD ?= build-sanitize
JOBS          ?= $(shell nproc 2>/dev/null || echo 2)
# VQ_ISA values for the sanitizer passes: "best" leaves VQ_ISA unset. The
# passes after the first skip SANITIZE_ONCE: test_model_forward and
# test_model_gemma run their tiny models on every ISA themselves (and their
# golden parts are the model's, not a kernel's), and test_vq_cli / test_vq_cli_model /
# test_vq_cli_kivimix drive the commands (their kernels are the other tests'
# business). Under ASan the model commands are the longest tests (test_vq_cli
# took over 6 minutes on one core while it held them), so they are
# test_vq_cli_model and test_vq_cli_kivimix, which ctest starts first and runs
# beside each other and the rest.
SANITIZE_ISAS ?= best scalar
SANITIZE_ONCE ?= ^(test_model_forward|test_model_gemma|test_vq_cli|test_vq_cli_model|test_vq_cli_kivimix)$$
FUZZ_BUILD    ?= build-fuzz
# test-aarch64: the library, tools and tests cross-compiled for aarch64
# (cmake/aarch64-linux-gnu.cmake: Debian's gcc-aarch64-linux-gnu; ctest runs
# each test program under qemu-aarch64), so that the NEON kernels
# (src/cpu/neon) stay compiled and checked against the scalar kernels and the
# float64 references. Everything is built; only AARCH64_TESTS run: the tests
# of the kernels that NEON implements (qemu runs the code ~10x slower, and the
# whole suite costs ~6.5 CPU-minutes there, the model golden test more). They
# run as qemu's default CPU, which has the ARMv8.2 dot product (the sdot
# kernels, *_dotprod.c), then AARCH64_V80_TESTS again as a Cortex-A53 (ARMv8.0:
# the smull kernels). AARCH64_TESTS=. runs everything.
AARCH64_BUILD ?= build-aarch64
AARCH64_TESTS ?= ^(test_core|test_hadamard|test_turboquant|test_attention_(kivi|sdpa|formats|rabitq|nonfinite|turbo_pv8|turbo_qk8)|test_codecs_nonfinite)$$
AARCH64_V80_TESTS ?= ^test_attention_kivi$$
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

.PHONY: all deps model build demo quality-table test check-layout test-release test-python test-sanitize test-fuzz test-aarch64 install clean

all: demo

deps:
	@sh .ci/deps.sh
	@sh tools/fetch_model.sh --all

# the models of the model runtime's tests and README (skipped when present)
model:
	@sh tools/fetch_model.sh --all

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

test: check-layout test-release test-python test-sanitize test-fuzz test-aarch64

# The include order and unique file names of docs/INTERNALS.md ("Dependencies").
check-layout:
	python3 .ci/check_layout.py

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

# The NEON kernels under qemu (see AARCH64_TESTS); on an aarch64 host the
# Release ctest has run them natively already, elsewhere there is no
# cross compiler to ask for.
test-aarch64: deps
	@if [ "$$(uname -m)" != x86_64 ]; then echo "test-aarch64: skipped (host $$(uname -m), not x86_64)"; exit 0; fi; \
	set -e; start=$$(date +%s); \
	cmake -S . -B $(AARCH64_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release -DVQ_CUDA=OFF \
	    -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake; \
	cmake --build $(AARCH64_BUILD) -j $(JOBS); \
	echo "== aarch64 ctest under qemu-aarch64 (default CPU: NEON + dot product)"; \
	(cd $(AARCH64_BUILD) && ctest --output-on-failure -j $(JOBS) -R '$(AARCH64_TESTS)'); \
	echo "== aarch64 ctest under qemu-aarch64 -cpu cortex-a53 (ARMv8.0 NEON, no dot product)"; \
	(cd $(AARCH64_BUILD) && QEMU_CPU=cortex-a53 ctest --output-on-failure -j $(JOBS) -R '$(AARCH64_V80_TESTS)'); \
	echo "test-aarch64: passed in $$(( $$(date +%s) - start )) s"

# PREFIX=/some/where make install
PREFIX ?= /usr/local
install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

clean:
	rm -rf $(BUILD) $(SANITIZE_BUILD) $(FUZZ_BUILD) $(AARCH64_BUILD) build-py build-pyenv build-pyenv.lock build-pydeps.log
