#!/usr/bin/env bash
# Kueue's manager (sigs.k8s.io/kueue ./cmd/kueue, KUEUE_VERSION) as a process on this machine,
# against the cluster in KUBECONFIG (the local one if unset), the way a user runs it out of cluster.
#
#   hack/kueue.sh up       build it if needed, install its CRDs and webhooks, start it (idempotent)
#   hack/kueue.sh down     stop it and remove its webhook configurations (CRDs and queues stay)
#   hack/kueue.sh running  exit 0 if it runs and is ready
#
# Its config (hack/kueue/config.yaml) enables the Kubeflow v1 frameworks (off by default in
# v0.19), turns leader election and internal cert management off and enables waitForPodsReady.
# Webhooks, conversion and metrics are served on 127.0.0.1 with a certificate from a CA this
# script makes; the API server reaches them by URL (hack/kueue/render.py). Kueue reads its metrics
# certificate from the fixed path /etc/kueue/metrics/certs, so it runs in a mount namespace of its
# own where an overlay on /etc adds that directory: nothing of the machine's /etc changes.
# State, certificates and the log: .local/kueue/<cluster>/ (the cluster is ATO_CLUSTER).
#
# Ports (127.0.0.1): KUEUE_WEBHOOK_PORT (19453), KUEUE_METRICS_PORT (19454),
# KUEUE_HEALTH_PORT (19455).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=lib.sh
source "$root/hack/lib.sh"
webhook_port=${KUEUE_WEBHOOK_PORT:-19453}
metrics_port=${KUEUE_METRICS_PORT:-19454}
health_port=${KUEUE_HEALTH_PORT:-19455}
state="$root/.local/kueue/${ATO_CLUSTER:-ato}"
pidfile="$state/kueue.pid" logfile="$state/kueue.log"
# Kubeflow's v1 jobs Kueue integrates; MXJob (until v0.10) and training-operator's MPIJob v1
# (never) are not among them. "pod": plain pod groups, which queue the pods of the other kinds
# (docs/queues-and-gang-scheduling.md); Kueue's pod webhook then sees every pod created outside
# kube-system and kueue-system, and leaves those without a queue label alone.
# TrainJob (Trainer v2): Kueue sets its controller up only once the TrainJob CRD is served (it
# polls for it), and that controller watches the JobSets the TrainJobs own: start JobSet first
# (hack/jobset.sh up installs its CRD). Kueue builds each TrainJob's JobSet from its runtime itself
# to count its pods, and admits it through a runtimePatches entry of its own (manager
# kueue.x-k8s.io/manager) which the operator applies to the JobSet.
frameworks=(kubeflow.org/tfjob kubeflow.org/pytorchjob kubeflow.org/xgboostjob kubeflow.org/jaxjob
  kubeflow.org/paddlejob trainer.kubeflow.org/trainjob pod)

running() {
  [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null &&
    curl -fsS "http://127.0.0.1:$health_port/readyz" >/dev/null 2>&1
}

# certificates: a CA, and one serving certificate for IP 127.0.0.1 (webhooks and metrics).
certificates() {
  local certs="$state/certs"
  [ -s "$certs/tls.crt" ] && return
  mkdir -p "$certs"
  openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=kueue-local-ca" \
    -keyout "$certs/ca.key" -out "$certs/ca.crt" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" \
    -keyout "$certs/tls.key" -out "$certs/tls.csr" 2>/dev/null
  openssl x509 -req -in "$certs/tls.csr" -CA "$certs/ca.crt" -CAkey "$certs/ca.key" \
    -CAcreateserial -days 3650 -out "$certs/tls.crt" \
    -extfile <(printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n') 2>/dev/null
  # The overlay's upper layer: /etc/kueue/metrics/certs inside Kueue's mount namespace.
  mkdir -p "$state/etc/kueue/metrics/certs" "$state/etc-work"
  cp "$certs/tls.crt" "$certs/tls.key" "$state/etc/kueue/metrics/certs/"
}

config() {
  sed -e "s|\"@WEBHOOK_PORT@\"|$webhook_port|; s|@METRICS_PORT@|$metrics_port|" \
    -e "s|@HEALTH_PORT@|$health_port|; s|@CERT_DIR@|$state/certs|" \
    "$root/hack/kueue/config.yaml" >"$state/config.yaml"
  local f
  for f in "${frameworks[@]}"; do printf '  - %s\n' "$f" >>"$state/config.yaml"; done
}

install_kueue_apis() {
  local module
  module=$(go mod download -json "sigs.k8s.io/kueue@$KUEUE_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
  kubectl create namespace kueue-system --dry-run=client -o yaml | kubectl apply -f - >/dev/null
  "$root/.venv/bin/python" "$root/hack/kueue/render.py" "$module" "$webhook_port" \
    "$state/certs/ca.crt" "${frameworks[@]}" | kubectl apply --server-side --force-conflicts -f - >&2
  local crds
  crds=$(kubectl get crd -o name | grep '\.kueue\.x-k8s\.io$')
  # shellcheck disable=SC2086 # one argument per CRD
  kubectl wait --for=condition=Established --timeout=60s $crds >/dev/null
}

start() {
  local ns=(unshare --mount --propagation private)
  [ "$(id -u)" = 0 ] || ns=(unshare --map-root-user --mount --propagation private)
  log "starting Kueue $KUEUE_VERSION (log: $logfile)"
  # VisibilityOnDemand off: its API server would need a certificate and an APIService of its own.
  # shellcheck disable=SC2016 # expanded by the inner shell
  setsid "${ns[@]}" -- sh -c 'mount -t overlay overlay -o "lowerdir=/etc,upperdir=$1,workdir=$2" /etc &&
    shift 2 && exec "$@"' sh "$state/etc" "$state/etc-work" \
    "$root/bin/kueue" --config="$state/config.yaml" --feature-gates=VisibilityOnDemand=false \
    --zap-log-level=info >>"$logfile" 2>&1 &
  echo $! >"$pidfile"
  for _ in $(seq 120); do
    running && { log "Kueue is ready"; return; }
    kill -0 "$(cat "$pidfile")" 2>/dev/null || { tail -30 "$logfile" >&2; return 1; }
    sleep 1
  done
  log "Kueue did not become ready"; tail -30 "$logfile" >&2; return 1
}

up() {
  use_cluster
  if running; then log "Kueue is running (pid $(cat "$pidfile"))"; return; fi
  "$root/hack/build-go-tools.sh" kueue
  mkdir -p "$state"
  certificates
  config
  install_kueue_apis
  start
}

# down: stop Kueue, then remove its webhooks, which would refuse every job create (failurePolicy
# Fail) with nobody serving them. Its CRDs and objects stay, as after `kubectl delete deploy`.
down() {
  if [ -f "$pidfile" ]; then
    local pid; pid=$(cat "$pidfile")
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 30); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
    kill -KILL "$pid" 2>/dev/null || true
    rm -f "$pidfile"
  fi
  use_cluster
  kubectl delete mutatingwebhookconfiguration kueue-mutating-webhook-configuration --ignore-not-found >&2
  kubectl delete validatingwebhookconfiguration kueue-validating-webhook-configuration --ignore-not-found >&2
}

case ${1:-up} in
  up) up ;;
  down) down ;;
  running) running ;;
  *) echo "usage: $0 up|down|running" >&2; exit 2 ;;
esac
