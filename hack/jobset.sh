#!/usr/bin/env bash
# JobSet's manager (sigs.k8s.io/jobset, the module root's main package, JOBSET_VERSION) as a
# process on this machine, against the cluster in KUBECONFIG (the local one if unset), the way a
# user runs a controller out of cluster. The Jobs it creates are run by the control plane's own
# Job controller, their pods by the cluster's nodes (KWOK, or the real node).
#
#   hack/jobset.sh up       build it if needed, install its CRD and webhooks, start it (idempotent)
#   hack/jobset.sh down     stop it and remove its webhook configurations (the CRD and JobSets stay)
#   hack/jobset.sh running  exit 0 if it runs and is ready
#
# Its config (hack/jobset/config.yaml) turns leader election and internal cert management off.
# Webhooks and metrics are served on 127.0.0.1 with a certificate from a CA this script makes;
# the API server reaches the webhooks by URL (hack/loopback_webhooks.py): upstream's JobSet
# webhooks and its pod webhooks, which only see pods labelled jobset.sigs.k8s.io/jobset-name.
# The CRD has a single version, so upstream's conversion webhook is never called and is left out.
# State, certificates and the log: .local/jobset/<cluster>/ (the cluster is ATO_CLUSTER).
#
# Ports (127.0.0.1): JOBSET_WEBHOOK_PORT (19463), JOBSET_METRICS_PORT (19464),
# JOBSET_HEALTH_PORT (19465).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=lib.sh
source "$root/hack/lib.sh"
# shellcheck source=host-manager.sh
source "$root/hack/host-manager.sh"
webhook_port=${JOBSET_WEBHOOK_PORT:-19463}
metrics_port=${JOBSET_METRICS_PORT:-19464}
health_port=${JOBSET_HEALTH_PORT:-19465}
state="$root/.local/jobset/${ATO_CLUSTER:-ato}"
pidfile="$state/jobset.pid" logfile="$state/jobset.log"
readyz="http://127.0.0.1:$health_port/readyz"

config() {
  sed -e "s|\"@WEBHOOK_PORT@\"|$webhook_port|; s|@METRICS_PORT@|$metrics_port|" \
    -e "s|@HEALTH_PORT@|$health_port|; s|@CERT_DIR@|$state/certs|" \
    "$root/hack/jobset/config.yaml" >"$state/config.yaml"
}

install_jobset_apis() {
  local module
  module=$(module_dir sigs.k8s.io/jobset "$JOBSET_VERSION")
  # Server-side: the CRD is too large for the last-applied annotation of a client-side apply.
  kubectl apply --server-side --force-conflicts \
    -f "$module/config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml" >&2
  established jobsets.jobset.x-k8s.io
  apply_webhooks "$module/config/components/webhook" "https://127.0.0.1:$webhook_port" \
    "$state/certs/ca.crt" jobset-
}

up() {
  use_cluster
  if manager_running "$pidfile" "$readyz"; then log "JobSet is running (pid $(cat "$pidfile"))"; return; fi
  stop_manager "$pidfile"
  free_ports "$webhook_port" "$metrics_port" "$health_port"
  "$root/hack/build-go-tools.sh" jobset
  mkdir -p "$state"
  serving_certificates "$state/certs" jobset-local-ca
  config
  install_jobset_apis
  log "starting JobSet $JOBSET_VERSION (log: $logfile)"
  start_manager "$pidfile" "$logfile" "$readyz" "$root/bin/jobset" --config="$state/config.yaml" \
    --zap-devel=false --zap-log-level=info
  log "JobSet is ready"
}

# down: stop JobSet, then remove its webhooks, which would refuse every JobSet (and JobSet pod)
# create (failurePolicy Fail) with nobody serving them. The CRD and JobSets stay, as after
# `kubectl delete deploy`.
down() {
  stop_manager "$pidfile"
  cluster_if_up || return 0
  kubectl delete mutatingwebhookconfiguration jobset-mutating-webhook-configuration --ignore-not-found >&2
  kubectl delete validatingwebhookconfiguration jobset-validating-webhook-configuration --ignore-not-found >&2
}

case ${1:-up} in
  up) up ;;
  down) down ;;
  running) manager_running "$pidfile" "$readyz" ;;
  *) echo "usage: $0 up|down|running" >&2; exit 2 ;;
esac
