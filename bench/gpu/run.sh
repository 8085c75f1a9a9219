#!/usr/bin/env bash
# run.sh OUT_DIR: measures ft on this machine's GPU with the kit this script sits in (made by
# bench/gpu/prepare.sh), in one command, within 6.5 minutes (FT_GPU_KIT_BUDGET_S, default 375).
# Each section runs under `timeout` with its own time box and appends what it found to
# OUT_DIR as it goes (results.txt: the RESULT lines; notes/: markdown; logs/: every program's
# output; run.log: this script's output), so a run cut short still leaves what it measured.
# Ends with the RESULT lines and OUT_DIR/RESULTS.md, text ready for bench/RESULTS.md.
#
#   FT_GPU_KIT_CUDA_LIBS=DIR[:DIR]  where libcudart.so.13 and libnccl.so.2 are (default:
#                                   searched: ldconfig, CUDA toolkit folders, the PyTorch wheel's)
#   FT_GPU_KIT_QUICK=1              the dry run: few steps, small sizes (make gpu-dryrun)
#   FT_GPU_KIT_SECTIONS="env ..."   run only these sections (env always runs first)
#   FT_GPU_KIT_BOX_<section>=S      another time box for a section (e.g. FT_GPU_KIT_BOX_torch=150)
# Needs python3 (standard library), a CUDA 13 driver; PyTorch with CUDA for the torch section.
set -u
kit=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: run.sh OUT_DIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
budget=${FT_GPU_KIT_BUDGET_S:-375}
start=$(date +%s)
exec > >(tee -a "$out/run.log") 2>&1

# name and time box (s). The sum stays under the budget with room for the report.
sections=(
  "env 40"
  "preload 35"
  "smallop 25"
  "trainsim 40"
  "ckpt 70"
  "detect 60"
  "torch 95"
)
wanted=${FT_GPU_KIT_SECTIONS:-env preload smallop trainsim ckpt detect torch}
echo "run.sh: kit $kit, results in $out, budget ${budget} s, quick=${FT_GPU_KIT_QUICK:-0}"
for entry in "${sections[@]}"; do
  name=${entry% *} box=${entry#* }
  override=FT_GPU_KIT_BOX_$name
  box=${!override:-$box}
  case " env $wanted " in *" $name "*) ;; *) continue ;; esac
  left=$((budget - 10 - ($(date +%s) - start)))
  if [ "$left" -lt 8 ]; then
    echo "RESULT gpu_$name status=skipped reason=budget" | tee -a "$out/results.txt"
    continue
  fi
  [ "$box" -gt "$left" ] && box=$left
  echo
  echo "==== section $name (time box ${box} s, $(($(date +%s) - start)) s into the run)"
  t=$(date +%s)
  FT_GPU_KIT_SECTION_S=$box timeout -k 5 "$box" python3 "$kit/kit.py" "$name" "$out"
  rc=$?
  echo "==== section $name: exit $rc after $(($(date +%s) - t)) s"
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    echo "RESULT gpu_$name status=timeout box_s=$box" | tee -a "$out/results.txt"
  elif [ "$rc" -ne 0 ]; then
    echo "RESULT gpu_${name}_exit status=failed rc=$rc" | tee -a "$out/results.txt"
  fi
  # Whatever a killed section left behind: its processes are gone with its process group,
  # its shared-memory files are not.
  rm -rf /dev/shm/ft-kit-* 2>/dev/null
done
timeout -k 2 10 python3 "$kit/kit.py" report "$out"
echo
echo "==== run.sh done in $(($(date +%s) - start)) s; RESULT lines (also in $out/results.txt):"
cat "$out/results.txt" 2>/dev/null
exit 0
