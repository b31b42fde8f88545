#!/usr/bin/env bash
# Kubeflow's own training-operator (TRAINING_OPERATOR_VERSION in versions.env), run here as a
# process out of cluster against the cluster in KUBECONFIG: the baseline the benchmark compares
# this operator with. The TFJob controller runs (--enable-scheme=tfjob), and those a caller adds.
#
#   hack/bench/training-operator.sh crds    apply upstream's CRDs (manifests/base/crds of the
#                                           module source) and wait until they are Established
#   hack/bench/training-operator.sh start [FLAG...]   start it in the background, wait for /readyz;
#                                           FLAGs go to the operator (e.g. --controller-threads=4)
#   hack/bench/training-operator.sh stop    stop it and wait until it has exited
#   hack/bench/training-operator.sh delete-crds   delete upstream's CRDs again (never ours)
#
# Upstream's tfjobs.kubeflow.org replaces ours (same name): the caller deletes ours first; `crds`
# refuses to overwrite it. The binary is built from the Go module proxy on first use
# (hack/build-go-tools.sh training-operator). The pid file is .kwok/bench-training-operator/pid,
# the log .kwok/bench-training-operator/training-operator.log unless TRAINING_OPERATOR_LOG is set.
#
# What the operator needs at start-up (cmd/training-operator.v1/main.go, pkg/cert/cert.go):
# - its cert rotator (open-policy-agent/cert-controller) reads the Secret
#   training-operator-webhook-cert in namespace $MY_POD_NAMESPACE (default kubeflow) and fails if
#   it is missing; it never creates it. A CA and a server certificate for
#   training-operator.kubeflow.svc made here with openssl are stored in it, in the rotator's
#   format (PKCS#1 keys, CA with DNS name training-operator-ca), so it keeps them.
# - the rotator then waits for tls.crt in /tmp/k8s-webhook-server/serving-certs (hard-coded; in
#   cluster the Secret is mounted there) and for "CA injection" into the
#   ValidatingWebhookConfiguration validator.training-operator.kubeflow.org; a missing
#   configuration counts as done (logged as an error), so none is created and the API server
#   never calls the webhook. Only then are the controllers set up and /readyz turns OK.
# - the webhook server reads its certificate from $TMPDIR/k8s-webhook-server/serving-certs
#   (controller-runtime's default): TMPDIR points into the state directory, so it serves the
#   certificate made here; /tmp/k8s-webhook-server/serving-certs gets a copy only if it has none.
# Metrics and health probes are bound to 127.0.0.1. The webhook server has only a port flag: it
# listens on all addresses (:TO_WEBHOOK_PORT), which no flag changes; nothing connects to it but
# the operator's own readiness check (over loopback).
#
# Environment: KUBECONFIG (required), TRAINING_OPERATOR_LOG, TO_METRICS_ADDR (127.0.0.1:18080),
# TO_HEALTH_ADDR (127.0.0.1:18081), TO_WEBHOOK_PORT (19443), TO_START_TIMEOUT (seconds, 180).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=../lib.sh
source "$root/hack/lib.sh"
export GOTOOLCHAIN=local
state="$root/.kwok/bench-training-operator"
pidfile="$state/pid"
logfile=${TRAINING_OPERATOR_LOG:-$state/training-operator.log}
certs="$state/certs"
namespace=kubeflow
secret=training-operator-webhook-cert
service=training-operator
rotator_dir=/tmp/k8s-webhook-server/serving-certs
metrics_addr=${TO_METRICS_ADDR:-127.0.0.1:18080}
health_addr=${TO_HEALTH_ADDR:-127.0.0.1:18081}
webhook_port=${TO_WEBHOOK_PORT:-19443}
start_timeout=${TO_START_TIMEOUT:-180}

need_cluster() {
  [ -n "${KUBECONFIG:-}" ] || { log "set KUBECONFIG to the cluster to run against"; exit 2; }
  kubectl get --raw /readyz >/dev/null || { log "the cluster in $KUBECONFIG is not ready"; exit 1; }
}

# ours CRD: the CRD exists and is this project's (the label its CRDs carry).
ours() {
  [ "$(kubectl get crd "$1" --ignore-not-found -o jsonpath='{.metadata.labels.app\.kubernetes\.io/part-of}')" = \
    ansible-training-operator ]
}

