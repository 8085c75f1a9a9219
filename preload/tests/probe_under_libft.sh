#!/bin/sh
# Runs an nvcc-built gpusim probe (kernel launches through __cudaLaunchKernel, or through the
# _ptsz entry points when built with --default-stream per-thread, plus a captured and replayed
# graph) under LD_PRELOAD=libft.so. Fails if the probe's own checks fail, or if libft.so never
# became active (it activates at the first intercepted call), or if it disabled itself.
# usage: probe_under_libft.sh PROBE GPUSIM_LIB_DIR KERNEL_LIB LIBFT
probe=$1 libdir=$2 kernels=$3 libft=$4
err=$(mktemp)
trap 'rm -f "$err"' EXIT
FT_JOB=probe_under_libft FT_LOG_LEVEL=debug LD_PRELOAD=$libft LD_LIBRARY_PATH=$libdir \
  GPUSIM_KERNEL_LIBS=$kernels "$probe" 2>"$err"
rc=$?
cat "$err" >&2
if [ $rc -ne 0 ]; then
  echo "FAIL: $probe exited $rc under libft.so"
  exit 1
fi
if ! grep -q "libft.so active: segment /ft.probe_under_libft." "$err"; then
  echo "FAIL: libft.so never intercepted a call of $probe"
  exit 1
fi
if grep -q "libft.so disabled" "$err"; then
  echo "FAIL: libft.so disabled itself"
  exit 1
fi
