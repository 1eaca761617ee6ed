# ember — the commands in README.md. Everything builds in build/ with CMake + Ninja.
#
#   make demo     install missing packages, build, train + save + reload + evaluate the
#                 Fashion-MNIST MLP (examples/fashion_mnist, then `ember eval`)
#   make test     install missing packages, check formatting and the line budget (lint),
#                 build, run every CTest test (and the whole CPU suite under ASan + UBSan,
#                 built in $(BUILD_DIR)-asan; the threading tests under ThreadSanitizer,
#                 built in $(BUILD_DIR)-tsan)
#   make bench    also install libtorch, build the benchmarks, write build/bench.jsonl
#   make fuzz     fuzz the checkpoint loader with libFuzzer for FUZZ_SECONDS (clang-14)
#   make format   clang-format our sources in place (format-check: report only;
#                 line-budget: no source file over LINE_BUDGET = 1000 lines; layers: nothing
#                 above ops includes ops, kernels, the kernel table or a backend (tools/
#                 check_layers.py); notes: every cited Note exists; lint: all four)
#   make clean    remove build/
#
# Overridable: BUILD_DIR, BUILD_TYPE, JOBS (compile jobs), TEST_JOBS, CMAKE_ARGS, FUZZ_SECONDS.

BUILD_DIR  ?= build
BUILD_TYPE ?= Release
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
TEST_JOBS  ?= 2
LINE_BUDGET ?= 1000
CMAKE_ARGS ?=
ASAN_BUILD_DIR ?= $(BUILD_DIR)-asan
TSAN_BUILD_DIR ?= $(BUILD_DIR)-tsan
FUZZ_BUILD_DIR ?= $(BUILD_DIR)-fuzz
FUZZ_SECONDS ?= 600
# The sanitizer run: leaks reported, the first UBSan finding fatal (-fno-sanitize-recover).
# oneDNN is kept out of the sanitizer run (EMBER_ONEDNN_LIBRARY names no file, so convolutions
# take im2col and the oneDNN tests skip, saying why): with its OpenMP threads alive at exit,
# LeakSanitizer's tracer crashes ("Tracer caught signal 11") after every test has passed. The
# plain run tests the oneDNN path.
ASAN_ENV := ASAN_OPTIONS=detect_leaks=1:strict_string_checks=1 UBSAN_OPTIONS=print_stacktrace=1 \
            EMBER_ONEDNN_LIBRARY=/nonexistent/libdnnl.so.2

# The ThreadSanitizer run (docs/threads.md): the first report fails it (halt_on_error=1; TSan's
# exit status is 66). tests/tsan.supp says why each of its entries is not ember's bug. oneDNN is
# kept out as in the ASan run: its OpenMP runtime (libgomp) is not built with TSan, which then
# reports its thread start-up as races; the plain run tests the oneDNN path from threads.
TSAN_ENV := TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$(CURDIR)/tests/tsan.supp" \
            EMBER_ONEDNN_LIBRARY=/nonexistent/libdnnl.so.2

# Debian packages. Build and test: compiler, CMake, Ninja, OpenBLAS (GEMM; pthread flavour),
# GoogleTest, nlohmann-json (configs, checkpoint headers, fixtures), zlib, CLI11 (the `ember`
# command), xxHash (checkpoint checksum), the Fashion-MNIST files (make demo), Open MPI
# (mpirun and the headers libember_mpi.so is built against: distributed training, its tests),
# libjpeg-turbo's TurboJPEG and libpng (JPEG/PNG decoding, opened with dlopen at first use).
DEPS := build-essential cmake ninja-build clang-format libopenblas-dev libopenblas0-pthread libgtest-dev \
        nlohmann-json3-dev zlib1g-dev libcli11-dev libxxhash-dev dataset-fashion-mnist \
        openmpi-bin libopenmpi-dev libturbojpeg0 libpng16-16
