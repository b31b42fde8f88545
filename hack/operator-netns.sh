#!/usr/bin/env bash
# This operator (hack/run.sh) as a process in a network namespace of its own, started and stopped
# by a cluster test that must switch operators itself (tests/trainer/test_side_by_side.py runs
# upstream's Trainer first, then this operator on the same TrainJobs). Its fixed ports
# (6789/8443/8686/8888) are on the namespace's own loopback, so they clash with no other operator
# on the machine; the API server in KUBECONFIG (a loopback one) is relayed in (hack/netns/).
#
#   hack/operator-netns.sh up LOGFILE   start it; return once every controller of watches.yaml
#                                       runs its workers
#   hack/operator-netns.sh down         stop it (its process group: every Ansible run it started)
#
# State (pids, the relay's socket): .local/operator-netns/<cluster>/ (the cluster is ATO_CLUSTER).
# How long it may take to start before it counts as hung: OPERATOR_NETNS_HANG_S (300).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=lib.sh
source "$root/hack/lib.sh"
cd "$root"
state="$root/.local/operator-netns/${ATO_CLUSTER:-ato}"
hang=${OPERATOR_NETNS_HANG_S:-300}

up() {
  local logfile=$1 api netns=() socket="$state/api.sock" kinds pid t0=$SECONDS
  mkdir -p "$state"
  [ ! -f "$state/operator.pid" ] || { log "already running (pid $(cat "$state/operator.pid"))"; return 1; }
  api=$(loopback_api) && private_netns || return 1
  rm -f "$socket"
  # Every process started here writes to files: the caller may read this script's output until
  # every holder of its pipes is gone.
  setsid python3 hack/netns/relay.py unix-to-tcp "$socket" "$api" </dev/null >/dev/null 2>"$state/relay.log" &
  echo $! >"$state/relay.pid"
  for _ in $(seq 50); do [ -S "$socket" ] && break; sleep 0.1; done
  setsid "${netns[@]}" -- hack/netns/in-netns.sh "$api" "$socket" hack/run.sh </dev/null >"$logfile" 2>&1 &
  pid=$!
  echo "$pid" >"$state/operator.pid"
  kinds=$(grep -c '^  kind:' watches.yaml)
  until [ "$(grep -c '"msg":"Starting workers"' "$logfile")" -ge "$kinds" ]; do
    kill -0 "$pid" 2>/dev/null || { tail -50 "$logfile" >&2; down; return 1; }
    [ $((SECONDS - t0)) -lt "$hang" ] || { log "the operator did not start (log: $logfile)"; down; return 1; }
    sleep 0.5
  done
  log "the operator runs (log: $logfile)"
}

# down: SIGINT to its process group (as Ctrl-C), SIGKILL after 60 s; then the relay, which as a
# background job ignores SIGINT.
down() {
  local pid relay
  pid=$(cat "$state/operator.pid" 2>/dev/null) || pid=""
  if [ -n "$pid" ]; then
    kill -INT -- "-$pid" 2>/dev/null || true
    for _ in $(seq 600); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL -- "-$pid" 2>/dev/null || true
  fi
  relay=$(cat "$state/relay.pid" 2>/dev/null) || relay=""
  [ -z "$relay" ] || kill -TERM "$relay" 2>/dev/null || true
  rm -f "$state/operator.pid" "$state/relay.pid" "$state/api.sock"
}

case ${1:-} in
  up) [ -n "${2:-}" ] || { echo "usage: $0 up LOGFILE" >&2; exit 2; }; up "$2" ;;
  down) down ;;
  *) echo "usage: $0 up LOGFILE|down" >&2; exit 2 ;;
esac