# installed CRD: the CRD exists.
installed() { [ -n "$(kubectl get crd "$1" --ignore-not-found -o name)" ]; }

module_dir() {
  local dir
  dir=$(go mod download -json "github.com/kubeflow/training-operator@$TRAINING_OPERATOR_VERSION" |
    sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
  [ -d "$dir" ] || { log "github.com/kubeflow/training-operator@$TRAINING_OPERATOR_VERSION not downloaded"; exit 1; }
  echo "$dir"
}

crds() {
  need_cluster
  if ours tfjobs.kubeflow.org; then
    log "tfjobs.kubeflow.org is this project's CRD: delete it (and its TFJobs) first"
    exit 1
  fi
  local dir files names
  dir=$(module_dir)
  # Not -f on the directory: it also holds a kustomization.yaml.
  files=("$dir"/manifests/base/crds/kubeflow.org_*.yaml)
  [ -f "${files[0]}" ] || { log "no CRDs in $dir/manifests/base/crds"; exit 1; }
  # Server-side: the CRDs are too large for the last-applied annotation of a client-side apply.
  names=$(kubectl apply --server-side --force-conflicts -o name "${files[@]/#/-f}")
  # shellcheck disable=SC2086 # one CRD name a word
  kubectl wait --for=condition=Established --timeout=60s $names >/dev/null
  log "training-operator $TRAINING_OPERATOR_VERSION CRDs established: $(echo "$names" | sed 's|.*/||' | paste -sd' ')"
}

delete_crds() {
  need_cluster
  local dir names=() f name
  dir=$(module_dir)
  for f in "$dir"/manifests/base/crds/kubeflow.org_*.yaml; do
    name=$(sed -n 's/^  name: \(.*\)$/\1/p' "$f" | head -1)
    # Only upstream's: a CRD of this project (same name for TFJob) is left alone.
    if installed "$name" && ! ours "$name"; then
      names+=("$name")
    fi
  done
  if [ ${#names[@]} -eq 0 ]; then log "none of upstream's CRDs is installed"; return; fi
  kubectl delete crd "${names[@]}" --wait=true --timeout=120s >/dev/null
  log "deleted ${names[*]}"
}

# alive PID: the process exists and is not a zombie (a child of this shell that exited).
alive() { [ -r "/proc/$1/stat" ] && [ "$(cut -d' ' -f3 "/proc/$1/stat")" != Z ]; }

# running: true when the pid file names a live training-operator process.
running() {
  local pid
  [ -f "$pidfile" ] || return 1
  pid=$(cat "$pidfile")
  [ -n "$pid" ] && alive "$pid" &&
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q '/training-operator '
}

# certificates: a CA and a server certificate as upstream's cert rotator would make them (it
# checks the CA against the DNS name training-operator-ca, the server certificate against
# training-operator.<namespace>.svc, both valid for 90 more days, and reads the CA key as
# PKCS#1). Made once, again when less than 100 days are left.
certificates() {
  local dns="$service.$namespace.svc"
  if [ -f "$certs/tls.crt" ] && openssl x509 -checkend $((100 * 86400)) -noout -in "$certs/tls.crt" >/dev/null &&
    openssl x509 -checkend $((100 * 86400)) -noout -in "$certs/ca.crt" >/dev/null; then
    return
  fi
  log "making the webhook certificates (openssl)"
  rm -rf "$certs"; mkdir -p "$certs"
  openssl genrsa -traditional -out "$certs/ca.key" 2048 2>/dev/null
  openssl req -x509 -new -key "$certs/ca.key" -days 3650 -subj "/O=training-operator/CN=training-operator-ca" \
    -addext "subjectAltName=DNS:training-operator-ca" -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,digitalSignature,keyEncipherment,keyCertSign" -out "$certs/ca.crt"
  openssl genrsa -traditional -out "$certs/tls.key" 2048 2>/dev/null
  openssl req -new -key "$certs/tls.key" -subj "/CN=$dns" -out "$certs/tls.csr"
  printf '%s\n' "subjectAltName=DNS:$dns,DNS:localhost,IP:127.0.0.1" "basicConstraints=CA:FALSE" \
    "keyUsage=critical,digitalSignature,keyEncipherment" "extendedKeyUsage=serverAuth" >"$certs/ext.cnf"
  openssl x509 -req -in "$certs/tls.csr" -CA "$certs/ca.crt" -CAkey "$certs/ca.key" -CAcreateserial \
    -days 365 -extfile "$certs/ext.cnf" -out "$certs/tls.crt" 2>/dev/null
  chmod 600 "$certs"/*.key
}

start() {
  need_cluster
  if running; then log "already running (pid $(cat "$pidfile"))"; return; fi
  if ! installed tfjobs.kubeflow.org || ours tfjobs.kubeflow.org; then
    log "upstream's tfjobs.kubeflow.org is not installed: run '$0 crds' first (after deleting ours)"
    exit 1
  fi
  local addr
  for addr in "$metrics_addr" "$health_addr" "127.0.0.1:$webhook_port"; do
    if (exec 3<>"/dev/tcp/${addr%:*}/${addr##*:}") 2>/dev/null; then
      log "$addr is in use (set TO_METRICS_ADDR, TO_HEALTH_ADDR or TO_WEBHOOK_PORT)"
      exit 1
    fi
  done
  "$root/hack/build-go-tools.sh" training-operator
  mkdir -p "$state"
  certificates
  kubectl create namespace "$namespace" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
  kubectl -n "$namespace" create secret generic "$secret" --dry-run=client -o yaml \
    --from-file="$certs/ca.crt" --from-file="$certs/ca.key" \
    --from-file="$certs/tls.crt" --from-file="$certs/tls.key" |
    kubectl apply --server-side --force-conflicts -f - >/dev/null
  local serving="$state/tmp/k8s-webhook-server/serving-certs"
  mkdir -p "$serving"
  cp "$certs/tls.crt" "$certs/tls.key" "$serving/"
  if [ ! -e "$rotator_dir/tls.crt" ]; then
    mkdir -p "$rotator_dir"
    cp "$certs/tls.crt" "$certs/tls.key" "$rotator_dir/"
  fi
  [ ! -f "$logfile" ] || mv "$logfile" "$logfile.1"
  # Its own session, so that a Ctrl-C of the caller leaves it to `stop`. No proxy: it talks only
  # to the API server on loopback.
  TMPDIR="$state/tmp" MY_POD_NAMESPACE="$namespace" \
    setsid env -u HTTP_PROXY -u HTTPS_PROXY -u http_proxy -u https_proxy \
    "$root/bin/training-operator" --enable-scheme=tfjob \
    --metrics-bind-address="$metrics_addr" --health-probe-bind-address="$health_addr" \
    --webhook-server-port="$webhook_port" "$@" >"$logfile" 2>&1 </dev/null &
  local pid=$! t0=$SECONDS
  echo "$pid" >"$pidfile"
  log "started training-operator $TRAINING_OPERATOR_VERSION (pid $pid), log ${logfile#"$root"/}"
  until curl -fsS --noproxy '*' -m 5 "http://$health_addr/readyz" >/dev/null 2>&1; do
    if ! alive "$pid"; then
      log "training-operator exited; last lines of ${logfile#"$root"/}:"
      tail -n 20 "$logfile" >&2
      rm -f "$pidfile"
      exit 1
    fi
    if [ $((SECONDS - t0)) -ge "$start_timeout" ]; then
      log "not ready after ${start_timeout}s; see ${logfile#"$root"/}"
      stop
      exit 1
    fi
    sleep 0.5
  done
  log "ready after $((SECONDS - t0))s (readyz http://$health_addr/readyz, metrics http://$metrics_addr/metrics)"
}

stop() {
  if ! running; then
    log "not running"
    rm -f "$pidfile"
    return
  fi
  local pid
  pid=$(cat "$pidfile")
  kill -TERM "$pid"
  # controller-runtime gives its runnables up to 30 s after SIGTERM.
  for _ in $(seq 400); do
    alive "$pid" || break
    sleep 0.1
  done
  if alive "$pid"; then
    log "still running after 40s; killing pid $pid"
    kill -KILL "$pid" 2>/dev/null || true
    while alive "$pid"; do sleep 0.1; done
  fi
  rm -f "$pidfile"
  log "stopped (pid $pid)"
}

cmd=${1:-}
[ $# -eq 0 ] || shift
case $cmd in
  crds) crds ;;
  start) start "$@" ;;
  stop) stop ;;
  delete-crds) delete_crds ;;
  *) echo "usage: $0 crds|start [FLAG...]|stop|delete-crds" >&2; exit 2 ;;
esac
