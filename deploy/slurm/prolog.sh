#!/bin/sh
# Slurm Prolog: starts the job's ftworker on this node, as the job's user, before its ranks.
#
# slurm.conf (every node):
#   Prolog=/etc/slurm/ft/prolog.sh      # this file, beside ft-slurm-common.sh
#   Epilog=/etc/slurm/ft/epilog.sh
#   PrologFlags=Alloc                   # run at allocation, so the worker is up before any step
# Site settings: /etc/ft/slurm-hooks.conf (slurm-hooks.conf.example), FT_* settings of the
# workers with the Redis password: /etc/ft/worker.env (deploy/systemd/worker.env.example), both root's.
#
# Which jobs: those whose comment asks for ft (sbatch --comment=ft, or --comment=ft:NAME for
# an FT_JOB name of one's own), or every job with ft_jobs=all. The worker runs as the job's
# user (the ranks' segments and arenas are 0600 and their owner's; the restore plan file it
# writes must be theirs to read), with only the env file's FT_* settings, as
# `ftworker --job NAME`; its output goes to /var/log/ft/ftworker.<jobid>.log. Note that the
# job's user can read that worker's environment (/proc/<pid>/environ), the Redis password
# included: give workers a Redis user that may touch only ft's keys (`ftmaster acl`).
#
# Never fails the job: a non-zero exit would drain the node; problems are logged.

ft_hook=prolog
. "$(dirname "$(readlink -f "$0")")/ft-slurm-common.sh" || exit 0

main() {
  ft_load_conf || return 0
  job=$(ft_job_name)
  [ -n "$job" ] || return 0
  if [ ! -x "$ft_worker" ]; then
    ft_log "no ftworker at $ft_worker (ft_worker in $ft_conf): the job runs unwatched"
    return 0
  fi
  if [ ! -e "$ft_worker_env" ]; then
    ft_log "no $ft_worker_env (FT_REDIS, FT_REDIS_PASSWORD, ...): the job runs unwatched"
    return 0
  fi
  if ! ft_trusted_file "$ft_worker_env" secret; then
    ft_log "not reading $ft_worker_env: it holds the Redis password, so it must be a regular file of root's that only root may read (0600)"
    return 0
  fi
  mkdir -p "$ft_run_dir" "$ft_log_dir" && chmod 0755 "$ft_run_dir" && chmod 0755 "$ft_log_dir" || {
    ft_log "cannot create $ft_run_dir or $ft_log_dir"
    return 0
  }
  # The log: root's, readable by the job's group (the worker logs no secret).
  : >> "$ft_log_file" && chown "0:$SLURM_JOB_GID" "$ft_log_file" && chmod 0640 "$ft_log_file"
  if [ -s "$ft_pid_file" ] && kill -0 "$(cat "$ft_pid_file")" 2>/dev/null; then
    ft_log "an ftworker for this job runs already (pid $(cat "$ft_pid_file"))"
    return 0
  fi
  rm -f "$ft_pid_file"
  printf '%s\n' "$job" > "$ft_name_file"
  ft_log "starting ftworker --job $job as uid $SLURM_JOB_UID"
  # Its own session (setsid), stdin from /dev/null, output to the log: slurmd waits for
  # nothing of it, and ending the prolog's process group does not end it.
  (
    exec < /dev/null >> "$ft_log_file" 2>&1
    ft_as_job_user "$ft_pid_file" setsid "$ft_worker" --job "$job"
  ) &
  # A worker that cannot start (a bad setting, no Redis address) exits at once: say so here.
  sleep 0.5
  pid=$(cat "$ft_pid_file" 2>/dev/null)
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    ft_log "ftworker pid $pid"
  else
    ft_log "ftworker exited at once: see the lines above; the job runs unwatched"
    rm -f "$ft_pid_file"
  fi
}

main
exit 0
