#!/usr/bin/env bash
# The real gang schedulers, as processes on this machine against the cluster in KUBECONFIG (the
# local one if unset), for the gang tests and for trying gang scheduling with `make run`:
#
#   hack/gang-schedulers.sh volcano up|down    Volcano's vc-scheduler (schedulerName volcano) and
#                                              its PodGroup and Queue CRDs
#   hack/gang-schedulers.sh plugins up|down    scheduler-plugins' scheduler (a profile named
#                                              scheduler-plugins-scheduler, Coscheduling) and its
#                                              controller (PodGroup status), and their CRDs
#   hack/gang-schedulers.sh plugins crds       scheduler-plugins' CRDs only (what another
#                                              controller needs to render its PodGroups)
#   hack/gang-schedulers.sh all down           stop whichever runs
#
# Each binary is built from its Go module at the version pinned in versions.env, on first use
# (hack/build-go-tools.sh volcano|scheduler-plugins). `up` is idempotent (a running scheduler is
# kept), `down` too. Every listener binds 127.0.0.1 on a port of GANG_PORT_BASE (default 19500)
# + an offset, so two checkouts on one machine can run side by side with different bases.
# The default kube-scheduler keeps running: only pods whose schedulerName is volcano or
# scheduler-plugins-scheduler go to these. Logs and pid files are in .local/gang/.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=lib.sh
source "$root/hack/lib.sh"
state="$root/.local/gang"
mkdir -p "$state"
base=${GANG_PORT_BASE:-19500}
volcano_healthz=$((base + 10)) volcano_metrics=$((base + 11))
plugins_secure=$((base + 20)) plugins_metrics=$((base + 30)) plugins_probe=$((base + 31))