# oneDNN (libdnnl-dev: its headers and libdnnl.so.2): the CPU convolutions, opened with dlopen
# at the first one (docs/layers.md, "Convolution backends"); without it they run im2col + GEMM.
DEPS += libdnnl-dev
# The tests also check PyTorch interop (io.interop_torch: torch reads ember's files and ember
# reads torch's), so make test installs python3-torch; the image fixtures' generator
# (tests/gen_image_fixtures.py) uses PIL and torchvision.
TEST_DEPS := python3-torch python3-pil python3-torchvision
# Benchmarks also time PyTorch: libtorch for C++ programs, python3-torch for scripts,
# torchvision + PIL for bench_image_folder.
BENCH_DEPS := libtorch-dev python3-torch python3-pil python3-torchvision

CONFIGURE := cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CMAKE_ARGS)
# make test/demo leave the benchmarks out (they compile libtorch headers); make bench adds them.
BUILD_ARGS := -DEMBER_BUILD_BENCH=OFF
SOURCE_DIRS := include src tests examples bench tools

.PHONY: all deps deps-test deps-bench configure build demo test test-asan test-tsan bench fuzz format format-check line-budget layers notes lint clean

all: build

# Installs whichever of $(1) dpkg does not know, with one apt-get update; as root, or
# through sudo. On a system without dpkg it only says so: provide the packages yourself.
define install_packages
@set -e; \
if ! command -v dpkg >/dev/null 2>&1; then \
  echo "make deps: no dpkg here; make sure these are installed: $(1)"; exit 0; \
fi; \
missing=""; \
for p in $(1); do \
  dpkg -s "$$p" 2>/dev/null | grep -q '^Status: install ok installed' || missing="$$missing $$p"; \
done; \
if [ -z "$$missing" ]; then echo "make deps: all packages present"; exit 0; fi; \
echo "make deps: installing$$missing"; \
if [ "$$(id -u)" = 0 ]; then sudo=""; \
elif command -v sudo >/dev/null 2>&1; then sudo="sudo"; \
else echo "make deps: need root or sudo to install:$$missing" >&2; exit 1; fi; \
$$sudo apt-get update; \
$$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $$missing
endef

deps:
	$(call install_packages,$(DEPS))

deps-test:
	$(call install_packages,$(DEPS) $(TEST_DEPS))

deps-bench:
	$(call install_packages,$(DEPS) $(BENCH_DEPS))

configure: deps
	$(CONFIGURE) $(BUILD_ARGS)

build: configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

demo: build
	./$(BUILD_DIR)/examples/fashion_mnist mlp 5 $(BUILD_DIR)/mlp_fashion_mnist.safetensors
	./$(BUILD_DIR)/tools/ember eval $(BUILD_DIR)/mlp_fashion_mnist.safetensors --dataset fashion-mnist

# make test (CI) compiles ember_tests as a unity build too, like the sanitizer trees' tests:
# batches of test files in one translation unit (tests/CMakeLists.txt, EMBER_UNITY_TESTS). The
# setting stays in build/'s CMake cache: cmake -DEMBER_UNITY_TESTS=OFF build turns it off again.
test: BUILD_ARGS += -DEMBER_UNITY_TESTS=ON
test: deps-test lint build
	ctest --test-dir $(BUILD_DIR) --output-on-failure -j$(TEST_JOBS)
	$(MAKE) test-asan
	$(MAKE) test-tsan

