#!/bin/sh
# Checks the ABI facts the probes rely on, from the binaries themselves:
#  - gpusim's library has soname libcudart.so.13, needs no other libcudart, and exports only
#    cuda*/__cuda* symbols, all under the version node libcudart.so.13;
#  - the legacy-stream probe launches through __cudaLaunchKernel, the per-thread one through
#    __cudaLaunchKernel_ptsz (so running them exercised those entry points).
# usage: check_symbols.sh LIBCUDART PROBE PROBE_PER_THREAD
lib=$1 probe=$2 probe_pt=$3
fail() { echo "FAIL: $*"; exit 1; }
readelf -d "$lib" | grep -q 'SONAME.*\[libcudart\.so\.13\]' || fail "soname is not libcudart.so.13"
readelf -d "$lib" | grep 'NEEDED' | grep -q 'libcudart' && fail "$lib needs a libcudart"
bad=$(nm -D --defined-only "$lib" | awk '{print $3}' | grep -v '^libcudart\.so\.13$' |
      grep -v -E '^(cuda|__cuda)[A-Za-z0-9_]*@@libcudart\.so\.13$')
[ -z "$bad" ] || fail "unexpected exports: $bad"
for s in __cudaLaunchKernel __cudaLaunchKernel_ptsz __cudaRegisterFunction __cudaGetKernel \
         cudaLaunchHostFunc_ptsz cudaStreamSynchronize_ptsz cudaMemcpy_ptds cudaGraphLaunch_ptsz; do
  nm -D --defined-only "$lib" | grep -q " $s@@libcudart\.so\.13\$" || fail "$lib lacks $s"
done
nm -D --undefined-only "$probe" | grep -q ' __cudaLaunchKernel@libcudart\.so\.13$' ||
  fail "$probe does not call __cudaLaunchKernel"
nm -D --undefined-only "$probe" | grep -q '_ptsz' && fail "$probe calls _ptsz entry points"
nm -D --undefined-only "$probe_pt" | grep -q ' __cudaLaunchKernel_ptsz@libcudart\.so\.13$' ||
  fail "$probe_pt does not call __cudaLaunchKernel_ptsz"
nm -D --undefined-only "$probe_pt" | grep -q ' cudaStreamSynchronize_ptsz@libcudart\.so\.13$' ||
  fail "$probe_pt does not call cudaStreamSynchronize_ptsz"
echo "symbols ok"
