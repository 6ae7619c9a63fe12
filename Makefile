# Entry points. Each installs what is missing, configures (Release), builds, then runs.
BUILD ?= build
JOBS ?= $(shell nproc)
DEMO_OUT ?= runs/demo
CCACHE := $(shell command -v ccache)

.PHONY: deps configure build demo demo-mhca test bench clean check-asan fuzz

deps:
	@scripts/install-deps

configure: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

demo: build
	@BUILD=$(BUILD) DEMO_OUT=$(DEMO_OUT) scripts/demo

demo-mhca: build
	@BUILD=$(BUILD) DEMO_OUT=runs/demo-mhca scripts/mhca-demo

test: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

bench: configure
	@cmake --build $(BUILD) -j $(JOBS) --target $(patsubst bench/%.cpp,bench_%,$(wildcard bench/*.cpp))

# AddressSanitizer + UBSan build of the tests in build-asan/ (docs/reliability.md).
# LibTorch is not instrumented; scripts/lsan.supp names the leaks it owns.
check-asan:
	@cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Release -DQKV_SANITIZE=ON \
	  -DCMAKE_CXX_COMPILER_LAUNCHER=$(CCACHE) -DCMAKE_C_COMPILER_LAUNCHER=$(CCACHE) >/dev/null
	@cmake --build build-asan -j $(JOBS)
	@cd build-asan && ASAN_OPTIONS=$${ASAN_OPTIONS:-detect_leaks=1} \
	  LSAN_OPTIONS=suppressions=$(CURDIR)/scripts/lsan.supp:print_suppressions=0 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j $(JOBS)

# libFuzzer targets, one per reader, in build-fuzz/ (clang++-14; docs/reliability.md).
fuzz:
	@fuzz/build build-fuzz

clean:
	rm -rf $(BUILD)
