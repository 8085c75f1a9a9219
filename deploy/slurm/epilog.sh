#!/bin/sh
# Slurm Epilog: stops the job's ftworker on this node and removes what the job left in shared
# memory. Runs on every node of the job once it ended (slurm.conf, see prolog.sh).
#
# 1. The worker the prolog started (its pid file; only if that pid is still an ftworker of
#    this job): SIGTERM, SIGKILL after ft_stop_timeout seconds. A worker that stops removes
#    its restore plan file itself.
# 2. `ftworker gc --job NAME --release` as the job's user, with the workers' settings: removes
#    the job's host arenas ft's rule lets go (docs/checkpoints.md, "Removing arenas"): all of
#    them once the job finished and its copies are in a disk tier; a job that did not finish
#    keeps its planned and newest copies, so a requeue landing here restores from memory.
#    While arenas remain it runs again each second, ft_gc_wait times: the master may say the
#    job finished a moment after its ranks ended.
#    With ft_arenas=purge the rest goes too: memory back for the next job, and a requeue
#    restores from the disk tiers (FT_CKPT_DIR, FT_CKPT_REMOTE_DIR) or a peer.
# 3. What no process needs any more, of this job's name and the job's user only, unless
#    another process still uses the name on this node (a live rank or worker of it): the
#    segments of ranks that died without a clean exit (/dev/shm/ft.NAME.r<rank>.p<pid>, their
#    pid gone), the plan and lock files a killed worker left (ft-plan.NAME.*,
#    ft-planlock.NAME.*), and python/ft's stack files of processes gone (ft-pystack.<pid>).
#
# Never fails (a non-zero exit would drain the node); what it did goes to the job's log.

ft_hook=epilog
. "$(dirname "$(readlink -f "$0")")/ft-slurm-common.sh" || exit 0

# Whether pid $1 is an ftworker (its binary, whatever the path) for job $2.
is_worker_of() {
  [ -r "/proc/$1/cmdline" ] || return 1
  _exe=$(readlink "/proc/$1/exe" 2>/dev/null) || return 1
  case ${_exe%" (deleted)"} in */ftworker) ;; *) return 1 ;; esac
  tr '\0' '\n' < "/proc/$1/cmdline" | grep -qx -- "$2"
}

# Whether pid $1 runs (a zombie, ended but not yet reaped by whoever inherited it, does not).
running() {
  _state=$(sed -n 's/^State:[[:space:]]*\([A-Z]\).*/\1/p' "/proc/$1/status" 2>/dev/null)
  [ -n "$_state" ] && [ "$_state" != Z ] && [ "$_state" != X ]
}

stop_worker() {
  [ -s "$ft_pid_file" ] || return 0
  pid=$(cat "$ft_pid_file")
  rm -f "$ft_pid_file"
  case $pid in ''|*[!0-9]*) return 0 ;; esac
  if ! is_worker_of "$pid" "$job"; then
    ft_log "ftworker pid $pid is gone already"
    return 0
  fi
  kill -TERM "$pid" 2>/dev/null
  waited=0
  while running "$pid" && [ "$waited" -lt $((ft_stop_timeout * 10)) ]; do
    sleep 0.1
    waited=$((waited + 1))
  done
  if running "$pid"; then
    kill -KILL "$pid" 2>/dev/null
    ft_log "ftworker pid $pid did not stop within ${ft_stop_timeout}s of SIGTERM: SIGKILLed"
  else
    ft_log "ftworker pid $pid stopped"
  fi
}

# Reads the directory where the arenas and plan files are: FT_CKPT_ARENA_DIR of the env file.
arena_dir() {
  _dir=$(sed -n 's/^FT_CKPT_ARENA_DIR=//p' "$ft_worker_env" 2>/dev/null | tail -n 1 | tr -d '"'"'")
  printf '%s\n' "${_dir:-/dev/shm}"
}

