#!/usr/bin/env bash
# bench/gpu/prepare.sh [--build] [--preload-build DIR] [BUILD_DIR] [OUT_DIR]: gathers everything a machine with one
# GPU needs to measure ft (bench/gpu/run.sh) into one folder of at most 64 MiB, from an ft build
# made here: libft.so, ftworker, ftmaster, trainsim, the benches, the preload suites that run on
# a real runtime, python/ft, redis-server, and the shared libraries those need that are not part
# of every Linux system (never glibc, libstdc++, libgcc_s, and never libcudart/libnccl: the GPU
# machine has the real ones). Then checks that the folder is small enough and self-contained.
#
#   BUILD_DIR  an ft build folder (default: build), already built; --build builds the kit's
#              targets first (under /tmp/ft-build.lock, the lock every build here shares)
#   OUT_DIR    the kit (default: gpu-kit at the repository root; emptied first)
#   --preload-build DIR  libft.so and its suites (everything under preload/) from another build
#              folder, e.g. one of a committed tree while the shared build holds work in progress
#
# Exit 0 with the kit ready; 1 with what is missing or wrong.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
do_build=0 preload_build=
while [ $# -gt 0 ]; do
  case $1 in
    --build) do_build=1; shift ;;
    --preload-build) preload_build=$(cd "$2" && pwd); shift 2 ;;
    *) break ;;
  esac
