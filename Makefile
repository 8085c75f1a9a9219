# The two commands: `make demo` and `make test`. Each installs what it needs (Debian
# packages, see scripts/install-deps.sh), configures and builds first.
BUILD      ?= build
ASAN_BUILD ?= build-asan
JOBS       ?= 2
CMAKE_ARGS ?=

.PHONY: all deps configure build test demo torture asan tsan tsan-build fuzz bench-overhead bench-worker bench-master bench-ckpt bench-pull bench-failslow gpu-dryrun soak lint clean

all: build

deps:
	@scripts/install-deps.sh

$(BUILD)/build.ninja: | deps
	@cmake -S . -B $(BUILD) -G Ninja $(CMAKE_ARGS) >/dev/null

configure: $(BUILD)/build.ninja

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

# Every test: unit suites, gpusim's own suite, the multi-process end-to-end tests. The long
# soaks (label soak) run with `make soak`.
# Two streams at once (scripts/run-tests.sh): the end-to-end tests timed against the job's own
# pace or the clock (label e2e-timed) one at a time, and beside them the rest two at a time at a
# low CPU share (a cgroup; where none can be made, one stream after the other), so that they
# fill the idle machine without slowing the timed job; then the checkpoint campaign's seeds
# (label e2e-campaign) on the whole machine.
test: build
	@scripts/run-tests.sh $(BUILD) 300

# Long runs: a healthy 5-minute job with a 20 s host pause and normal jitter, protected by
# ftmaster and two workers: no incident.
soak: build
	@ctest --test-dir $(BUILD) --verbose --timeout 900 -L soak

# The checkpoint campaign on real processes: SEEDS random fault schedules from FIRST_SEED, each
# checked (one step restored everywhere, bit-identical, no whole step lost, no false stop, nothing
# left in /dev/shm); ends with RESULT torture ... A failing seed is printed and reruns alone.
SEEDS ?= 20
FIRST_SEED ?= 1
torture: build
	@B=$(abspath $(BUILD)); LD_LIBRARY_PATH=$$B/gpusim GPUSIM_KERNEL_LIBS=$$B/tests/workloads/trainsim/libtrainsim_kernels.so \
	  PYTHONDONTWRITEBYTECODE=1 python3 $(CURDIR)/tests/e2e/torture_e2e_test.py \
	  --launch $(CURDIR)/tests/workloads/trainsim/launch.py --trainsim $$B/tests/workloads/trainsim/trainsim \
	  --libft $$B/preload/libft.so --ftworker $$B/ftworker/ftworker --ftmaster $$B/ftmaster/ftmaster \
	  --reference $$B/tests/workloads/trainsim/trainsim_reference --seeds $(SEEDS) --first-seed $(FIRST_SEED)

# The main job: a simulated two-node training job on the CPU stand-ins, protected by ft, with
# a hang injected on node1: ftmaster (embedded Redis) names the rank, the healthy ranks save just
# in time, the job is stopped and node1 evicted; node2 replaces it with nothing in its memory or
# on its disk, its worker pulls ranks 4-7's shards from node0's arenas over TCP, the relaunched
# ranks restore the saved step and end with the reference checksums (RESULT demo detect_s save_s
# pull_s restore_s fault_to_resume_s ok=1; fault -> resumed within 30 s).
demo: build
	@python3 scripts/demo.py --build $(BUILD)

# What libft.so adds per call and per training step (RESULT overhead ...).
bench-overhead: build
	@bench/overhead.sh $(BUILD)

# How fast ftmaster goes from the first timeout event to the incident among 1k, 4k, 16k and 131k
# synthetic ranks, and its CPU while the job runs (RESULT master window_ms decide_ms e2e_ms cpu_pct
# write_bytes_s), on one redis-server; then 16k and 131k on a 3-shard Redis Cluster (RESULT
# master_cluster ... cluster_e2e_ms ... shard_write_bytes_s=a/b/c).
bench-master: build
	@$(BUILD)/bench/master_bench --ftmaster $(BUILD)/ftmaster/ftmaster
	@$(BUILD)/bench/master_bench --ftmaster $(BUILD)/ftmaster/ftmaster --cluster --ranks 16384,131072 --trials 3

# What one ftworker costs (% of one core) for 8 ranks at 10k records/s each, and how long a hang
# takes from its timeout threshold to the event in Redis (RESULT worker ...); what a healthy
# 8-rank trainsim job makes Redis take in per rank per second (RESULT redis_volume ...).
bench-worker: build
	@python3 bench/worker_bench.py $(BUILD)
	@python3 bench/redis_volume.py $(BUILD)

# Fail-slow on the stand-ins: a rank 1.2x/1.5x/3x slower named (localize_s from the fault), the
# 1.5x one evicted and the job back at full speed after the relaunch (step_time_after_ratio),
# every rank 1.3x slower named job-wide; no healthy node evicted (RESULT failslow ...).
bench-failslow: build
	@python3 bench/failslow_bench.py $(BUILD)

# What a checkpoint costs on the stand-ins, 1 GiB per rank (and a 4-rank run): JIT save against
# memcpy, periodic save blocking, local-tier persist against dd oflag=direct, restore from each
# source (RESULT ckpt save_ratio block_s persist_ratio restore_arena_s restore_dir_s restore_remote_s).
bench-ckpt: build
	@python3 bench/ckpt_bench.py $(BUILD)

