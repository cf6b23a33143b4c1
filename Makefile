# DirectCCL top-level entry points. Quick start: `make run` and `make test`.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
ifeq ($(DCCL_WERROR),1)
CMAKE_FLAGS += -DDCCL_WERROR=ON
endif

.PHONY: all deps build run test clean

all: build

deps:
	@scripts/install-deps

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

# Main job: a 4-rank allreduce benchmark on the embedded defaults.
run: build
	$(BUILD)/tools/dccl-run -n 4 $(BUILD)/tools/dccl-perf all_reduce -b 8 -e 64M -f 4

test: build
	cd $(BUILD) && ctest --output-on-failure --timeout 600 -j 1

clean:
	rm -rf $(BUILD)
