# Two commands: `make demo` trains LeNet on the bundled MNIST sample (on the CPU, then on the GPU
# when one can run here); `make test` runs the suite.
BUILD ?= build
CMAKE_FLAGS ?=
JOBS ?= $(shell nproc)
# ccache hashes paths relative to the checkout, so another clone of it reuses the cache.
export CCACHE_BASEDIR ?= $(CURDIR)

# The tests of the kernels, precisions and ISA checks again with oneDNN held to AVX2 (tandem's own
# CPU-feature checks follow the same limit): a machine with AVX-512 also proves the AVX2 path that
# every x86-64 CPU tandem supports can take. backend_tests is the ops of every backend; of
# tandem_tests, the suites that run those ops through layers, precisions and the trainer.
AVX2_SUITES = Backends/LayerGradient.*:Backends/BranchingGradient.*:Backends/GatedStep.*:$\
	Backends/ClipGradNorm.*:Backends/Transfers.*:BatchNormModel.*:MixedPrecision.*:$\
	MixedPrecisionRun.*:LossScaling*:Optimizer*:Devices.*:ChannelsLast.*:LeNetOnMnist.*:$\
	Training.*

.PHONY: demo test test-avx2 fuzz build setup clean

demo: build
	$(BUILD)/trainer --config configs/lenet.yaml --device all

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

test-avx2: build
	DNNL_MAX_CPU_ISA=AVX2 $(BUILD)/tests/backend_tests
	DNNL_MAX_CPU_ISA=AVX2 $(BUILD)/tests/tandem_tests --gtest_filter='$(AVX2_SUITES)'

# Every fuzz target for FUZZ_SECONDS each (10 minutes: an hour in all), from where the last run
# left its corpus (build-fuzz/corpus/); CI runs them 20 s each.
FUZZ_SECONDS ?= 600
fuzz: setup
	bash tools/fuzz.sh $(FUZZ_SECONDS)

build: setup
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)
	cmake --build $(BUILD) -j $(JOBS)

setup:
	bash tools/setup.sh

clean:
	rm -rf $(BUILD)
