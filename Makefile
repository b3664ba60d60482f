# Two commands: `make demo` trains LeNet on the bundled MNIST sample (on the CPU, then on the GPU
# when one can run here); `make test` runs the suite.
BUILD ?= build
CMAKE_FLAGS ?=
JOBS ?= $(shell nproc)
# ccache hashes paths relative to the checkout, so another clone of it reuses the cache.
export CCACHE_BASEDIR ?= $(CURDIR)

.PHONY: demo test build setup clean

demo: build
	$(BUILD)/trainer --config configs/lenet.yaml --device all

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

build: setup
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)
	cmake --build $(BUILD) -j $(JOBS)

setup:
	bash tools/setup.sh

clean:
	rm -rf $(BUILD)