# The whole CPU suite (ember_tests_asan: every tests/test_*.cpp, the io helper and the
# `ember` command) against the library built with ASan + UBSan, two tests at a time.
test-asan: deps
	cmake -S . -B $(ASAN_BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE= -DEMBER_SANITIZE=ON -DEMBER_CUDA=OFF \
	  -DEMBER_BUILD_TOOLS=OFF -DEMBER_BUILD_BENCH=OFF $(CMAKE_ARGS)
	cmake --build $(ASAN_BUILD_DIR) -j $(JOBS) --target ember_tests_asan
	$(ASAN_ENV) ctest --test-dir $(ASAN_BUILD_DIR) -L asan --output-on-failure -j$(TEST_JOBS)

# The threading tests (ember_tests_tsan: the pool, DataLoader workers and prefetch, async
# checkpoints, shared inference, separate training, the tcp backend) against the library built
# with ThreadSanitizer, a unity build like the ASan tree's (tests/CMakeLists.txt, EMBER_TSAN).
test-tsan: deps
	cmake -S . -B $(TSAN_BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE= -DEMBER_TSAN=ON -DEMBER_CUDA=OFF \
	  -DEMBER_BUILD_TOOLS=OFF -DEMBER_BUILD_BENCH=OFF $(CMAKE_ARGS)
	cmake --build $(TSAN_BUILD_DIR) -j $(JOBS) --target ember_tests_tsan
	$(TSAN_ENV) ctest --test-dir $(TSAN_BUILD_DIR) -L tsan --output-on-failure -j$(TEST_JOBS)

# libFuzzer on the loader (fuzz/): seeds from gen_seeds, one process, FUZZ_SECONDS long.
fuzz:
	$(call install_packages,clang-14 libclang-rt-14-dev)
	cmake -S fuzz -B $(FUZZ_BUILD_DIR) -G Ninja -DCMAKE_CXX_COMPILER=clang++-14
	cmake --build $(FUZZ_BUILD_DIR) -j $(JOBS) --target fuzz_safetensors gen_seeds
	mkdir -p $(FUZZ_BUILD_DIR)/corpus $(FUZZ_BUILD_DIR)/seeds
	./$(FUZZ_BUILD_DIR)/gen_seeds $(FUZZ_BUILD_DIR)/seeds
	./$(FUZZ_BUILD_DIR)/fuzz_safetensors -max_total_time=$(FUZZ_SECONDS) \
	  -print_final_stats=1 -artifact_prefix=$(FUZZ_BUILD_DIR)/ $(FUZZ_BUILD_DIR)/corpus $(FUZZ_BUILD_DIR)/seeds

bench: deps-bench
	$(CONFIGURE) -DEMBER_BUILD_BENCH=ON -DEMBER_BENCH_LIBTORCH=ON
	cmake --build $(BUILD_DIR) -j $(JOBS) --target bench

format:
	find $(SOURCE_DIRS) -type f \( -name '*.cpp' -o -name '*.hpp' -o -name '*.h' \
	  -o -name '*.cu' -o -name '*.cuh' \) -print0 | xargs -0 -r clang-format -i --style=file

format-check:
	find $(SOURCE_DIRS) -type f \( -name '*.cpp' -o -name '*.hpp' -o -name '*.h' \
	  -o -name '*.cu' -o -name '*.cuh' \) -print0 | \
	  xargs -0 -r clang-format --dry-run --Werror --style=file

# STYLE.md §12: no source file over $(LINE_BUDGET) lines (each offender is listed).
line-budget:
	@find $(SOURCE_DIRS) -type f \( -name '*.cpp' -o -name '*.hpp' -o -name '*.h' \
	  -o -name '*.cu' -o -name '*.cuh' \) -print0 | xargs -0 -r wc -l | \
	  awk '$$2 != "total" && $$1 > $(LINE_BUDGET) { print "line-budget: " $$2 " has " $$1 \
	    " lines (expected at most $(LINE_BUDGET); split it by family)"; bad = 1 } \
	    END { if (bad) exit 1; print "line-budget: every source file is within $(LINE_BUDGET) lines" }'

# The layering rule (issue 30): no include of the op and kernel layers from above them but
# those listed, each with its reason, in tools/layering_allowlist.txt; the self-test plants a
# break in a scratch tree and expects the check to fail.
layers:
	@python3 tools/check_layers.py --self-test
	@python3 tools/check_layers.py

# Every cited Note exists (STYLE.md's Notes; tools/check_notes.py, with its self-test).
notes:
	@python3 tools/check_notes.py --self-test
	@python3 tools/check_notes.py

# The mechanical style checks make test runs first: formatting, the line budget, the layers,
# the Notes.
lint: format-check line-budget layers notes

clean:
	rm -rf $(BUILD_DIR)
