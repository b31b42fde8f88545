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

# install_apis: the CRDs, then the admission policy that validates what CRD rules cannot see, then
# Kubeflow Trainer's built-in ClusterTrainingRuntimes (which need their CRD established) and the
# ConfigMap kubeflow-system/kubeflow-trainer-public the Kubeflow SDK reads Trainer's version from.
install_apis() {
  kubectl apply --server-side --force-conflicts -k "$root/config/crd" >&2
  kubectl wait --for=condition=Established crd --all --timeout=60s >/dev/null
  if [ -d "$root/config/admission" ]; then
    kubectl apply --server-side --force-conflicts -k "$root/config/admission" >&2
  fi
  install_runtimes
  kubectl apply --server-side --force-conflicts -k "$root/config/trainer-public" >&2
}

# install_runtimes: Trainer v2's built-in runtimes (config/runtimes); the CRDs must be established.
install_runtimes() {
  kubectl apply --server-side --force-conflicts -k "$root/config/runtimes" >&2
}

# operator_identity NAMESPACE KUBECONFIG_OUT: a kubeconfig for the operator's own identity on
# the cluster in KUBECONFIG: ServiceAccount "operator" in NAMESPACE, bound cluster-wide to
# exactly the rules of config/rbac/role.yaml (the deployment's ClusterRole, under a name of its
# own so make deploy/undeploy never touch it), with a token from the TokenRequest API. The e2e
# operator runs as it (OPERATOR_KUBECONFIG), so a missing rule fails a test, not a user's
# install. The binding is cluster-wide in every WATCH_NAMESPACE mode, as the deployment's and
# OLM's (the CSV's clusterPermissions) are.
operator_identity() {
  local ns=$1 out=$2 role="$1-manager-role" server
  kubectl create namespace "$ns" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
  kubectl -n "$ns" create serviceaccount operator --dry-run=client -o yaml | kubectl apply -f - >/dev/null
  sed "s/^  name: manager-role$/  name: $role/" "$root/config/rbac/role.yaml" | kubectl apply -f - >/dev/null
  kubectl create clusterrolebinding "$role" --clusterrole="$role" --serviceaccount="$ns:operator" \
    --dry-run=client -o yaml | kubectl apply -f - >/dev/null
  server=$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}')
  kubectl config view --minify --raw -o jsonpath='{.clusters[0].cluster.certificate-authority-data}' \
    | base64 -d >"$out.ca" 2>/dev/null || true
  [ -s "$out.ca" ] || cp "$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.certificate-authority}')" "$out.ca"
  rm -f "$out"
  kubectl config --kubeconfig="$out" set-cluster operator --server="$server" \
    --certificate-authority="$out.ca" --embed-certs >/dev/null
  kubectl config --kubeconfig="$out" set-credentials operator \
    --token="$(kubectl -n "$ns" create token operator --duration=6h)" >/dev/null
  kubectl config --kubeconfig="$out" set-context operator --cluster=operator --user=operator \
    --namespace="$ns" >/dev/null
  kubectl config --kubeconfig="$out" use-context operator >/dev/null
  rm -f "$out.ca"
}


# scale_to_zero NAMESPACE DEPLOYMENT TIMEOUT_S: no replica left and every pod of it gone (a
# controller still shutting down may still write), as the swap procedures stop a controller.
# Prints the replicas it had, for scale_back.
scale_to_zero() {
  local ns=$1 name=$2 timeout=$3 had selector
  had=$(kubectl -n "$ns" get deployment "$name" -o jsonpath='{.spec.replicas}')
  selector=$(kubectl -n "$ns" get deployment "$name" -o json |
    jq -r '.spec.selector.matchLabels | to_entries | map("\(.key)=\(.value)") | join(",")')
  kubectl -n "$ns" scale deployment "$name" --replicas=0 >&2
  kubectl -n "$ns" wait --for=delete pod -l "$selector" --timeout="${timeout}s" >&2
  echo "$had"
}

# scale_back NAMESPACE DEPLOYMENT REPLICAS TIMEOUT_S: the replicas scale_to_zero printed (1 if
# none), rolled out.
scale_back() {
  local ns=$1 name=$2 replicas=${3:-1} timeout=$4
  kubectl -n "$ns" scale deployment "$name" --replicas="$replicas" >&2
  kubectl -n "$ns" rollout status deployment "$name" --timeout="${timeout}s" >&2
}

# loopback_api: HOST:PORT of the API server in KUBECONFIG. A command in a network namespace of its
# own reaches it through hack/netns/relay.py, which only a loopback API server allows.
loopback_api() {
  local server api
  server=$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}')
  api=${server#https://}
  api=${api%%/*}
  case ${api%:*} in
    127.* | localhost) ;;
    *) log "the API server is $server: only a loopback one (local cluster, kind) is relayed into a network namespace"; return 2 ;;
  esac
  [ "${api%:*}" != localhost ] || api="127.0.0.1:${api##*:}"
  echo "$api"
}

# private_netns: set the array netns to the command prefix that runs a command in a network
# namespace of its own (as root, or in a user namespace otherwise); fails if neither works here.
private_netns() {
  if [ "$(id -u)" = 0 ]; then netns=(unshare --net); else netns=(unshare --map-root-user --net); fi
  "${netns[@]}" true 2>/dev/null || { log "cannot create a network namespace (${netns[*]})"; return 2; }
}
