# dtlab Makefile: a thin, friendly front over CMake (CMake is the truth).
#   make benchmark   setup + build + every study + benchmarks + reports/latest/index.html (each study's time printed)
#   make benchmark QUICK=1   the same at every study's smallest point, in results-quick/ and reports/quick/
#                    (each study under `timeout`: SCENARIO_TIMEOUT=seconds, 600 with QUICK=1, else 3600)
#   make test        setup + build + all tests (ctest), then the skipped tests by label (ENFORCE_SKIPS=1: fail on
#                    a skip tests/skip_allowlist.txt does not allow here)
#   make setup | build | build-cuda | test-cuda | calibrate | report | fixtures | format | check | clean
#   make train | train-ddp | train-fsdp   one short run on `tiny` (1 process; 2 ranks of ddp / fsdp_full_shard under
#                    dtlab launch) into results/train/<name>; CONFIG=, STEPS=, PRESET=, ARGS='key=value ...', OUT=
#   make compare A=DIR B=DIR [COMPARE_FLAGS='--threshold 5 --fail-on-regression 10']   dtlab compare of two runs
#                    or two study directories
#   (train, train-ddp, train-fsdp and compare print the command they run)
BUILD      ?= build
BUILD_CUDA ?= build-cuda
JOBS       ?= 2
CMAKE_ARGS ?=
# QUICK=1: a smoke test of `make benchmark` (.ci/run runs it): every study at its smallest point (--quick), a quick
# calibration on loopback only, no micro-benchmarks or peer comparisons, into results-quick/ and reports/quick/.
QUICK      ?=
ifeq ($(QUICK),1)
RESULTS    ?= results-quick
REPORT     ?= reports/quick
QUICK_FLAG := --quick
SCENARIO_TIMEOUT ?= 600
endif
# Each scenario_* of `make benchmark` runs under `timeout`: one that is still running after SCENARIO_TIMEOUT seconds
# is stopped (SIGTERM, SIGKILL 30 s later) and named, and the benchmark fails. The longest full study, crossover,
# takes about 7 min on 2 cores; QUICK=1's studies take seconds to a minute or two.
SCENARIO_TIMEOUT ?= 3600
RESULTS    ?= results
REPORT     ?= reports/latest
DTLAB      := $(BUILD)/bin/dtlab
VENV_PY    := $(or $(DTLAB_CACHE),$(HOME)/.cache/dtlab)/venv/bin/python
PEER_REPEATS ?= 3
# Every recipe line runs in bash with pipefail: a stage that fails inside a pipeline (`bench | tee`) fails the target.
SHELL       := /bin/bash
.SHELLFLAGS := -o pipefail -c
CTEST_FLAGS := --output-on-failure --no-tests=error -j $(JOBS) --timeout 600
# ccache across clones: paths relative to the tree, precompiled headers allowed.
export CCACHE_BASEDIR   := $(CURDIR)
export CCACHE_SLOPPINESS := pch_defines,time_macros,include_file_mtime,include_file_ctime

.PHONY: setup configure build build-cuda test test-cuda benchmark calibrate bench-micro bench-peer bench-peer-tp bench-links bench-two-level report fixtures format check \
        clean train train-ddp train-fsdp compare

setup:
	@bash cmake/setup.sh

configure: setup
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CMAKE_ARGS)

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

# The cuda configuration: builds here without a GPU (NCCL, CUPTI, NVTX3, kernels/ for sm_80 + sm_90).
build-cuda: setup
	@cmake -S . -B $(BUILD_CUDA) -G Ninja -DCMAKE_BUILD_TYPE=Release -DDTLAB_CUDA=ON $(CMAKE_ARGS)
	@cmake --build $(BUILD_CUDA) -j $(JOBS)

# ctest with a JUnit file (BUILD/ctest-junit.xml), then what it skipped, by label (cmake/check_skips.py). With
# ENFORCE_SKIPS=1 (as CI runs it) a skip that tests/skip_allowlist.txt does not allow on this machine fails the target.
ENFORCE_SKIPS ?=
define ctest_with_skip_check
ctest --test-dir $(1) $(CTEST_FLAGS) --output-junit $(abspath $(1))/ctest-junit.xml; rc=$$?; \
python3 cmake/check_skips.py --build $(1) --junit $(abspath $(1))/ctest-junit.xml \
  $(if $(filter 1,$(ENFORCE_SKIPS)),--enforce) || { [ $$rc != 0 ] || rc=1; }; exit $$rc
