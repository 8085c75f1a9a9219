#!/bin/sh
# Runs an nvcc-built probe on gpusim the way a user would: LD_LIBRARY_PATH picks gpusim's
# libcudart.so.13 over the real one in the loader cache. Fails if the probe fails, if the
# loader resolved another libcudart, or if it warned about symbol versions ("no version
# information available" means the version node is missing or misnamed).
# usage: run_probe.sh PROBE GPUSIM_LIB_DIR KERNEL_LIB
probe=$1 libdir=$2 kernels=$3
resolved=$(LD_LIBRARY_PATH=$libdir ldd "$probe" | grep 'libcudart\.so')
case $resolved in
  *"$libdir/libcudart.so.13"*) ;;
  *) echo "FAIL: $probe resolves libcudart to: $resolved"; exit 1 ;;
esac
# An FT_SANITIZE build instruments gpusim but not the nvcc-built probe: the sanitizer
# runtimes must then be loaded first.
preload=$(ldd "$libdir/libcudart.so.13" | awk '/lib(asan|ubsan)\.so/ {printf "%s ", $3}')
err=$(mktemp)
LD_PRELOAD=$preload LD_LIBRARY_PATH=$libdir GPUSIM_KERNEL_LIBS=$kernels "$probe" 2>"$err"
rc=$?
cat "$err" >&2
if grep -q "no version information" "$err"; then
  echo "FAIL: the loader warned about symbol versions"
  rc=1
fi
rm -f "$err"
exit $rc
