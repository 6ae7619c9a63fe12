# Entry points. Each installs what is missing, configures (Release), builds, then runs.
#
# TORCH picks the LibTorch: `debian` (default; libtorch-dev 1.13, CPU) or
# `pip` (the PyTorch 2.x wheel that scripts/install-torch-venv pins, in the
# project-local venv .venv, built into build-pip/; docs/build.md).
TORCH ?= debian
ifeq ($(TORCH),pip)
BUILD ?= build-pip
TORCH_CMAKE = -DQKV_TORCH_PYTHON=$(CURDIR)/.venv/bin/python
TORCH_DEPS = scripts/install-torch-venv .venv
else ifeq ($(TORCH),debian)
BUILD ?= build
TORCH_CMAKE = -DQKV_TORCH_PYTHON=
TORCH_DEPS = true
else
$(error TORCH=$(TORCH): expected debian or pip)
endif
JOBS ?= $(shell nproc)
DEMO_OUT ?= runs/demo

.PHONY: deps configure build cli python demo demo-mhca test bench clean check-asan check-minimal fuzz

deps:
	@scripts/install-deps
	@$(TORCH_DEPS)

# Ninja tracks each object's own command line, so adding a source file
# compiles that file alone (the Makefile generator writes every file's
# precompiled-header options into one flags.make that every object and the
# header itself depend on: a new file rebuilt everything). A build folder
# made by another generator is reconfigured (its objects are rebuilt, from
# ccache where they are in it).
configure: deps
	@if [ -f $(BUILD)/CMakeCache.txt ] && ! grep -q '^CMAKE_GENERATOR:INTERNAL=Ninja$$' $(BUILD)/CMakeCache.txt; then \
	  echo "make: $(BUILD)/ was configured for another generator; reconfiguring it for Ninja"; \
	  rm -rf $(BUILD)/CMakeCache.txt $(BUILD)/CMakeFiles; fi
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release $(TORCH_CMAKE) >/dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

# The qkv binary alone: what the demos run (the tests' objects are most of a
# full build).
cli: configure
	@cmake --build $(BUILD) -j $(JOBS) --target qkv

# The Python package into $(BUILD)/python: PYTHONPATH=$(BUILD)/python /usr/bin/python3 -c 'import qkv'
python: configure
	@cmake --build $(BUILD) -j $(JOBS) --target qkv_python

demo: cli
	@BUILD=$(BUILD) DEMO_OUT=$(DEMO_OUT) scripts/demo

demo-mhca: cli
	@BUILD=$(BUILD) DEMO_OUT=runs/demo-mhca scripts/mhca-demo

test: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

bench: configure
	@cmake --build $(BUILD) -j $(JOBS) --target $(patsubst bench/%.cpp,bench_%,$(wildcard bench/*.cpp))

# The build without any optional library (docs/build.md, "Optional libraries")
# in build-minimal/: it compiles, and the suites that check the refusals pass
# (the whole suite passes there too, its tests of what is missing skipped).
check-minimal: deps
	@cmake -S . -B build-minimal -G Ninja -DCMAKE_BUILD_TYPE=Release -DQKV_TORCH_PYTHON= \
	  -DQKV_WITHOUT="hdf5;nifti;xgboost;gloo;jemalloc" >/dev/null
	@cmake --build build-minimal -j $(JOBS)
	@cd build-minimal && ctest --output-on-failure -j $(JOBS) -R '^(core|pointcloud|tasks)$$'

# AddressSanitizer + UBSan build of the tests in build-asan/ (docs/reliability.md).
# LibTorch is not instrumented; scripts/lsan.supp names the leaks it owns.
check-asan:
	@cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Release -DQKV_SANITIZE=ON >/dev/null
	@cmake --build build-asan -j $(JOBS)
	@cd build-asan && ASAN_OPTIONS=$${ASAN_OPTIONS:-detect_leaks=1} \
	  LSAN_OPTIONS=suppressions=$(CURDIR)/scripts/lsan.supp:print_suppressions=0 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j $(JOBS)

# libFuzzer targets, one per reader, in build-fuzz/ (clang++-14; docs/reliability.md).
fuzz:
	@fuzz/build build-fuzz

clean:
	rm -rf $(BUILD)
