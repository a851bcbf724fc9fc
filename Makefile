# The README's commands. Each target installs what is missing, configures and
# builds what it needs, then does its job. Build trees live under build/.
JOBS    ?= 2
ARGS    ?=
GEN     := -G Ninja
DEPS    := scripts/install-deps.sh

.PHONY: run test bench clean deps build-release build-test build-tsan build-full

deps:
	@bash $(DEPS)

build-release: deps
	@cmake -S . -B build/release $(GEN) -DCMAKE_BUILD_TYPE=Release -DWEFT_BUILD_TESTS=OFF >/dev/null
	@cmake --build build/release -j $(JOBS)

# The test build: debug info, optimised enough to stress the concurrency code,
# AddressSanitizer + UBSan on everything.
build-test: deps
	@cmake -S . -B build/test $(GEN) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWEFT_SANITIZE=address \
	  -DWEFT_BUILD_BENCHMARKS=ON >/dev/null
	@cmake --build build/test -j $(JOBS)

# ThreadSanitizer build of the concurrency code (base and core tests).
build-tsan: deps
	@cmake -S . -B build/tsan $(GEN) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWEFT_SANITIZE=thread \
	  -DWEFT_BUILD_EXAMPLES=OFF -DWEFT_BUILD_BENCHMARKS=OFF -DWEFT_BUILD_TOOLS=OFF >/dev/null
	@cmake --build build/tsan -j $(JOBS)

# The suite again, optimised as build-release and without sanitizers: the
# code users run, and the stress tests at full size (weft_test::scaled() in
# tests/test_scale.hpp picks the reduced sizes under a sanitizer).
build-full: deps
	@cmake -S . -B build/full $(GEN) -DCMAKE_BUILD_TYPE=Release -DWEFT_BUILD_TESTS=ON \
	  -DWEFT_BUILD_EXAMPLES=OFF -DWEFT_BUILD_BENCHMARKS=OFF >/dev/null
	@cmake --build build/full -j $(JOBS)

# The main job: the molecular-dynamics mini-app on all cores of this machine,
# one process, balancing on (kNeighbor runs in `make bench`).
run: build-release
	@build/release/examples/md --weft:lb=greedy-refine --weft:lb-stats $(ARGS)

test: build-test build-tsan build-full
	@cd build/test && ctest --output-on-failure -j $(JOBS)
	@cd build/tsan && ctest --output-on-failure -j $(JOBS)
	@cd build/full && ctest --output-on-failure -j $(JOBS)

# Every benchmark, JSON collected in build/bench/, tables in docs/benchmarks.md.
bench: build-release
	@bash bench/run_all.sh build/release build/bench docs/benchmarks.md

clean:
	rm -rf build