# How fast a replacement node pulls a checkpoint copy from a peer's memory: 2 GiB from a server
# process on loopback through the transfer engine (TCP; 1 and 4 connections, every chunk verified)
# against a plain single-stream socket copy of the same bytes, time to first byte, and pull +
# verify + host-to-device restore (RESULT pull ratio ratio_1conn engine_gbps socket_gbps
# first_byte_ms restore_s). On gpusim's libcudart by default; BENCH_REAL=1 uses the runtime the
# loader finds (a GPU host). PULL_ARGS passes flags (pull_bench --help).
bench-pull: build
	@$(if $(filter 1,$(BENCH_REAL)),,LD_LIBRARY_PATH=$(abspath $(BUILD))/gpusim$${LD_LIBRARY_PATH:+:$$LD_LIBRARY_PATH}) \
	  $(BUILD)/bench/pull_bench $(PULL_ARGS)

# The kit for a machine with one GPU (bench/gpu/README.md), end to end on the stand-ins:
# prepare.sh gathers it from the build into a temporary folder, run.sh runs it in quick mode on
# gpusim. `make test` runs the same as the CTest bench.gpu_dryrun.
gpu-dryrun: build
	@bench/gpu/dryrun.sh $(BUILD)

# AddressSanitizer + UndefinedBehaviorSanitizer build of everything, running the suites whose
# programs are built by our compiler (nvcc-built workloads are not instrumented; label nvcc).
asan: deps
	@cmake -S . -B $(ASAN_BUILD) -G Ninja -DFT_SANITIZE=ON $(CMAKE_ARGS) >/dev/null
	@cmake --build $(ASAN_BUILD) -j $(JOBS)
	@ctest --test-dir $(ASAN_BUILD) --output-on-failure --timeout 300 -LE 'nvcc|e2e'

# ThreadSanitizer build of the concurrent parts: common, shm, libft.so inside a gpusim program
# (its poller and checkpoint agent threads) and under termination signals (the ft-term thread), the transfer engine (server I/O threads, a pull's
# connection threads), the prefetcher (one thread per rank, retries, the daemon's refresh) and the metrics
# server (its Beast thread rendering while the owner updates; stop with connections open), the
# health sampler (its thread reading while the worker's loop takes).
# Not preload.ckpt_device_order: it races two simulated device streams on purpose (a copy while
# the update runs, which the save must call torn), and gpusim's streams are host threads. Nor
# preload.ckpt_wait_cpu: it measures the CPU time of the agent's waits, which TSan multiplies.
TSAN_BUILD ?= build-tsan
tsan: tsan-build
	@ctest --test-dir $(TSAN_BUILD) --output-on-failure --timeout 300 -j 2 -R '^(shm|common)_test|Test\.|^preload\.behavior$$|^preload\.ckpt_|^preload\.term_' \
	  -E '^preload\.ckpt_(device_order|wait_cpu)$$'

# Its build alone (.ci/run builds it beside make test, at the machine's idle time).
tsan-build: deps
	@cmake -S . -B $(TSAN_BUILD) -G Ninja -DFT_TSAN=ON $(CMAKE_ARGS) >/dev/null
	@cmake --build $(TSAN_BUILD) -j $(JOBS) --target shm_test common_test jitckpt_test ftdump preload_behavior_test preload_ckpt_test preload_ckpt_snapshot_test preload_term_app ckpt_bench_tool ft gpusim_cudart gpusim_nccl transfer_engine_test worker_prefetch_test worker_daemon_prefetch_test metrics_test worker_health_test

# clang's thread-safety analysis: clang 16 builds everything with -Wthread-safety and the
# project's warnings as errors, so a GUARDED_BY field touched without its lock, or a REQUIRES
# function called without it (common/thread_annotations.h, common/mutex.h), fails the build.
# gcc ignores the annotations; nvcc-built workloads keep nvcc's host compiler.
LINT_BUILD ?= build-lint
LINT_FLAGS := -Wall -Wextra -Werror -Wthread-safety
lint:
	@scripts/install-deps.sh fuzz
	@CC=clang-16 CXX=clang++-16 cmake -S . -B $(LINT_BUILD) -G Ninja "-DCMAKE_CXX_FLAGS=$(LINT_FLAGS)" \
	  "-DCMAKE_C_FLAGS=-Wall -Wextra -Werror" $(CMAKE_ARGS) >/dev/null
	@cmake --build $(LINT_BUILD) -j $(JOBS)

# libFuzzer on every parser of foreign bytes (tests/fuzz/README.md): clang 16 builds the fuzz
# targets with ASan/UBSan, each runs FUZZ_SECONDS from its seeds and its regressions folder; a
# crash is kept under $(FUZZ_BUILD)/artifacts and fails the run (RESULT fuzz ...). `make test`
# replays the same targets without libFuzzer (CTest fuzz.*).
FUZZ_BUILD   ?= build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_TARGETS := proto_codecs shm_header ckpt_manifest node_plan transfer_wire verbs_blobs region_name
fuzz:
	@scripts/install-deps.sh fuzz
	@CC=clang-16 CXX=clang++-16 cmake -S . -B $(FUZZ_BUILD) -G Ninja -DFT_FUZZ=ON $(CMAKE_ARGS) >/dev/null
	@cmake --build $(FUZZ_BUILD) -j $(JOBS) --target $(foreach t,$(FUZZ_TARGETS),fuzz_$(t) fuzz_$(t)_replay)
	@scripts/run-fuzzers.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ_TARGETS)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD) $(FUZZ_BUILD)
