#!/usr/bin/env bash
# Switch a cluster's TrainJobs from Kubeflow Trainer v2.3's controller manager to this operator with
# TrainJobs in flight, and back: the procedure of docs/swap-trainer.md, step by step. The cluster
# test tests/swap/test_swap_trainer.py runs this script, so the documented procedure is the tested
# one.
#
#   hack/swap-trainer.sh to-ato        upstream's Trainer -> this operator
#   hack/swap-trainer.sh to-upstream   this operator -> upstream's Trainer (the roll-back)
#
# to-ato:      1. stop upstream's controller manager (its Deployment scaled to zero; its pods gone)
#              2. save its webhook configurations (validator.trainer.kubeflow.org,
#                 defaulter.trainer.kubeflow.org) under $SWAP_STATE, then delete them
#              3. apply our Trainer CRDs over upstream's (server-side, --force-conflicts); Established
#              4. apply our admission policy (ValidatingAdmissionPolicies and their bindings)
#              5. start this operator (hack/deploy.sh deploy; it applies the built-in runtimes too)
# to-upstream: 1. stop this operator (its Deployment scaled to zero; its pods gone)
#              2. delete our Trainer admission policies; take this operator's finished label off
#                 the TrainJobs (a TrainJob upstream runs again must not stay hidden from a later
#                 to-ato)
#              3. apply upstream's CRDs back ($TRAINER_CRDS, by default those of the Trainer module
#                 at TRAINER_VERSION); Established
#              4. apply the saved webhook configurations back
#              5. scale upstream's Deployment back to the replicas it had
#
# JobSet's controller runs throughout: neither direction touches it, a JobSet, a pod or a runtime.
# Nothing reconciles TrainJobs between the stop (1) and the start (5); no TrainJob's spec or
# status is written by the procedure itself.
#
# Environment: KUBECONFIG (the local cluster when unset), TRAINER_NAMESPACE (kubeflow-system),
# TRAINER_DEPLOYMENT (kubeflow-trainer-controller-manager), TRAINER_CRDS (a directory of
# upstream's trainer.kubeflow.org_*.yaml), SWAP_STATE (.local/swap-trainer: the saved webhooks
# and replica count), SWAP_RUN (deployment).
#
# SWAP_RUN=local runs both controllers as processes on this machine instead of Deployments:
# upstream's through hack/trainer.sh (its webhooks served on 127.0.0.1 by URL; `stop` leaves their
# configurations registered, as a Deployment scaled to zero does, for steps 2 and 4), this operator
# through hack/operator-netns.sh (in a network namespace of its own). Only steps 1 and 5 differ.
# Two more commands serve it:
#   hack/swap-trainer.sh local-up     upstream's CRDs applied, Trainer started, its runtimes applied
#   hack/swap-trainer.sh local-down   stop whichever of the two runs here
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=lib.sh
source "$root/hack/lib.sh"
# shellcheck source=host-manager.sh
source "$root/hack/host-manager.sh"
cd "$root"
export GOTOOLCHAIN=local
trainer_ns=${TRAINER_NAMESPACE:-kubeflow-system}
trainer_deploy=${TRAINER_DEPLOYMENT:-kubeflow-trainer-controller-manager}
ato_ns=ansible-training-operator-system
ato_deploy=ansible-training-operator-controller-manager
webhooks=(validatingwebhookconfiguration/validator.trainer.kubeflow.org
  mutatingwebhookconfiguration/defaulter.trainer.kubeflow.org)
kinds=(trainjobs trainingruntimes clustertrainingruntimes)
policies=(config/admission/trainjob.yaml config/admission/trainingruntime.yaml
  config/admission/clustertrainingruntime.yaml)
finished_label=training.ato.dev/finished
state=${SWAP_STATE:-$root/.local/swap-trainer}
run=${SWAP_RUN:-deployment}
# How long a step may take before it counts as hung (a bound, not a pace).
hang=${SWAP_HANG_S:-300}

# operator_log: a new log file for this operator's run under $state (SWAP_RUN=local).
operator_log() {
  local n
  n=$(find "$state" -maxdepth 1 -name 'operator-[0-9]*.log' | wc -l)
  echo "$state/operator-$((n + 1)).log"
}

# ---- the steps ----

stop_trainer() {
  log "1. stopping Kubeflow Trainer's controller manager"
  if [ "$run" = local ]; then "$root/hack/trainer.sh" stop; return; fi
  scale_to_zero "$trainer_ns" "$trainer_deploy" "$hang" >"$state/trainer.replicas"
}

start_trainer() {
  log "5. starting Kubeflow Trainer's controller manager"
  if [ "$run" = local ]; then "$root/hack/trainer.sh" up; return; fi
  scale_back "$trainer_ns" "$trainer_deploy" "$(cat "$state/trainer.replicas" 2>/dev/null)" "$hang"
}