# Whether a live process on this node still uses the job name: an ftworker of it, or a rank
# whose segment is still there with its pid alive.
name_in_use() {
  for _p in $(pgrep -x ftworker); do
    is_worker_of "$_p" "$job" && return 0
  done
  for _f in "$ft_shm_dir"/ft."$job".r*.p*; do
    [ -e "$_f" ] || continue
    _pid=${_f##*.p}
    case $_pid in ''|*[!0-9]*) continue ;; esac
    running "$_pid" && return 0
  done
  return 1
}

# Whether host arenas of the job are in directory $1.
has_arenas() {
  for _f in "$1"/ft-ckpt."$job".* "$1"/ft-prefetch."$job".* "$1"/ft-replica."$job".*; do
    [ -e "$_f" ] && return 0
  done
  return 1
}

# Removes file $1 if it is a regular file of the job's user.
remove_owned() {
  [ -f "$1" ] && [ ! -L "$1" ] || return 1
  [ "$(stat -c %u "$1")" = "$SLURM_JOB_UID" ] || return 1
  rm -f -- "$1" && removed=$((removed + 1))
}

main() {
  ft_load_conf || return 0
  # The name the prolog used (the comment may have been changed since).
  job=
  [ -s "$ft_name_file" ] && job=$(cat "$ft_name_file")
  [ -n "$job" ] || job=$(ft_job_name)
  rm -f "$ft_name_file"
  [ -n "$job" ] || return 0
  case $job in *[!A-Za-z0-9_-]*) return 0 ;; esac

  stop_worker

  arenas=$(arena_dir)
  if [ -x "$ft_worker" ] && ft_trusted_file "$ft_worker_env" secret; then
    # The master says a job finished up to ~2 s after its ranks ended (it checks the ranks'
    # version every 2 s): while arenas remain, gc again each second, ft_gc_wait times (not
    # with purge, which removes what remains anyway).
    try=0
    while :; do
      ft_log "ftworker gc --job $job --release --arena-dir $arenas:"
      (
        exec < /dev/null >> "$ft_log_file" 2>&1
        ft_as_job_user "" "$ft_worker" gc --job "$job" --release --arena-dir "$arenas"
      ) || ft_log "ftworker gc failed (status $?)"
      [ "$ft_arenas" != purge ] && [ "$try" -lt "$ft_gc_wait" ] && has_arenas "$arenas" || break
      try=$((try + 1))
      sleep 1
    done
  fi

  if name_in_use; then
    ft_log "job name $job is still used on this node (a live rank or worker): nothing more removed"
    return 0
  fi
  removed=0
  for f in "$ft_shm_dir"/ft."$job".r*.p*; do
    [ -e "$f" ] && remove_owned "$f"
  done
  for f in "$arenas"/ft-plan."$job".* "$arenas"/ft-planlock."$job".*; do
    [ -e "$f" ] && remove_owned "$f"
  done
  for f in "$arenas"/ft-pystack.*; do
    [ -e "$f" ] || continue
    pid=${f##*.}
    case $pid in ''|*[!0-9]*) continue ;; esac
    running "$pid" || remove_owned "$f"
  done
  if [ "$ft_arenas" = purge ]; then
    for f in "$arenas"/ft-ckpt."$job".* "$arenas"/ft-prefetch."$job".* "$arenas"/ft-replica."$job".*; do
      [ -e "$f" ] && remove_owned "$f"
    done
  fi
  ft_log "removed $removed file(s) of job $job (segments, plan files$([ "$ft_arenas" = purge ] && echo ', arenas'))"
  left=$(ls -d "$ft_shm_dir"/ft."$job".* "$arenas"/ft-*."$job".* 2>/dev/null | wc -l)
  [ "$left" -eq 0 ] || ft_log "left for a requeue or another user's: $(ls -d "$ft_shm_dir"/ft."$job".* "$arenas"/ft-*."$job".* 2>/dev/null | tr '\n' ' ')"
}

main
exit 0