module_dir() { go mod download -json "$1@$2" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p'; }

running() { local f="$state/$1.pid"; [ -f "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null; }

# start NAME CMD...: run CMD in a session of its own, its output in .local/gang/NAME.log.
start() {
  local name=$1; shift
  if running "$name"; then log "$name already runs (pid $(cat "$state/$name.pid"))"; return; fi
  log "starting $name (log: $state/$name.log)"
  setsid "$@" >"$state/$name.log" 2>&1 &
  echo $! >"$state/$name.pid"
}

stop() {
  local name=$1 f="$state/$1.pid" pid
  running "$name" || { rm -f "$f"; return 0; }
  pid=$(cat "$f")
  log "stopping $name (pid $pid)"
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
  kill -KILL "$pid" 2>/dev/null || true
  rm -f "$f"
}

# wait_healthy NAME URL: until the process answers on its health endpoint (or dies).
wait_healthy() {
  for _ in $(seq 120); do
    curl -fsSk --noproxy '*' "$2" >/dev/null 2>&1 && return 0
    running "$1" || { log "$1 exited:"; tail -30 "$state/$1.log" >&2; return 1; }
    sleep 0.5
  done
  log "$1 did not become healthy at $2"; tail -30 "$state/$1.log" >&2; return 1
}

install_crds() { # install_crds FILE...
  kubectl apply --server-side --force-conflicts "${@/#/-f}" >&2
  kubectl wait --for=condition=Established "${@/#/-f}" --timeout=60s >/dev/null
}

# Volcano's scheduler alone: the admission webhooks and vc-controller-manager (vcjob, queue
# state) play no part in scheduling a PodGroup that another operator creates. Actions and
# plugins are those of upstream's default config, without drf/binpack/overcommit: proportion
# holds each queue to its capability (the cluster's total when it sets none) at enqueue.
volcano_conf() {
  cat <<'EOF'
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
- plugins:
  - name: predicates
  - name: proportion
  - name: nodeorder
EOF
}

volcano_up() {
  "$root/hack/build-go-tools.sh" volcano
  local crds; crds="$(module_dir volcano.sh/volcano "$VOLCANO_VERSION")/installer/helm/chart/volcano/crd/bases"
  install_crds "$crds/scheduling.volcano.sh_podgroups.yaml" "$crds/scheduling.volcano.sh_queues.yaml"
  # A directory of its own: vc-scheduler watches the config's directory and reloads on every
  # write there, which its own log in the same directory would make an endless loop.
  mkdir -p "$state/volcano-conf"
  volcano_conf >"$state/volcano-conf/scheduler.conf"
  # ResourceTopology (on by default) waits for the Numatopology CRD, which nothing here needs.
  # The scheduler creates the "default" queue itself. KUBECONFIG (exported by use_cluster) is
  # also read by its vGPU device code, which otherwise looks for ~/.kube/config.
  start volcano "$root/bin/vc-scheduler" --kubeconfig="$KUBECONFIG" \
    --scheduler-name=volcano --scheduler-conf="$state/volcano-conf/scheduler.conf" \
    --leader-elect=false --feature-gates=ResourceTopology=false \
    --enable-healthz --healthz-address="127.0.0.1:$volcano_healthz" \
    --listen-address="127.0.0.1:$volcano_metrics" --cache-dumper=false --logtostderr -v=3
  wait_healthy volcano "http://127.0.0.1:$volcano_healthz/healthz"
  for _ in $(seq 120); do kubectl get queue.scheduling.volcano.sh default >/dev/null 2>&1 && return; sleep 0.5; done
  log "volcano did not create its default queue"; return 1
}

# Upstream's manifests/coscheduling/scheduler-config.yaml, as a second profile's scheduler:
# Coscheduling sorts the queue and runs at every extension point (PreFilter, PostFilter, Permit,
# Reserve, ...). permitWaitingTimeSeconds is the default wait of a gang whose PodGroup sets no
# scheduleTimeoutSeconds.
plugins_conf() {
  cat <<EOF
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: false
clientConnection:
  kubeconfig: "$KUBECONFIG"
profiles:
- schedulerName: scheduler-plugins-scheduler
  plugins:
    multiPoint:
      enabled:
      - name: Coscheduling
    queueSort:
      enabled:
      - name: Coscheduling
      disabled:
      - name: "*"
  pluginConfig:
  - name: Coscheduling
    args:
      permitWaitingTimeSeconds: 10
EOF
}

plugins_crds() {
  local crds; crds="$(module_dir sigs.k8s.io/scheduler-plugins "$SCHEDULER_PLUGINS_VERSION")/config/crd/bases"
  install_crds "$crds/scheduling.x-k8s.io_podgroups.yaml" "$crds/scheduling.x-k8s.io_elasticquotas.yaml"
}

plugins_up() {
  "$root/hack/build-go-tools.sh" scheduler-plugins
  plugins_crds
  plugins_conf >"$state/scheduler-plugins.yaml"
  start scheduler-plugins-scheduler "$root/bin/scheduler-plugins-scheduler" \
    --config="$state/scheduler-plugins.yaml" --bind-address=127.0.0.1 --secure-port="$plugins_secure" \
    --authentication-kubeconfig="$KUBECONFIG" --authorization-kubeconfig="$KUBECONFIG" -v=3
  # The controller reads KUBECONFIG (exported by use_cluster), as controller-runtime does.
  start scheduler-plugins-controller "$root/bin/scheduler-plugins-controller" \
    --metricsAddr="127.0.0.1:$plugins_metrics" --probeAddr="127.0.0.1:$plugins_probe"
  wait_healthy scheduler-plugins-scheduler "https://127.0.0.1:$plugins_secure/healthz"
  wait_healthy scheduler-plugins-controller "http://127.0.0.1:$plugins_probe/readyz"
}

case ${1:-}/${2:-} in
  volcano/up) use_cluster; volcano_up ;;
  volcano/down) stop volcano ;;
  plugins/up) use_cluster; plugins_up ;;
  plugins/crds) use_cluster; plugins_crds ;;
  plugins/down) stop scheduler-plugins-scheduler; stop scheduler-plugins-controller ;;
  all/down) stop volcano; stop scheduler-plugins-scheduler; stop scheduler-plugins-controller ;;
  *) echo "usage: $0 volcano|plugins up|down, $0 plugins crds, or $0 all down" >&2; exit 2 ;;
esac
