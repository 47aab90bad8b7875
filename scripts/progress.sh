# Progress helpers for scripts/test and scripts/fuzz (sourced, not run).
# Both print the time since the script started (bash's SECONDS), so that a
# slow step on a busy machine shows where the time goes instead of looking hung.

# elapsed prints the time since the start as XmYYs.
elapsed() { printf '%dm%02ds' $((SECONDS / 60)) $((SECONDS % 60)); }

# with_heartbeat runs its arguments as a command and, while it runs, prints
# a line every minute (with the load average), so that no step is silent for
# more than a minute: compiling every package cold or a slow test package can
# take many minutes on a loaded 2-core machine. Returns the command's status.
with_heartbeat() {
  local what="$1"
  (
    # The sleep is a child of its own, stopped with this loop: left running,
    # it would hold the script's stdout open (a pipe to tee or a CI log)
    # for up to a minute after the script ends.
    trap 'kill "$nap" 2>/dev/null; exit 0' TERM
    while :; do
      sleep "${HEARTBEAT_SECONDS:-60}" >/dev/null 2>&1 &
      nap=$!
      wait "$nap"
      printf '   ... %s still running (at %s, load %s)\n' "$what" "$(elapsed)" "$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo '?')"
    done
  ) &
  local beat=$! status=0
  shift
  "$@" || status=$?
  kill "$beat" 2>/dev/null || true
  wait "$beat" 2>/dev/null || true
  return "$status"
}
