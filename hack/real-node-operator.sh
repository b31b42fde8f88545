#!/usr/bin/env bash
# The operator as users install it, on the real node (issue 38 §2, docs/real-node.md): the image
# assembled here (hack/image-local.sh, reused while nothing it is made of changed), imported into
# the running node's containerd, then `make deploy`'s path (hack/deploy.sh) with the overlay
# config/testing/real-node (the image never pulled, the node's label and taint, the API server
# through the node's relay).
#
#   hack/real-node-operator.sh up     build, import, deploy; wait until the Deployment is rolled out
#   hack/real-node-operator.sh down   undeploy (namespace, RBAC, Deployment; the CRDs stay)
#
# The real node must run (hack/real-node.sh up). No other operator may run against the cluster
# while this one does: both would reconcile the same jobs.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=lib.sh
source "$root/hack/lib.sh"

up() {
  use_cluster
  "$root/hack/real-node.sh" status || { log "the real node does not run (hack/real-node.sh up)"; return 1; }
  local start=$SECONDS
  "$root/hack/image-local.sh"
  "$root/hack/real-node.sh" import-image "$root/.local/image/ansible-training-operator.oci.tar"
  log "image built and imported after $((SECONDS - start)) s"
  # The first start reads every CRD and warms the zygote's templates on a shared machine.
  DEPLOY_TIMEOUT=${DEPLOY_TIMEOUT:-300s} "$root/hack/deploy.sh" deploy config/testing/real-node
  log "the operator's Deployment rolled out on the real node after $((SECONDS - start)) s"
}

down() {
  use_cluster
  "$root/hack/deploy.sh" undeploy
}

case ${1:-} in
  up) up ;;
  down) down ;;
  *) echo "usage: $0 up|down" >&2; exit 2 ;;
esac