endef

test: build
	@$(call ctest_with_skip_check,$(BUILD))

# The cuda build's CPU tests (GPU-only tests skip with a reason).
test-cuda: build-cuda
	@$(call ctest_with_skip_check,$(BUILD_CUDA))

# Calibration first (its machine profile gives every study's result.json a timed prediction), then every study
# (scenario_*), the micro-benchmarks, the PyTorch peer comparisons, then the report.
benchmark: build
	@mkdir -p $(RESULTS)
	@$(MAKE) --no-print-directory calibrate
	@for s in $(BUILD)/bin/scenario_*; do echo "== $$s"; start=$$(date +%s); \
	  timeout --kill-after=30 $(SCENARIO_TIMEOUT) $$s --out $(RESULTS) $(QUICK_FLAG); rc=$$?; \
	  if [ $$rc = 124 ] || [ $$rc = 137 ]; then \
	    echo "make benchmark: $$(basename $$s) timed out: stopped after $$(( $$(date +%s) - start )) s" \
	      "(SCENARIO_TIMEOUT=$(SCENARIO_TIMEOUT) s); its runs so far are in $(RESULTS)/$${s##*/scenario_}" >&2; \
	    exit 1; fi; \
	  [ $$rc = 0 ] || { echo "make benchmark: $$(basename $$s) failed (exit $$rc)" >&2; exit 1; }; \
	  echo "== $$(basename $$s): $$(( $$(date +%s) - start )) s"; done
	@if [ "$(QUICK)" != 1 ]; then $(MAKE) --no-print-directory bench-micro && $(MAKE) --no-print-directory bench-peer; fi
	@$(MAKE) --no-print-directory report

# Machine profile: comm-bench (world 2) + GEMM/optimizer microbenchmarks, fitted (analysis/cost/); where an emulated
# cluster can be built, also both levels of one (2 nodes x 2 ranks, 1 Gbit/s) for the runs on clusters, timing fp32
# only: the cluster studies (crossover, tensor_parallel) train in fp32, and on an AVX2-only CPU the bf16 and fp16
# steps were 6 of that calibration's 8 minutes (a half-precision run on a cluster is predicted at fp32's rates and
# its prediction says so).
calibrate: build
	@$(DTLAB) calibrate --out $(RESULTS)/calibration/profile.json $(QUICK_FLAG)
	@if [ "$(QUICK)" = 1 ]; then echo "calibrate: QUICK=1, loopback only"; \
	elif $(DTLAB) launch --nodes 2 -n 1 true >/dev/null 2>&1; then \
	  $(DTLAB) calibrate --out $(RESULTS)/calibration/cluster/profile.json --nodes 2 --ranks 2 --inter-link 1gbit \
	    --dtypes fp32; \
	else echo "calibrate: no emulated cluster on this machine (needs root): cluster runs predict from the loopback profile"; fi

# dtlab ddp / fsdp_full_shard / pipeline (pp 2, 1F1B) vs PyTorch DDP / FSDP2 / pipelining on the same model, batches
# and optimizer (world 2).
bench-peer: build
	@mkdir -p $(RESULTS)/peer
	@$(VENV_PY) tests/reference/compare_ddp.py --dtlab $(DTLAB) --repeats $(PEER_REPEATS) \
	  --work $(BUILD)/peer-work/ddp --out $(RESULTS)/peer/ddp_vs_pytorch.json
	@$(VENV_PY) tests/reference/compare_fsdp.py --dtlab $(DTLAB) --repeats $(PEER_REPEATS) \
	  --work $(BUILD)/peer-work/fsdp --out $(RESULTS)/peer/fsdp_vs_pytorch.json
	@$(VENV_PY) tests/reference/compare_pipeline.py --dtlab $(DTLAB) --repeats $(PEER_REPEATS) --schedule 1f1b \
	  --work $(BUILD)/peer-work/pipeline --out $(RESULTS)/peer/pipeline_vs_pytorch.json

