#!/usr/bin/env bash
# Kubeflow Trainer v2's controller manager (github.com/kubeflow/trainer/v2
# ./cmd/trainer-controller-manager, TRAINER_VERSION) as a process on this machine, against the
# cluster in KUBECONFIG (the local one if unset): upstream's TrainJob controller, the other side
# of the side-by-side and swap tests. Its install includes JobSet, so `up` starts hack/jobset.sh.
#
#   hack/trainer.sh up        build it if needed, start JobSet, install its CRDs and webhooks,
#                             start it (idempotent)
#   hack/trainer.sh runtimes  apply upstream's built-in ClusterTrainingRuntimes (its release
#                             overlay manifests/overlays/runtimes); needs it running (webhooks)
#   hack/trainer.sh down      stop it and remove its webhook configurations (CRDs, runtimes,
#                             TrainJobs and JobSet stay; `hack/jobset.sh down` stops JobSet)
#   hack/trainer.sh stop      stop it, its webhook configurations left registered (as a Deployment
#                             scaled to zero leaves them: hack/swap-trainer.sh removes them itself)
#   hack/trainer.sh running   exit 0 if it runs and is ready
#
# Upstream's CRDs (manifests/base/crds) are applied unless this project's CRD of the same name is
# installed (label app.kubernetes.io/part-of=ansible-training-operator): that one is kept, so
# upstream's controller serves the TrainJobs of ours, as in a swap. Its config
# (hack/trainer/config.yaml) turns leader election and cert management off. The webhooks are
# served on 127.0.0.1 with a certificate from a CA this script makes, which the webhook server
# reads from $TMPDIR/k8s-webhook-server/serving-certs (controller-runtime's default; the config
# has no certDir): TMPDIR points into the state directory. The API server reaches them by URL
# (hack/loopback_webhooks.py). The ConfigMap kubeflow-system/kubeflow-trainer-public carries the
# version, as upstream's install does: the SDK's TrainerClient reads it at start-up.
# PodGroup CRDs (hack/gang-schedulers.sh) must be installed before it starts for its
# coscheduling and Volcano plugins to watch PodGroups (it reads them once, at start-up).
# State, certificates and the log: .local/trainer/<cluster>/ (the cluster is ATO_CLUSTER).
#
# Ports (127.0.0.1): TRAINER_WEBHOOK_PORT (19473), TRAINER_METRICS_PORT (19474),
# TRAINER_HEALTH_PORT (19475); TRAINER_STATUS_PORT (19476, all addresses) only with the alpha
# TrainJobStatus feature gate, off here.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=lib.sh
source "$root/hack/lib.sh"
# shellcheck source=host-manager.sh
source "$root/hack/host-manager.sh"
webhook_port=${TRAINER_WEBHOOK_PORT:-19473}
metrics_port=${TRAINER_METRICS_PORT:-19474}
health_port=${TRAINER_HEALTH_PORT:-19475}
status_port=${TRAINER_STATUS_PORT:-19476}
state="$root/.local/trainer/${ATO_CLUSTER:-ato}"
pidfile="$state/trainer.pid" logfile="$state/trainer.log"
readyz="http://127.0.0.1:$health_port/readyz"
system_namespace=kubeflow-system

config() {
  sed -e "s|\"@WEBHOOK_PORT@\"|$webhook_port|; s|\"@STATUS_PORT@\"|$status_port|" \
    -e "s|@METRICS_PORT@|$metrics_port|; s|@HEALTH_PORT@|$health_port|" \
    "$root/hack/trainer/config.yaml" >"$state/config.yaml"
  local serving="$state/tmp/k8s-webhook-server/serving-certs"
  mkdir -p "$serving"
  cp "$state/certs/tls.crt" "$state/certs/tls.key" "$serving/"
}

# ours CRD: the CRD is installed and is this project's.
ours() {
  [ "$(kubectl get crd "$1" --ignore-not-found -o jsonpath='{.metadata.labels.app\.kubernetes\.io/part-of}')" = \
    ansible-training-operator ]
}

install_crds() {
  local module=$1 f name
  for f in "$module"/manifests/base/crds/trainer.kubeflow.org_*.yaml; do
    name=$(basename "$f" .yaml); name=${name#trainer.kubeflow.org_}.trainer.kubeflow.org
    if ours "$name"; then log "keeping this project's CRD $name"; continue; fi
    # Server-side: the CRDs are too large for the last-applied annotation of a client-side apply.
    kubectl apply --server-side --force-conflicts -f "$f" >&2
    established "$name"
  done
}

install_trainer_apis() {
  local module
  module=$(module_dir github.com/kubeflow/trainer/v2 "$TRAINER_VERSION")
  install_crds "$module"
  kubectl create namespace "$system_namespace" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
  kubectl -n "$system_namespace" create configmap kubeflow-trainer-public --dry-run=client -o yaml \
    --from-literal=kubeflow_trainer_version="$TRAINER_VERSION" | kubectl apply -f - >/dev/null
  apply_webhooks "$module/manifests/base/webhook" "https://127.0.0.1:$webhook_port" "$state/certs/ca.crt"
}

up() {
  use_cluster
  "$root/hack/jobset.sh" up
  if manager_running "$pidfile" "$readyz"; then log "Trainer is running (pid $(cat "$pidfile"))"; return; fi
  stop_manager "$pidfile"
  free_ports "$webhook_port" "$metrics_port" "$health_port"
  "$root/hack/build-go-tools.sh" trainer
  mkdir -p "$state"
  serving_certificates "$state/certs" trainer-local-ca
  config
  install_trainer_apis
  log "starting Kubeflow Trainer $TRAINER_VERSION (log: $logfile)"
  start_manager "$pidfile" "$logfile" "$readyz" env TMPDIR="$state/tmp" \
    "$root/bin/trainer-controller-manager" --config="$state/config.yaml" --zap-log-level=info
  log "Trainer is ready"
}

runtimes() {
  use_cluster
  manager_running "$pidfile" "$readyz" || { log "Trainer is not running: $0 up first"; return 1; }
  kubectl apply --server-side --force-conflicts \
    -k "$(module_dir github.com/kubeflow/trainer/v2 "$TRAINER_VERSION")/manifests/overlays/runtimes" >&2
}

# down: stop Trainer, then remove its webhooks, which would refuse every TrainJob and runtime
# create (failurePolicy Fail) with nobody serving them.
down() {
  stop_manager "$pidfile"
  cluster_if_up || return 0
  kubectl delete mutatingwebhookconfiguration defaulter.trainer.kubeflow.org --ignore-not-found >&2
  kubectl delete validatingwebhookconfiguration validator.trainer.kubeflow.org --ignore-not-found >&2
}

case ${1:-up} in
  up) up ;;
  runtimes) runtimes ;;
  down) down ;;
  stop) stop_manager "$pidfile" ;;
  running) manager_running "$pidfile" "$readyz" ;;
  *) echo "usage: $0 up|runtimes|down|stop|running" >&2; exit 2 ;;
esac
