#!/usr/bin/env bash
# Runs a command, and everything it starts, in a CPU cgroup of its own with few shares, so that
# it only takes what the rest of the machine leaves idle and yields the moment others want a
# core; the group goes when the command ends.
#   low-cpu-share.sh --check [idle]    exit 0 where such a group (an idle one) can be made here
#   low-cpu-share.sh SHARES CMD [ARG]  SHARES as cgroup v1 cpu.shares (a session has 1024; 2 the
#                                      least); cgroup v2's cpu.weight gets SHARES/10, at least 1
#   low-cpu-share.sh idle CMD [ARG]    the group is SCHED_IDLE (cpu.idle=1): the least weight, and
#                                      any other task that wakes takes the CPU from it at once.
#                                      For work that runs flat out (compiles): at a low share
#                                      alone, a task that wakes still waits for the running
#                                      compile's slice, the few ms a paced test notices.
# Why a cgroup and not nice: the kernel shares CPU between sessions (autogroups) before it looks
# at nice, and the tests' launchers start each job in a session of its own.
# Where no group can be made (not root, no cpu controller) the command runs at nice 19.
set -uo pipefail

cgroup=""
make_cgroup() {
  local shares=$1 name="ft-low-share-$$"
  if [ -w /sys/fs/cgroup/cpu ] && [ -e /sys/fs/cgroup/cpu/cpu.shares ]; then
    mkdir "/sys/fs/cgroup/cpu/$name" 2>/dev/null || return 1
    cgroup="/sys/fs/cgroup/cpu/$name"
    set_share "$shares" cpu.shares "$shares" || { remove_cgroup; return 1; }
  elif [ -e /sys/fs/cgroup/cgroup.controllers ] &&
       grep -qw cpu /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null; then
    local parent weight=1
    [ "$shares" = idle ] || weight=$((shares / 10 > 0 ? shares / 10 : 1))
    parent="/sys/fs/cgroup$(sed -n 's/^0:://p' /proc/self/cgroup)"
    mkdir "$parent/$name" 2>/dev/null || return 1
    cgroup="$parent/$name"
    set_share "$shares" cpu.weight "$weight" || { remove_cgroup; return 1; }
  else
    return 1
  fi
}
# set_share SHARES FILE VALUE: VALUE into the group's FILE, or cpu.idle=1 for "idle".
set_share() {
  if [ "$1" = idle ]; then
    echo 1 >"$cgroup/cpu.idle" 2>/dev/null
  else
    echo "$3" >"$cgroup/$2" 2>/dev/null
  fi
}
# The simulated GPUs of the command's jobs (gpusim's stream workers, GPUSIM_DEVICE_CPU_GROUP)
# get a group of their own at device_shares beside it: a real GPU's kernels and collectives go
# on while its process waits for a CPU. On the command's own share a starved stream worker held
# a simulated collective seconds after its peers had finished it, and ft named that rank's GPU
# stuck: false hangs of the rest lane's end-to-end tests, which a real GPU never shows. 256: the
# share at which a whole lane of timed tests once ran beside the paced ones without slowing them;
# the simulated devices of two jobs use about half a core. cgroup v1 only (v2 keeps a process's
# threads in one group unless it is made threaded): elsewhere the workers stay with their process.
device_shares=256
device_cgroup=""
make_device_cgroup() {
  [ -n "$cgroup" ] && [ -e "$cgroup/cpu.shares" ] || return 0
  mkdir "$cgroup-gpus" 2>/dev/null || return 0
  if echo "$device_shares" >"$cgroup-gpus/cpu.shares" 2>/dev/null; then
    device_cgroup="$cgroup-gpus"
    export GPUSIM_DEVICE_CPU_GROUP="$device_cgroup/tasks"
  else
    rmdir "$cgroup-gpus" 2>/dev/null
  fi
}
# empty_and_remove GROUP FILE: what is left in GROUP (its FILE: cgroup.procs, processes such as
# a test's stray daemon; tasks, threads) goes back to the parent, then the group goes.
empty_and_remove() {
  local id
  while read -r id; do echo "$id" >"$(dirname "$1")/$2" 2>/dev/null; done <"$1/$2"
  rmdir "$1" 2>/dev/null || echo "low-cpu-share: could not remove $1" >&2
}
remove_cgroup() {
  if [ -n "$device_cgroup" ]; then
    empty_and_remove "$device_cgroup" tasks
    device_cgroup=""
  fi
  [ -n "$cgroup" ] || return 0
  empty_and_remove "$cgroup" cgroup.procs
  cgroup=""
}

if [ "${1:-}" = "--check" ]; then
  make_cgroup "${2:-2}" || exit 1
  remove_cgroup
  exit 0
fi
shares=${1:?usage: low-cpu-share.sh --check [idle] | SHARES CMD [ARG...]}
shift
[ $# -gt 0 ] || { echo "usage: low-cpu-share.sh --check [idle] | SHARES CMD [ARG...]" >&2; exit 2; }

case "$shares" in
  idle | [0-9]*) ;;
  *) echo "low-cpu-share: SHARES is a number or idle, not '$shares'" >&2; exit 2 ;;
esac
if ! make_cgroup "$shares"; then
  exec nice -n 19 "$@"
fi
trap remove_cgroup EXIT
[ "$shares" = idle ] || make_device_cgroup
# The command runs in a child (in the group) so this shell, outside it, can remove the group.
(echo "$BASHPID" >"$cgroup/cgroup.procs" && exec "$@")