# dtlab tensor parallel vs PyTorch DTensor TP: tp 2 (world 2) and tp 2 x FULL_SHARD / FSDP2 dp 2 (world 4); about
# 7 to 8 minutes on 2 cores, not part of `make benchmark` (docs/peer-comparison.md).
bench-peer-tp: build
	@mkdir -p $(RESULTS)/peer
	@$(VENV_PY) tests/reference/compare_tp.py --dtlab $(DTLAB) --repeats $(PEER_REPEATS) --skip-tiny-check \
	  --work $(BUILD)/peer-work/tp --out $(RESULTS)/peer/tp_vs_pytorch.json
	@$(VENV_PY) tests/reference/compare_tp.py --dtlab $(DTLAB) --repeats $(PEER_REPEATS) --skip-tiny-check \
	  --world-size 4 --strategy fsdp_full_shard --work $(BUILD)/peer-work/tp_fsdp --out $(RESULTS)/peer/tp_fsdp_vs_pytorch.json

# The emulated cluster's links (needs root or CAP_NET_ADMIN): 2 nodes x 2 ranks at three inter-node rates; per rate
# the inter-node point-to-point rate against the set rate and the 64 MiB all_reduce against the link bound.
LINK_RATES ?= 200mbit 1gbit 4gbit
bench-links: build
	@mkdir -p $(RESULTS)/links
	@for r in $(LINK_RATES); do echo "== inter-node link $$r"; \
	  $(DTLAB) comm-bench --nodes 2 --ranks 2 --inter-link $$r -b 64M -e 64M -n 2 -w 1 --op all_reduce \
	    --algorithm all --json $(RESULTS)/links/all_reduce_$$r.json > $(RESULTS)/links/all_reduce_$$r.txt || \
	    { cat $(RESULTS)/links/all_reduce_$$r.txt; exit 1; }; \
	  grep -E '^# (Cluster|Point-to-point|Inter-node|Link bound|all_reduce busbw)' $(RESULTS)/links/all_reduce_$$r.txt; \
	done

# The two-level comm model against the links (needs root): calibrated on the cluster at 1 Gbit/s, each collective of
# one level (--group cross) and of the whole job predicted at every rate of LINK_RATES; prints each table's median
# error. Figures in docs/performance.md ("Two-level cost model").
bench-two-level: build
	@mkdir -p $(RESULTS)/links
	@test -f $(RESULTS)/calibration/cluster/profile.json || \
	  $(DTLAB) calibrate --out $(RESULTS)/calibration/cluster/profile.json --nodes 2 --ranks 2 --inter-link 1gbit
	@for r in $(LINK_RATES); do for g in cross world; do echo "== $$g at $$r"; \
	  $(DTLAB) comm-bench --nodes 2 --ranks 2 --inter-link $$r --group $$g -b 1K -e 64M -f 4 -n 3 -w 1 --repeats 2 \
	    --model $(RESULTS)/calibration/cluster/profile.json > $(RESULTS)/links/model_$${g}_$$r.txt || \
	    { cat $(RESULTS)/links/model_$${g}_$$r.txt; exit 1; }; \
	  grep -E '^# model: median' $(RESULTS)/links/model_$${g}_$$r.txt; \
	done; done

# Google Benchmark: GEMM on the model's shapes vs one training step of `small` (the MFU ratio).
bench-micro: build
	@mkdir -p $(RESULTS)/bench
	@$(BUILD)/bin/bench_train --benchmark_min_time=2 --benchmark_out=$(RESULTS)/bench/bench_train.json \
	  --benchmark_out_format=json | tee $(RESULTS)/bench/bench_train.txt

report:
	@$(DTLAB) report $(RESULTS) -o $(REPORT)
	@echo "report: $(REPORT)/index.html"

# docs/performance.md from the results of a `make benchmark` (analysis/figures_doc.hpp): written whole, never by hand.
.PHONY: figures
figures:
	@$(BUILD)/bin/dtlab-report --figures $(RESULTS) > docs/performance.md.tmp || { rm -f docs/performance.md.tmp; exit 1; }
	@mv docs/performance.md.tmp docs/performance.md
	@echo "figures: docs/performance.md from $(RESULTS)"

