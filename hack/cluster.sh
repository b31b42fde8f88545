#!/usr/bin/env bash
# The local test cluster: etcd, kube-apiserver, kube-controller-manager, kube-scheduler and
# kwok-controller from bin/, run by kwokctl's binary runtime on 127.0.0.1, with the fake nodes
# of hack/kwok/nodes.yaml and the pod stages of hack/kwok/cluster.yaml.
#
#   hack/cluster.sh up        create (or reuse) the cluster; prints the kubeconfig path
#   hack/cluster.sh down      delete it
#   hack/cluster.sh kubeconfig  print the kubeconfig path
#   hack/cluster.sh running   exit 0 if the cluster is up and its API server ready
#   hack/cluster.sh stop|start  stop every process of the cluster (etcd, kube-apiserver, scheduler,
#                               controller manager, KWOK), start them again: a full control-plane
#                               restart, as a platform team's upgrade does it (the benchmark's
#                               outage with restart "full").
#   hack/cluster.sh apiserver-down|apiserver-up
#                               stop the kube-apiserver, start it again with the same arguments:
#                               the benchmark's outage. etcd and KWOK (the "kubelets") keep
#                               running, as they do when a real control plane restarts. A full
#                               restart (`kwokctl --name ato stop cluster`, then `start cluster`)
#                               also works: a restarted KWOK takes its nodes' 10 s leases over
#                               within seconds (hack/kwok/cluster.yaml says why that matters).
#
# State lives in .kwok/ of this checkout; the kubeconfig is .kwok/clusters/<name>/kubeconfig.yaml.
# The name is ATO_CLUSTER (default ato); the benchmark uses its own (ato-bench) so its
# measurements start from an idle API server and never touch the jobs of the test cluster.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/bin"
export KWOK_WORKDIR="$root/.kwok"
name=${ATO_CLUSTER:-ato}
kubeconfig="$KWOK_WORKDIR/clusters/$name/kubeconfig.yaml"
log() { printf '[cluster] %s\n' "$*" >&2; }

# kwokctl prefers the first kubectl on PATH; ours must win over any older one on the machine.
export PATH="$bin:$PATH"
export KWOK_KUBE_APISERVER_BINARY="$bin/kube-apiserver" \
  KWOK_KUBE_CONTROLLER_MANAGER_BINARY="$bin/kube-controller-manager" \
  KWOK_KUBE_SCHEDULER_BINARY="$bin/kube-scheduler" \
  KWOK_KUBECTL_BINARY="$bin/kubectl" \
  KWOK_ETCD_BINARY="$bin/etcd" \
  KWOK_CONTROLLER_BINARY="$bin/kwok"

healthy() { [ -f "$kubeconfig" ] && "$bin/kubectl" --kubeconfig "$kubeconfig" get --raw /readyz >/dev/null 2>&1; }

up() {
  if healthy; then log "reusing running cluster"; echo "$kubeconfig"; return; fi
  if [ -d "$KWOK_WORKDIR/clusters/$name" ]; then
    # A cluster whose processes died with an earlier session: start it again, else rebuild.
    log "starting stopped cluster"
    "$bin/kwokctl" --name "$name" start cluster --wait 2m >&2 || {
      log "restart failed, recreating"
      "$bin/kwokctl" --name "$name" delete cluster >&2 || true
      rm -rf "$KWOK_WORKDIR/clusters/$name"
    }
  fi
  if ! healthy; then
    log "creating cluster (kube $("$bin/kube-apiserver" --version | awk '{print $2}'))"
    "$bin/kwokctl" --name "$name" -c "$root/hack/kwok/cluster.yaml" create cluster \
      --kubeconfig "" --wait 3m >&2
  fi
  "$bin/kubectl" --kubeconfig "$kubeconfig" apply -f "$root/hack/kwok/nodes.yaml" >&2
  "$bin/kubectl" --kubeconfig "$kubeconfig" wait --for=condition=Ready node --all --timeout=120s >&2
  # The default ServiceAccount appears asynchronously; pods in "default" need it.
  for _ in $(seq 60); do
    "$bin/kubectl" --kubeconfig "$kubeconfig" get serviceaccount default >/dev/null 2>&1 && break
    sleep 1
  done
  echo "$kubeconfig"
}

apiserver_pid="$KWOK_WORKDIR/clusters/$name/pids/kube-apiserver.pid"
apiserver_args="$KWOK_WORKDIR/clusters/$name/kube-apiserver.args"

apiserver_down() {
  local pid
  pid=$(cat "$apiserver_pid")
  tr '\0' '\n' <"/proc/$pid/cmdline" >"$apiserver_args"
  kill "$pid"
  # Its graceful shutdown can wait 60 s for clients' connections to drain (the listener is closed
  # at once); the outage is meant to last as long as the caller says, so 5 s, then it is killed.
  for _ in $(seq 25); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.2; done
  kill -KILL "$pid" 2>/dev/null || true
  while kill -0 "$pid" 2>/dev/null; do sleep 0.2; done
}

apiserver_up() {
  local args
  mapfile -t args <"$apiserver_args"
  # `cd && setsid … &` would background the whole list and record a subshell's pid.
  # No newline after the pid: kwokctl parses the file whole, and could not stop this process.
  (cd "$KWOK_WORKDIR/clusters/$name" || exit 1
    setsid "${args[@]}" >>logs/kube-apiserver.log 2>&1 &
    printf '%s' $! >"$apiserver_pid")
  for _ in $(seq 120); do healthy && return; sleep 0.5; done
  log "kube-apiserver did not come back"; return 1
}

down() {
  # JobSet's manager (make run starts it beside the local cluster) would outlive its cluster.
  if [ -f "$root/.local/jobset/$name/jobset.pid" ]; then
    KUBECONFIG=$kubeconfig ATO_CLUSTER=$name "$root/hack/jobset.sh" down >&2 || true
  fi
  if [ -d "$KWOK_WORKDIR/clusters/$name" ]; then
    "$bin/kwokctl" --name "$name" delete cluster >&2
  fi
}

case ${1:-up} in
  up) up ;;
  down) down ;;
  kubeconfig) echo "$kubeconfig" ;;
  running) healthy ;;
  stop) "$bin/kwokctl" --name "$name" stop cluster >&2 ;;
  start) "$bin/kwokctl" --name "$name" start cluster --wait 2m >&2 ;;
  apiserver-down) apiserver_down ;;
  apiserver-up) apiserver_up ;;
  *) echo "usage: $0 up|down|kubeconfig|running|stop|start|apiserver-down|apiserver-up" >&2; exit 2 ;;
esac
