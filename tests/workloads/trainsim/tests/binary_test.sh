#!/bin/sh
# trainsim runs unchanged on real GPUs: it needs the real sonames and knows nothing of gpusim.
# The CPU kernel library, conversely, needs no CUDA library and exports the registration hook.
# usage: binary_test.sh TRAINSIM LIBTRAINSIM_KERNELS
set -u
TRAINSIM=$1
KERNELS=$2
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

needed=$(readelf -d "$TRAINSIM" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
echo "trainsim NEEDED: $(echo $needed)"
echo "$needed" | grep -qx 'libcudart.so.13' || fail "trainsim does not need libcudart.so.13"
echo "$needed" | grep -qx 'libnccl.so.2' || fail "trainsim does not need libnccl.so.2"
echo "$needed" | grep -q 'cudart_static' && fail "trainsim links the static runtime"
if strings -a "$TRAINSIM" | grep -i 'gpusim'; then
  fail "trainsim contains the strings above"
fi
# ft's checkpoint API is imported weakly (FT_WEAK_IMPORT): trainsim calls it when libft.so is
# preloaded and runs without it, so it must neither need libft.so nor hold a strong reference.
echo "$needed" | grep -q 'libft' && fail "trainsim needs libft.so"
for sym in ft_version ft_register ft_register_end ft_restore ft_step_done ft_update_begin ft_set_shard; do
  nm -D "$TRAINSIM" | grep -Eq "^ +w $sym\$" || fail "trainsim does not import $sym weakly: $(nm -D "$TRAINSIM" | grep " $sym\$")"
done
# Its kernels are real device code (for sm_80 and sm_90, where cuobjdump can tell).
readelf -S "$TRAINSIM" | grep -q '\.nv_fatbin' || fail "trainsim has no device code (.nv_fatbin)"
if command -v cuobjdump >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/cuobjdump ]; then
  CUOBJDUMP=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
  archs=$("$CUOBJDUMP" --list-elf "$TRAINSIM" 2>/dev/null)
  echo "$archs" | grep -q sm_80 || fail "no sm_80 code in trainsim"
  echo "$archs" | grep -q sm_90 || fail "no sm_90 code in trainsim"
fi

kneeded=$(readelf -d "$KERNELS" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
echo "libtrainsim_kernels NEEDED: $(echo $kneeded)"
echo "$kneeded" | grep -Eq 'cudart|nccl|libcuda' && fail "the kernel library links a CUDA library"
nm -D --defined-only "$KERNELS" | grep -q ' T gpusim_register_kernels$' ||
  fail "libtrainsim_kernels does not export gpusim_register_kernels"
exported=$(nm -D --defined-only "$KERNELS" | grep -c ' T ')
[ "$exported" -eq 1 ] || fail "libtrainsim_kernels exports $exported functions, expected only the hook"

[ "$fails" -eq 0 ] || { echo "$fails failures"; exit 1; }
echo "OK"