# The common runs, seconds each on 2 cores: one config (the DDP study's, at PRESET for STEPS steps), so the three
# differ only in strategy and ranks, train alike (the same losses) and `make compare` can set them side by side.
# CONFIG replaces the config, ARGS adds overrides after ours (a later one wins), OUT replaces the run directory.
# Their recipe lines have no @: make prints each command before it runs it. The token file the config reads is built
# once if missing.
CONFIG         ?= scenarios/configs/ddp.yaml
STEPS          ?= 100
PRESET         ?= tiny
ARGS           ?=
COMPARE_FLAGS  ?=
CORPUS         := data/corpus.bin
RUN_OVERRIDES   = model.preset=$(PRESET) train.steps=$(STEPS) instrument.log_every=10

$(CORPUS): | build
	$(DTLAB) data build --out $@

train: build $(CORPUS)
	$(DTLAB) train --config $(CONFIG) parallel.strategy=single train.micro_batch=8 $(RUN_OVERRIDES) $(ARGS) \
	  --out $(or $(OUT),$(RESULTS)/train/single)

train-ddp: build $(CORPUS)
	$(DTLAB) launch -n 2 $(DTLAB) train --config $(CONFIG) parallel.strategy=ddp train.micro_batch=4 \
	  $(RUN_OVERRIDES) $(ARGS) --out $(or $(OUT),$(RESULTS)/train/ddp)

train-fsdp: build $(CORPUS)
	$(DTLAB) launch -n 2 $(DTLAB) train --config $(CONFIG) parallel.strategy=fsdp_full_shard train.micro_batch=4 \
	  $(RUN_OVERRIDES) $(ARGS) --out $(or $(OUT),$(RESULTS)/train/fsdp)

# AddressSanitizer + UndefinedBehaviorSanitizer (docs/testing.md, "Sanitizers"): a separate build, BUILD_ASAN, of only
# what it runs (the torch-free test programs, the launcher's tests, dtlab), then cmake/sanitizers/check_asan.sh: those
# tests and short two-rank training runs, any report failing the target.
BUILD_ASAN   ?= build-asan
ASAN_TARGETS := dtlab dtlab-report analysis_tests config_tests process_tests layers_tests study_tests launch_tests
.PHONY: check-asan
check-asan: setup
	@cmake -S . -B $(BUILD_ASAN) -G Ninja -DCMAKE_BUILD_TYPE=Release -DDTLAB_SANITIZE=address $(CMAKE_ARGS)
	@cmake --build $(BUILD_ASAN) -j $(JOBS) --target $(ASAN_TARGETS)
	@bash cmake/sanitizers/check_asan.sh $(BUILD_ASAN)

# Two runs or two study directories, matched by run name: medians, ratio, confidence interval and a verdict per metric.
compare: build
	@if [ -z "$(A)" ] || [ -z "$(B)" ]; then \
	  echo "usage: make compare A=RUN_OR_STUDY_DIR B=RUN_OR_STUDY_DIR [COMPARE_FLAGS='--threshold 5 --fail-on-regression 10']" >&2; \
	  exit 2; fi
	$(DTLAB) compare $(A) $(B) $(COMPARE_FLAGS)

# The analysis tests' fixtures and the golden loss file, regenerated from real runs of this build (tiny runs, about a
# minute): after a change of result.json or of the trainer's numerics; commit what it lists.
fixtures: build
	@python3 tests/analysis/fixtures/make_fixtures.py --bin $(BUILD)/bin

format:
	@git ls-files '*.cpp' '*.hpp' '*.cu' '*.cuh' | xargs clang-format -i

# Formatting, clang-tidy on the whole tree (each file's clean verdict cached by its contents and every header it
# reads, so an unchanged file is not linted twice), and the tests.
check: build
	@git ls-files '*.cpp' '*.hpp' '*.cu' '*.cuh' | xargs clang-format --dry-run --Werror
	@python3 cmake/tidy_cached.py $(BUILD) -j $(JOBS)
	@$(MAKE) --no-print-directory test

clean:
	rm -rf $(BUILD) $(BUILD_CUDA)
