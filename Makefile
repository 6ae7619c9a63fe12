# Entry points. Each installs what is missing, configures (Release), builds, then runs.
BUILD ?= build
JOBS ?= $(shell nproc)
DEMO_OUT ?= runs/demo

.PHONY: deps configure build demo demo-mhca test bench clean

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

clean:
	rm -rf $(BUILD)
