# Shared by prolog.sh and epilog.sh (sourced; POSIX sh). Slurm runs both as root with no PATH
# and a few SLURM_* variables; neither may fail the job: a non-zero exit would drain the node
# (and requeue the job held, for a prolog), so every ft problem is logged and the script
# exits 0.

PATH=/usr/sbin:/usr/bin:/sbin:/bin
export PATH
umask 022

# Site settings: a shell fragment, read as root, so it must be root's and writable by root
# alone; the env file it names, root's and readable by root alone. Keys and defaults:
ft_conf=${FTSLURM_CONF:-/etc/ft/slurm-hooks.conf}
ft_worker=/opt/ft/bin/ftworker   # the ftworker binary
ft_worker_env=/etc/ft/worker.env # FT_* settings of the workers, secrets included (root, 0600)
ft_jobs=comment                  # comment: jobs whose --comment has the word ft or ft:NAME; all: every job
ft_arenas=gc                     # gc: ftworker gc --release decides; purge: then remove the rest too
ft_run_dir=/run/ft               # pid files of the running workers
ft_log_dir=/var/log/ft           # one log per job: ftworker.<jobid>.log
ft_shm_dir=/dev/shm              # where libft.so's segments are (shm_open)
ft_stop_timeout=15               # seconds from SIGTERM to SIGKILL when the epilog stops a worker
ft_gc_wait=5                     # gc tries more, a second apart, while the job's arenas remain

ft_log() {
  # To the job's log once there is one, else to syslog (Slurm keeps neither stdout nor stderr).
  if [ -n "${ft_log_file:-}" ] && [ -w "$ft_log_dir" ]; then
    printf '%s ft-slurm %s job %s: %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$ft_hook" \
      "${SLURM_JOB_ID:-?}" "$*" >> "$ft_log_file"
  else
    logger -t ft-slurm -- "$ft_hook job ${SLURM_JOB_ID:-?}: $*" 2>/dev/null || true
  fi
}

# A file root may read as code or as secrets: root's, a regular file, no group/other write
# (with "secret": nobody else may read it either, i.e. 0600 or less).
ft_trusted_file() {
  [ -f "$1" ] && [ ! -L "$1" ] || return 1
  [ "$(stat -c %u "$1")" = 0 ] || return 1
  _mode=$(stat -c %a "$1")
  case $_mode in
    *[2367]?|*[2367]) return 1 ;;
  esac
  if [ "${2:-}" = secret ]; then
    case $_mode in *00) ;; *) return 1 ;; esac
  fi
  return 0
}

ft_load_conf() {
  if [ -e "$ft_conf" ]; then
    if ! ft_trusted_file "$ft_conf"; then
      ft_log "not reading $ft_conf: it must be a regular file of root's that only root may write"
      return 1
    fi
    . "$ft_conf"
  fi
  ft_log_file=$ft_log_dir/ftworker.${SLURM_JOB_ID}.log
  ft_pid_file=$ft_run_dir/ftworker.${SLURM_JOB_ID}.pid
  ft_name_file=$ft_run_dir/ftworker.${SLURM_JOB_ID}.job
  return 0
}

# The ft job name of this Slurm job, or nothing when ft is not asked for. The comment's words
# (sbatch --comment="ft" or "ft:NAME", separated by spaces or commas) decide; NAME is the
# FT_JOB the ranks set (a name that stays the same across separate submissions); without it
# the Slurm job id, which libft.so takes by default (SLURM_JOB_ID, the same after a requeue).
ft_job_name() {
  _wanted=no
  _name=
  [ "$ft_jobs" = all ] && _wanted=yes
  set -f
  for _word in $(printf '%s' "${SLURM_JOB_COMMENT:-}" | tr ',;' '  '); do
    case $_word in
      ft) _wanted=yes ;;
      ft:*) _wanted=yes; _name=${_word#ft:} ;;
    esac
  done
  set +f
  [ "$_wanted" = yes ] || return 0
  [ -n "$_name" ] || _name=$SLURM_JOB_ID
  # Names ft uses as they are (docs/shm-format.md: 1-48 of [A-Za-z0-9_-]); anything else is
  # refused rather than guessed at, since the epilog removes files by this name.
  case $_name in
    *[!A-Za-z0-9_-]*)
      ft_log "ft job name '$_name' (from the job's comment) has characters other than A-Z a-z 0-9 _ -: no ftworker"
      return 0 ;;
  esac
  if [ ${#_name} -gt 48 ]; then
    ft_log "ft job name '$_name' is longer than 48 characters: no ftworker"
    return 0
  fi
  printf '%s\n' "$_name"
}

# Replaces the calling shell (call it in a subshell) with "$@" run as the job's user, with only
# PATH and the FT_* settings of the worker env file in its environment. The settings are
# exported by a shell that reads the file itself, so no secret is ever an argument of any
# process (`ps` shows arguments to every user). With a pid file ($1, or "" for none) the pid
# that becomes "$@" is written there first, by root. Every step execs: no shell stays behind
# holding the hook's output (slurmd would wait for it to close).
ft_as_job_user() {
  _pid_out=$1; shift
  exec env -i PATH="$PATH" /bin/sh -c '
    env_file=$1 uid=$2 gid=$3 pid_out=$4; shift 4
    q="'"'"'"
    if [ -f "$env_file" ]; then
      while IFS= read -r line || [ -n "$line" ]; do
        case $line in FT_*=*) ;; *) continue ;; esac
        key=${line%%=*}
        val=${line#*=}
        case $key in *[!A-Z0-9_]*) continue ;; esac
        case $val in
          \"*\") val=${val#\"}; val=${val%\"} ;;
          "$q"*"$q") val=${val#"$q"}; val=${val%"$q"} ;;
        esac
        export "$key=$val"
      done < "$env_file"
    fi
    [ -z "$pid_out" ] || echo $$ > "$pid_out"
    exec setpriv --reuid="$uid" --regid="$gid" --init-groups --no-new-privs -- "$@"
  ' ft-as-job-user "$ft_worker_env" "$SLURM_JOB_UID" "$SLURM_JOB_GID" "$_pid_out" "$@"
}
