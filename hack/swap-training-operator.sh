#!/usr/bin/env bash
# Switch a cluster from Kubeflow's training-operator v1.9 to this operator with jobs in flight,
# and back: the procedure of docs/swap-training-operator.md, step by step. The cluster test
# tests/swap/test_swap.py runs this script, so the documented procedure is the tested one.
#
#   hack/swap-training-operator.sh to     training-operator -> this operator
#   hack/swap-training-operator.sh from   this operator -> training-operator (the roll-back)
#
# to:   1. scale training-operator's Deployment to zero; wait until its pods are gone
#       2. save its ValidatingWebhookConfiguration (validator.training-operator.kubeflow.org)
#          under $SWAP_STATE, then delete it
#       3. apply our CRDs over its CRDs (server-side, --force-conflicts); wait until Established
#       4. apply our admission policy (ValidatingAdmissionPolicies and their bindings)
#       5. start this operator (hack/deploy.sh deploy: its Deployment, rolled out)
# from: 1. scale our Deployment to zero; wait until its pods are gone
#       2. delete our admission policy
#       3. apply its CRDs back (server-side, --force-conflicts; $TO_CRDS, by default those of
#          the training-operator module at TRAINING_OPERATOR_VERSION); wait until Established
#       4. apply the saved ValidatingWebhookConfiguration back
#       5. scale its Deployment back to the replicas it had
#
# Nothing reconciles jobs between the two operators' stop and start; no job, pod or Service is
# deleted or rewritten by the procedure itself.
#
# Environment: KUBECONFIG (the local cluster when unset), TO_NAMESPACE (kubeflow),
# TO_DEPLOYMENT (training-operator), TO_CRDS (a directory of upstream's CRD files),
# SWAP_STATE (.local/swap: the saved webhook and replica count), SWAP_RUN (deployment).
#
# SWAP_RUN=local runs both operators as processes on this machine instead of Deployments, each in
# a network namespace of its own with the API server relayed in (hack/netns/): training-operator
# through hack/bench/training-operator.sh (TFJob and PyTorchJob controllers), this operator
# through hack/run.sh with a private /tmp/ansible-operator, so neither's fixed ports nor our
# runtime's per-job directories meet another operator's on the machine. Only steps 1 and 5
# differ. Two more commands serve it:
#   hack/swap-training-operator.sh local-up     training-operator's CRDs applied, it started
#   hack/swap-training-operator.sh local-down   stop whichever of the two runs here
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=lib.sh
source "$root/hack/lib.sh"
cd "$root"
export GOTOOLCHAIN=local
to_ns=${TO_NAMESPACE:-kubeflow}
to_deploy=${TO_DEPLOYMENT:-training-operator}
ato_ns=ansible-training-operator-system
ato_deploy=ansible-training-operator-controller-manager
webhook=validator.training-operator.kubeflow.org
state=${SWAP_STATE:-$root/.local/swap}
run=${SWAP_RUN:-deployment}
# How long a step may take before it counts as hung (a bound, not a pace).
hang=${SWAP_HANG_S:-300}

# ---- SWAP_RUN=local: the two operators as processes in network namespaces of their own ----

# netns_start NAME COMMAND...: COMMAND in a new network namespace (and mount namespace) of its
# own session, with the API server relayed in; pids in $state/NAME.{pid,relay}. A mount
# namespace lets our operator's runtime have a /tmp/ansible-operator of its own.
netns_start() {
  local name=$1 api netns=() socket
  socket="$state/$name.sock"
  shift
  api=$(loopback_api) && private_netns || return 1
  rm -f "$socket"
  # Every process started here writes to files: the caller may be reading this script's output
  # until every holder of its pipes is gone.
  setsid python3 hack/netns/relay.py unix-to-tcp "$socket" "$api" </dev/null >/dev/null 2>"$state/$name-relay.log" &
  echo $! >"$state/$name.relay"
  for _ in $(seq 50); do [ -S "$socket" ] && break; sleep 0.1; done
  mkdir -p "$state/$name-runner" /tmp/ansible-operator
  setsid "${netns[@]}" --mount -- bash -c \
    'mount --bind "$1" /tmp/ansible-operator && shift && exec "$@"' bash "$state/$name-runner" \
    hack/netns/in-netns.sh "$api" "$socket" "$@" &
  echo $! >"$state/$name.pid"
}

# netns_stop NAME: the session NAME's command leads (SIGINT, as Ctrl-C; SIGKILL after 60 s), then
# the relays; the relay inside ignores SIGINT (started in the background), so it gets SIGTERM.
netns_stop() {
  local name=$1 pid relay
  pid=$(cat "$state/$name.pid" 2>/dev/null) || pid=""
  if [ -n "$pid" ]; then
    kill -INT -- "-$pid" 2>/dev/null || true
    for _ in $(seq 600); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    kill -TERM -- "-$pid" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 -- "-$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL -- "-$pid" 2>/dev/null || true
  fi
  relay=$(cat "$state/$name.relay" 2>/dev/null) || relay=""
  [ -z "$relay" ] || kill -TERM "$relay" 2>/dev/null || true
  rm -f "$state/$name.pid" "$state/$name.relay" "$state/$name.sock"
}

# local_training_operator_start: hack/bench/training-operator.sh start in its netns; that script
# returns once /readyz answers, the operator itself lives on in its own session.
local_training_operator_start() {
  hack/build-go-tools.sh training-operator >&2 # cached; no network inside the namespace
  local n log
  n=$(find "$state" -maxdepth 1 -name 'training-operator-[0-9]*.log' | wc -l)
  log="$state/training-operator-$((n + 1)).log"
  TRAINING_OPERATOR_LOG=$log
  export TRAINING_OPERATOR_LOG
  netns_start training-operator hack/bench/training-operator.sh start --enable-scheme=pytorchjob \
    </dev/null >"$state/training-operator-start.log" 2>&1
  local pid
  pid=$(cat "$state/training-operator.pid")
  wait "$pid" || { cat "$state/training-operator-start.log" >&2; log "training-operator did not start (log: $log)"; return 1; }
  log "training-operator running (log: $log)"
}

