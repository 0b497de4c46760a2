# Sourced by the shell tests that run a real syncopated: a scratch folder $dir, removed at exit,
# and start_daemon. The daemon is killed at exit unless the test stopped it itself (then it sets
# daemon_pid="").
dir=$(mktemp -d)
daemon_pid=""
cleanup() {
  [[ -n $daemon_pid ]] && kill -KILL "$daemon_pid" 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT

# start_daemon <syncopated> <ready> <flags...>: starts it in the background (log in
# $dir/daemon.log) and waits up to 30 s for <ready>, the socket or port file it writes once it
# serves; a daemon that does not get there fails the test with its log.
start_daemon() {
  local syncopated=$1 ready=$2
  shift 2
  "$syncopated" "$@" 2>"$dir/daemon.log" &
  daemon_pid=$!
  for _ in $(seq 1 300); do [[ -S $ready || -s $ready ]] && return 0; sleep 0.1; done
  echo "daemon did not start"; cat "$dir/daemon.log"; exit 1
}