stop_operator() {
  log "1. stopping this operator"
  if [ "$run" = local ]; then "$root/hack/operator-netns.sh" down; return; fi
  scale_to_zero "$ato_ns" "$ato_deploy" "$hang" >/dev/null
}

start_operator() {
  log "5. starting this operator"
  if [ "$run" = local ]; then "$root/hack/operator-netns.sh" up "$(operator_log)"; return; fi
  hack/deploy.sh deploy
}

# remove_webhooks: step 2 of to-ato. Their failurePolicy is Fail: left behind with no server, they
# refuse every create and update of a TrainJob and a runtime, this operator's label patches and its
# companion's wake annotations included. The copies let to-upstream put them back; a copy of an
# earlier run is kept when the configuration is gone already.
remove_webhooks() {
  log "2. removing Trainer's webhook configurations"
  local webhook saved file
  for webhook in "${webhooks[@]}"; do
    saved=$(kubectl get "$webhook" --ignore-not-found -o json)
    [ -n "$saved" ] || continue
    file="$state/${webhook#*/}.json"
    jq 'del(.metadata.resourceVersion, .metadata.uid, .metadata.creationTimestamp,
        .metadata.generation, .metadata.managedFields)' <<<"$saved" >"$file"
    kubectl delete "$webhook" >&2
  done
}

restore_webhooks() {
  log "4. applying Trainer's webhook configurations back"
  local webhook file restored=false
  for webhook in "${webhooks[@]}"; do
    file="$state/${webhook#*/}.json"
    [ -f "$file" ] || continue
    kubectl apply --server-side --force-conflicts -f "$file" >&2
    restored=true
  done
  $restored || log "   none was saved by to-ato: nothing to put back"
}

crd_names() { printf '%s.trainer.kubeflow.org\n' "${kinds[@]}"; }

# our_crds: step 3 of to-ato. Same group, version, names and fields as upstream's (what differs is
# in docs/swap-trainer.md): every stored TrainJob and runtime stays as it is.
our_crds() {
  log "3. applying our Trainer CRDs over upstream's"
  local kind files=()
  for kind in "${kinds[@]}"; do files+=(-f "config/crd/bases/trainer.kubeflow.org_$kind.yaml"); done
  kubectl apply --server-side --force-conflicts "${files[@]}" >&2
  # shellcheck disable=SC2046 # one CRD name a word
  established $(crd_names)
}

# their_crds: step 3 of to-upstream. Our CRDs' label goes too: hack/trainer.sh keeps a CRD that
# carries it, and an apply by another field manager than ours would leave it.
their_crds() {
  log "3. applying upstream's Trainer CRDs back"
  local dir=${TRAINER_CRDS:-} kind files=()
  [ -n "$dir" ] || dir=$(module_dir github.com/kubeflow/trainer/v2 "$TRAINER_VERSION")/manifests/base/crds
  for kind in "${kinds[@]}"; do files+=(-f "$dir/trainer.kubeflow.org_$kind.yaml"); done
  kubectl apply --server-side --force-conflicts "${files[@]}" >&2
  # shellcheck disable=SC2046 # one CRD name a word
  kubectl label crd $(crd_names) app.kubernetes.io/part-of- >&2
  # shellcheck disable=SC2046
  established $(crd_names)
}

# unmark_trainjobs: this operator's finished label off every TrainJob. Upstream ignores it, but a
# TrainJob upstream starts again (it builds a new JobSet when a finished one's was deleted) would
# stay hidden from this operator's watch after a later to-ato. The next to-ato labels the finished
# ones again on its first pass over them.
unmark_trainjobs() {
  log "2. taking this operator's finished label off the TrainJobs"
  kubectl label trainjobs.trainer.kubeflow.org --all-namespaces --all "$finished_label-" >&2
}

to_ato() {
  stop_trainer
  remove_webhooks
  our_crds
  log "4. applying our admission policy"
  kubectl apply --server-side --force-conflicts -k config/admission >&2
  start_operator
}

to_upstream() {
  stop_operator
  log "2. deleting our Trainer admission policies"
  kubectl delete --ignore-not-found "${policies[@]/#/-f}" >&2
  unmark_trainjobs
  their_crds
  restore_webhooks
  start_trainer
}

mkdir -p "$state"
use_cluster
case ${1:-} in
  to-ato) to_ato ;;
  to-upstream) to_upstream ;;
  local-up)
    run=local
    their_crds
    start_trainer
    "$root/hack/trainer.sh" runtimes
    ;;
  local-down)
    "$root/hack/operator-netns.sh" down
    "$root/hack/trainer.sh" down
    ;;
  *) echo "usage: $0 to-ato|to-upstream|local-up|local-down" >&2; exit 2 ;;
esac
log "done: $1"
