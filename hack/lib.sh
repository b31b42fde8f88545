#!/usr/bin/env bash
# Shared helpers of hack/*.sh. Source it; it expects $root.
: "${root:?hack/lib.sh expects root, the repository}"
# shellcheck source=../versions.env
source "$root/versions.env"
export PATH="$root/bin:$PATH"

log() { printf '[%s] %s\n' "$(basename "$0" .sh)" "$*" >&2; }

# use_cluster: keep a KUBECONFIG the user set (their kind or real cluster); otherwise start
# (or reuse) the local cluster and point KUBECONFIG at it.
use_cluster() {
  if [ -n "${KUBECONFIG:-}" ]; then
    log "using KUBECONFIG=$KUBECONFIG"
  else
    KUBECONFIG=$("$root/hack/cluster.sh" up)
    export KUBECONFIG
  fi
}

# install_apis: the CRDs, then the admission policy that validates what CRD rules cannot see.
install_apis() {
  kubectl apply --server-side --force-conflicts -k "$root/config/crd" >&2
  kubectl wait --for=condition=Established crd --all --timeout=60s >/dev/null
  if [ -d "$root/config/admission" ]; then
    kubectl apply --server-side --force-conflicts -k "$root/config/admission" >&2
  fi
}