local_training_operator_stop() {
  hack/bench/training-operator.sh stop
  netns_stop training-operator
}

# local_operator_start: hack/run.sh in its netns (ports fixed at 127.0.0.1:6789/8443/8686/8888
# there); its health endpoint is on its own loopback, so it counts as started once every
# controller of watches.yaml runs its workers.
local_operator_start() {
  local n log kinds
  n=$(find "$state" -maxdepth 1 -name 'operator-[0-9]*.log' | wc -l)
  log="$state/operator-$((n + 1)).log"
  kinds=$(grep -c '^  kind:' watches.yaml)
  netns_start operator hack/run.sh </dev/null >"$log" 2>&1
  local pid t0=$SECONDS
  pid=$(cat "$state/operator.pid")
  until [ "$(grep -c '"msg":"Starting workers"' "$log")" -ge "$kinds" ]; do
    kill -0 "$pid" 2>/dev/null || { tail -50 "$log" >&2; return 1; }
    [ $((SECONDS - t0)) -lt "$hang" ] || { log "operator not started (log: $log)"; return 1; }
    sleep 0.5
  done
  log "operator running (log: $log)"
}

local_operator_stop() { netns_stop operator; }

# ---- the steps ----

# stop_training_operator: step 1 of `to`; the replicas it had are kept for `from`.
stop_training_operator() {
  log "1. stopping training-operator"
  if [ "$run" = local ]; then local_training_operator_stop; return; fi
  scale_to_zero "$to_ns" "$to_deploy" "$hang" >"$state/training-operator.replicas"
}

start_training_operator() {
  log "5. starting training-operator"
  if [ "$run" = local ]; then local_training_operator_start; return; fi
  scale_back "$to_ns" "$to_deploy" "$(cat "$state/training-operator.replicas" 2>/dev/null)" "$hang"
}

stop_operator() {
  log "1. stopping this operator"
  if [ "$run" = local ]; then local_operator_stop; return; fi
  scale_to_zero "$ato_ns" "$ato_deploy" "$hang" >/dev/null
}

start_operator() {
  log "5. starting this operator"
  if [ "$run" = local ]; then local_operator_start; return; fi
  hack/deploy.sh deploy
}

# remove_webhook: step 2 of `to`. Its failurePolicy is Fail: left behind with no server, it
# refuses every create and update of a job, our operator's label patches included. The copy
# lets `from` put it back; a copy of an earlier run is kept when the webhook is gone already.
remove_webhook() {
  log "2. removing training-operator's ValidatingWebhookConfiguration $webhook"
  local saved
  saved=$(kubectl get validatingwebhookconfiguration "$webhook" --ignore-not-found -o json)
  if [ -n "$saved" ]; then
    jq 'del(.metadata.resourceVersion, .metadata.uid, .metadata.creationTimestamp,
        .metadata.generation, .metadata.managedFields)' <<<"$saved" >"$state/webhook.json"
    kubectl delete validatingwebhookconfiguration "$webhook" >&2
  fi
}

restore_webhook() {
  log "4. applying training-operator's ValidatingWebhookConfiguration back"
  if [ -f "$state/webhook.json" ]; then
    kubectl apply --server-side --force-conflicts -f "$state/webhook.json" >&2
  else
    log "   none was saved by 'to': nothing to put back"
  fi
}

# apply_crds FILE...: server-side (the CRDs are too big for client-side apply's annotation), with
# --force-conflicts (the other operator's field manager owns the fields); stored jobs stay,
# since group, version and names are the same.
apply_crds() {
  local names
  names=$(kubectl apply --server-side --force-conflicts -o name "${@/#/-f}")
  # shellcheck disable=SC2086 # one CRD name a word
  kubectl wait --for=condition=Established --timeout="${hang}s" $names >/dev/null
}

our_crds() {
  log "3. applying our CRDs over training-operator's"
  local files
  files=$(kubectl kustomize config/crd)
  kubectl apply --server-side --force-conflicts -f - <<<"$files" >&2
  kubectl wait --for=condition=Established --timeout="${hang}s" crd --all >/dev/null
}

their_crds() {
  log "3. applying training-operator's CRDs back"
  local dir=${TO_CRDS:-}
  if [ -z "$dir" ]; then
    dir=$(go mod download -json "github.com/kubeflow/training-operator@$TRAINING_OPERATOR_VERSION" |
      jq -r .Dir)/manifests/base/crds
  fi
  # Not -k: upstream's kustomization there names the same files; -f on the directory would
  # read the kustomization.yaml as an object.
  apply_crds "$dir"/kubeflow.org_*.yaml
}

to() {
  stop_training_operator
  remove_webhook
  our_crds
  log "4. applying our admission policy"
  kubectl apply --server-side --force-conflicts -k config/admission >&2
  start_operator
}

from() {
  stop_operator
  log "2. deleting our admission policy"
  kubectl delete --ignore-not-found -k config/admission >&2
  their_crds
  restore_webhook
  start_training_operator
}

mkdir -p "$state"
use_cluster
case ${1:-} in
  to) to ;;
  from) from ;;
  local-up)
    run=local
    their_crds
    local_training_operator_start
    ;;
  local-down)
    local_operator_stop
    local_training_operator_stop
    ;;
  *) echo "usage: $0 to|from|local-up|local-down" >&2; exit 2 ;;
esac
log "done: $1"