done
build=${1:-build}
out=${2:-$root/gpu-kit}
case $build in /*) ;; *) build=$root/$build ;; esac
case $out in /*) ;; *) out=$PWD/$out ;; esac
limit=$((64 * 1024 * 1024))

fail() { echo "prepare.sh: FAIL: $*" >&2; exit 1; }

# What the kit carries from the build: destination folder and path under the build folder.
binaries=(
  "lib preload/libft.so"
  "bin ftworker/ftworker"
  "bin ftmaster/ftmaster"
  "bin tests/workloads/trainsim/trainsim"
  "bin tests/workloads/trainsim/trainsim_reference"
  "lib tests/workloads/trainsim/libtrainsim_kernels.so"
  "bin tests/workloads/queue_bench/queue_bench"
  "bin bench/overhead_bench"
  "bin bench/ckpt_bench_rank"
  "bin bench/ckpt_bench_tool"
  "bin bench/gpu/kit_bench"
  "bin python/node_plan_tool"
  "tests preload/tests/preload_behavior_test"
  "tests preload/tests/preload_ckpt_test"
  "tests preload/tests/preload_late_load_test"
  "lib preload/tests/libft_late_cuda.so"
  "lib preload/tests/libft_late_nccl.so"
)
targets=(ft ftworker ftmaster trainsim trainsim_reference trainsim_kernels queue_bench overhead_bench
  ckpt_bench_rank ckpt_bench_tool kit_bench node_plan_tool preload_behavior_test preload_ckpt_test
  preload_late_load_test ft_late_cuda ft_late_nccl ftdump)

if [ "$do_build" = 1 ]; then
  flock /tmp/ft-build.lock cmake --build "$build" --target "${targets[@]}"
fi
[ -f "$build/CMakeCache.txt" ] || fail "$build is not an ft build folder (make build first)"
from() {  # the build folder a kit file comes from
  case $1 in preload/*) echo "${preload_build:-$build}" ;; *) echo "$build" ;; esac
}
for entry in "${binaries[@]}"; do
  path=${entry#* }
  [ -f "$(from "$path")/$path" ] || fail "$(from "$path")/$path is missing: build it first (make build, or prepare.sh --build)"
done
ftdump=$(find "$build" -name ftdump -type f -perm -u+x 2>/dev/null | head -n 1)
[ -n "$ftdump" ] || fail "ftdump is missing in $build: build it first"
redis=$(command -v redis-server || true)
[ -n "$redis" ] || fail "redis-server is not installed here (scripts/install-deps.sh installs it)"

rm -rf "$out"
mkdir -p "$out/bin" "$out/lib" "$out/tests" "$out/scripts" "$out/python"
for entry in "${binaries[@]}"; do
  dest=${entry%% *} path=${entry#* }
  cp -L "$(from "$path")/$path" "$out/$dest/"
done
cp -L "$ftdump" "$out/bin/"
# redis-server is one binary under several names (argv[0] picks the mode): copy the file itself.
cp -L "$redis" "$out/bin/redis-server"
cp "$root/tests/workloads/trainsim/launch.py" "$out/scripts/"
cp -r "$root/python/ft" "$out/python/"
find "$out/python" -name __pycache__ -prune -exec rm -rf {} +
for f in run.sh kit.py torch_gpt.py README.md; do cp "$root/bench/gpu/$f" "$out/"; done
chmod +x "$out/run.sh"

# The shared libraries the binaries need, as the loader here resolves them (gpusim's folder
# first, so libcudart/libnccl resolve there and are left out like the system's own).
system_lib='^(linux-vdso|linux-gate|ld-linux|libc\.so|libm\.so|libmvec|libpthread|libdl\.so|librt\.so|libutil|libresolv|libanl|libnsl|libstdc\+\+|libgcc_s|libcudart|libnccl|libcuda\.so|libnvidia)'
gpusim_dir=$build/gpusim
elfs=$(find "$out/bin" "$out/lib" "$out/tests" -type f)
for f in $elfs; do
  LD_LIBRARY_PATH=$gpusim_dir ldd "$f" 2>/dev/null | awk '/=>/ { print $1, $3 }'
done | sort -u | while read -r name path; do
  [[ $name =~ $system_lib ]] && continue
  [ "$path" = "not" ] && fail "a binary needs $name and the loader here does not find it"
  [ -e "$out/lib/$name" ] || cp -L "$path" "$out/lib/$name"
done

# Smaller, and nothing that names this machine's folders: symbols stripped, build-tree RUNPATHs
# rewritten in place to the kit's own lib folder ($ORIGIN-relative).
for f in $(find "$out/bin" "$out/lib" "$out/tests" -type f); do
  strip --strip-unneeded "$f" 2>/dev/null || true
  case $f in
    "$out/lib/"*) rpath='$ORIGIN' ;;
    *) rpath='$ORIGIN/../lib' ;;
  esac
  python3 "$root/bench/gpu/kit.py" set-runpath "$f" "$rpath"
done

# Checks: size, links, resolution, runpaths.
size=$(du -sb "$out" | cut -f1)
[ "$size" -le "$limit" ] || fail "the kit is $((size / 1024 / 1024)) MiB, more than 64 MiB"
while IFS= read -r link; do
  target=$(realpath -m "$link")
  case $target in "$out"/*) ;; *) fail "$link points outside the kit ($target)" ;; esac
done < <(find "$out" -type l)
for f in $(find "$out/bin" "$out/lib" "$out/tests" -type f); do
  while read -r name _ path _; do
    [[ $name =~ $system_lib ]] && continue
    case $path in
      "$out/lib/"*) ;;
      *) fail "$f: $name resolves to $path, outside the kit" ;;
    esac
  done < <(LD_LIBRARY_PATH=$out/lib:$gpusim_dir ldd "$f" 2>/dev/null | grep '=>')
  if readelf -d "$f" 2>/dev/null | grep -E 'R(UN)?PATH' | grep -v '\[\$ORIGIN' | grep -q .; then
    fail "$f keeps a RUNPATH outside the kit: $(readelf -d "$f" | grep -E 'R(UN)?PATH')"
  fi
done

glibc=$(for f in $(find "$out/bin" "$out/lib" "$out/tests" -type f); do objdump -T "$f" 2>/dev/null; done |
  grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -n 1)
{
  echo "ft GPU kit"
  echo "made: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname) from $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$root" diff --quiet 2>/dev/null || echo ' (with local changes)')"
  echo "build: $build${preload_build:+ (libft.so and preload/tests from $preload_build)}"
  echo "needs: glibc >= ${glibc#GLIBC_}, a CUDA 13 driver, libcudart.so.13 and libnccl.so.2 on the machine"
  echo "size: $size bytes"
  (cd "$out" && find . -type f -printf '%s %p\n' | sort -k2)
} > "$out/MANIFEST.txt"
echo "prepare.sh: kit ready in $out: $((size / 1024)) KiB, $(find "$out" -type f | wc -l) files, needs glibc >= ${glibc#GLIBC_}"
echo "prepare.sh: on the GPU machine: bash $(basename "$out")/run.sh OUT_DIR"
