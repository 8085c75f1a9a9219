#!/usr/bin/env bash
# bench/gpu/dryrun.sh [BUILD_DIR]: `make gpu-dryrun` and the CTest bench.gpu_dryrun. The GPU kit
# end to end on the gpusim stand-ins, so it never rots: prepare.sh gathers the kit from
# BUILD_DIR (default build) into a temporary folder, run.sh runs it in quick mode with gpusim's
# libcudart.so.13 and libnccl.so.2 in place of a GPU machine's. Passes when run.sh exits 0,
# every section printed its RESULT line (the PyTorch one says skipped when this machine's
# python3 has no CUDA PyTorch), no section timed out or failed, every preload suite ran and
# passed (the kit runs the preload.* tests with its own environment: a test that passes under
# CTest but not here is a kit whose environment would mislead on a GPU) and both hangs were named.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-build}
case $build in /*) ;; *) build=$root/$build ;; esac
tmp=$(mktemp -d /tmp/ft-gpu-dryrun.XXXXXX)
keep=0
trap '[ "$keep" = 1 ] || rm -rf "$tmp"' EXIT
fail() { keep=1; echo "gpu-dryrun: FAIL: $* (kit and results kept in $tmp)"; exit 1; }

bash "$root/bench/gpu/prepare.sh" "$build" "$tmp/kit" || fail "prepare.sh failed"
t=$(date +%s)
FT_GPU_KIT_QUICK=1 FT_GPU_KIT_CUDA_LIBS=$build/gpusim bash "$tmp/kit/run.sh" "$tmp/out" || fail "run.sh exited $?"
results=$tmp/out/results.txt
[ -s "$results" ] || fail "no results"
for s in env preload smallop overhead_trainsim ckpt detect overhead_torch; do
  grep -q "^RESULT gpu_$s " "$results" || fail "no RESULT gpu_$s line"
done
if grep -E 'status=(timeout|failed|skipped reason=budget)' "$results"; then fail "a section did not finish"; fi
grep -q '^RESULT gpu_preload passed=[1-9][0-9]* failed=[0-9]* suites=8 broken=none ' "$results" || fail "preload suites: $(grep gpu_preload "$results")"
grep -q '^RESULT gpu_preload .* failed=0 ' "$results" || fail "preload tests failed on gpusim: $(grep gpu_preload "$results")"
grep -q 'kernel_kind=hang kernel_suspects=1 ' "$results" || fail "the kernel hang was not named: $(grep gpu_detect "$results")"
grep -q 'host_kind=hang host_suspects=1 ' "$results" || fail "the host hang was not named: $(grep gpu_detect "$results")"
grep -q '^RESULT gpu_ckpt .*save_ratio_t1=[0-9]' "$results" || fail "no JIT save figure: $(grep gpu_ckpt "$results")"
for name in save_ratio restore_ratio register_s_per_gib prepare_s_per_gib step_done_ms every_step_ratio; do
  grep -q "^RESULT gpu_ckpt .* $name=[0-9]" "$results" || fail "no $name: $(grep gpu_ckpt "$results")"
done
grep -q '^RESULT gpu_ckpt .* term_save=committed term_save_s=[0-9]' "$results" || fail "no termination save figure: $(grep gpu_ckpt "$results")"
# As root the kit mounts a huge-page tmpfs and runs the default pass again on it.
if [ "$(id -u)" = 0 ]; then
  grep -q '^RESULT gpu_ckpt .* save_ratio_huge=[0-9.]* restore_ratio_huge=[0-9]' "$results" ||
    fail "no huge-page figures as root: $(grep gpu_ckpt "$results")"
fi
[ -s "$tmp/out/RESULTS.md" ] || fail "no RESULTS.md"
echo "gpu-dryrun: PASS (run.sh on gpusim in $(($(date +%s) - t)) s)"
