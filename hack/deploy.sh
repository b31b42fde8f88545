#!/usr/bin/env bash
# The operator as a Deployment in the cluster in KUBECONFIG (the local one when unset).
#
#   hack/deploy.sh render [DIR]   print `kustomize build DIR` (default config/default) with IMG set
#   hack/deploy.sh deploy [DIR]   CRDs, admission policy and the operator (config/default, or an
#                                 overlay of it: config/testing/real-node), then Trainer v2's built-in
#                                 runtimes (config/runtimes), once their CRD is established: one apply
#                                 cannot create a CRD and objects of its kind
#   hack/deploy.sh undeploy       the operator only (config/operator): namespace, RBAC, Deployment.
#                                 The CRDs stay, and with them every job: `make uninstall` removes them.
#
# IMG (default ansible-training-operator:$OPERATOR_VERSION) is the operator image. It is set in a
# throw-away overlay under .local/, so the kustomizations in config/ never change.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=lib.sh
source "$root/hack/lib.sh"
IMG=${IMG:-ansible-training-operator:${VERSION:-$OPERATOR_VERSION}}

# render DIR: kustomize build of config DIR with the manager image replaced by $IMG.
render() {
  local dir=${1:-config/default} overlay
  overlay=$(mktemp -d "$root/.local/overlay.XXXXXX")
  overlays+=("$overlay")
  printf 'apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ../../%s\n' \
    "$dir" >"$overlay/kustomization.yaml"
  # config/manager maps the placeholder image "controller" to ansible-training-operator:latest.
  (cd "$overlay" && kustomize edit set image "ansible-training-operator=$IMG")
  kustomize build "$overlay"
}

deploy() {
  use_cluster
  log "deploying $IMG (${1:-config/default})"
  render "${1:-config/default}" | kubectl apply --server-side --force-conflicts -f - >&2
  kubectl wait --for=condition=Established crd --all --timeout=60s >/dev/null
  install_runtimes
  kubectl -n ansible-training-operator-system rollout status deployment/ansible-training-operator-controller-manager \
    --timeout="${DEPLOY_TIMEOUT:-120s}" >&2
}

undeploy() {
  use_cluster
  render config/operator | kubectl delete --ignore-not-found --wait=true -f - >&2
}

overlays=()
cleanup() { [ ${#overlays[@]} -eq 0 ] || rm -rf "${overlays[@]}"; }
trap cleanup EXIT
mkdir -p "$root/.local"
cd "$root"
case ${1:-} in
  render) render "${2:-config/default}" ;;
  deploy) deploy "${2:-config/default}" ;;
  undeploy) undeploy ;;
  *) echo "usage: $0 render [DIR]|deploy [DIR]|undeploy" >&2; exit 2 ;;
esac
