#!/usr/bin/env bash
# Install the operator through OLM without any registry or image, on the cluster in KUBECONFIG
# (the local one when unset), and check that OLM brings it up. `make olm-test` runs it.
#
#  1. bundle/ is generated and validated (hack/bundle.sh);
#  2. a file-based catalog is rendered from it with opm: `opm render` of a bundle *directory*
#     gives an olm.bundle with an empty image and the manifests embedded as olm.bundle.object;
#  3. OLM's CRDs are applied from the OLM module source in the Go module cache, and OLM's two
#     controllers, `olm` and `catalog`, run here as processes, as does `opm serve`;
#  4. a CatalogSource of sourceType grpc with spec.address points at opm serve, so OLM starts no
#     registry pod; an OperatorGroup and a Subscription follow;
#  5. the CSV must reach Succeeded: OLM resolved the bundle from the catalog, installed our CRDs
#     from the embedded objects (no unpack Job, no bundle image), created the RBAC and the
#     Deployment, whose pod becomes Ready on a KWOK node without pulling the operator image;
#  6. the upgrade: the catalog's channel also holds a later bundle (the next patch version, built
#     from the same checkout, `replaces` the first), the Subscription starts at the first CSV with
#     manual approval (how a production cluster holds an upgrade until it chooses to); jobs of
#     several kinds are created, the upgrade's InstallPlan approved, and the later CSV must take
#     over: Succeeded, the first one gone, our CRDs updated in place (same uid, no version lost),
#     the jobs the same objects (OLM_UPGRADE=false skips it).
#
# OLM_REAL_NODE=true runs the CSV's Deployment for real, on the real node (hack/real-node.sh up
# first; the real-node stage of hack/test.sh does): the image assembled here (hack/image-local.sh)
# is imported into the node's containerd under both bundles' image names, and the Subscription's
# spec.config gives the pod the node's selector, toleration and the API server's address there
# (docs/real-node.md#api-access-and-probes), as a user's Subscription would for their cluster. No
# other operator may run meanwhile: both would reconcile the jobs in the namespace `operators`.
# OLM_GATE=DIR hands the jobs to a test between the steps (tests/node/test_olm_real_node.py): the
# script writes DIR/installed once its jobs are created and waits for DIR/upgrade before it
# approves the upgrade, then writes DIR/upgraded after its checks and waits for DIR/done before it
# cleans up.
#
# olm, catalog and opm bind fixed wildcard ports (olm/catalog :8080, pkg/lib/server/server.go;
# opm ":"+port, cmd/opm/serve/serve.go), which no flag moves to 127.0.0.1. Each runs in a network
# namespace of its own, whose only interface is its own loopback, and reaches the API server
# through a unix-socket relay (hack/netns/). So they open nothing on the host's network, cannot
# clash with the operator's ports, and the CatalogSource address 127.0.0.1:50051 is opm in the
# catalog operator's namespace.
#
# On exit (also on failure or Ctrl-C) every process started here is stopped and everything
# created here is deleted: the OLM objects, the namespaces olm and operators, the OLM CRDs and
# the cluster RBAC OLM made. Our CRDs are deleted only if they did not exist before: other tests
# use them. Logs stay in .local/olm-test/.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=lib.sh
source "$root/hack/lib.sh"
VERSION=${VERSION:-$OPERATOR_VERSION}
export VERSION
package=ansible-training-operator
channel=candidate
csv=$package.v$VERSION
# The later release the upgrade goes to: the next patch version.
next_version=${VERSION%.*}.$((${VERSION##*.} + 1))
next_csv=$package.v$next_version
# Each release's image: IMG (make's, or hack/bundle.sh's default) for the first; the same
# repository at the next version's tag for the later one (an IMG that make exports would
# otherwise give both bundles one image, and the upgrade would not change the pod's).
img=${IMG:-$package:$VERSION}
if [[ ${img##*/} == *:* ]]; then next_img=${img%:*}:$next_version; else next_img=$img:$next_version; fi
upgrade=${OLM_UPGRADE:-true}
real_node=${OLM_REAL_NODE:-false}
gate=${OLM_GATE:-}
mark=ato.dev/olm-test   # label on what this test creates, so a leftover run is recognised
# Only catches a hang: on a busy machine OLM takes minutes (about 1 on a quiet one). The time a test
# holds the jobs at a gate (OLM_GATE) does not count.
timeout=${OLM_TEST_TIMEOUT:-600}
work="$root/.local/olm-test"
cd "$root"

use_cluster
"$root/hack/build-go-tools.sh" opm olm kustomize operator-sdk

# --- preconditions -------------------------------------------------------------------------
api=$(loopback_api) || exit 2
# OLM's fixed ports stay off the host in network namespaces of their own.
private_netns || exit 2
foreign() { # foreign KIND NAME: exists without this test's label
  local v
  v=$(kubectl get "$1" "$2" --ignore-not-found -o jsonpath="{.metadata.labels.${mark//./\\.}}")
  [ -n "$(kubectl get "$1" "$2" --ignore-not-found -o name)" ] && [ "$v" != true ]
}
if foreign crd clusterserviceversions.operators.coreos.com; then
  log "OLM is already installed in this cluster; this test runs its own OLM and would fight it"
  exit 2
fi
for ns in olm operators; do
  if foreign namespace "$ns"; then log "namespace $ns exists and is not this test's"; exit 2; fi
done
if [ "$real_node" = true ] && ! "$root/hack/real-node.sh" status; then
  log "OLM_REAL_NODE=true: the real node does not run (hack/real-node.sh up)"; exit 2
fi
our_crds=(tfjobs.kubeflow.org mxjobs.kubeflow.org pytorchjobs.kubeflow.org xgboostjobs.kubeflow.org jaxjobs.kubeflow.org
  paddlejobs.kubeflow.org mpijobs.kubeflow.org paddlejobs.batch.paddlepaddle.org caffe2jobs.kubeflow.org
  trainjobs.trainer.kubeflow.org trainingruntimes.trainer.kubeflow.org clustertrainingruntimes.trainer.kubeflow.org)

rm -rf "$work"
mkdir -p "$work/catalog/$package"

# --- cleanup ---------------------------------------------------------------------------------
pids=()
stop_processes() {
  local p alive
  for p in "${pids[@]}"; do kill -TERM -- "-$p" 2>/dev/null || kill -TERM "$p" 2>/dev/null || true; done
  for _ in $(seq 50); do
    alive=0
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ $alive = 1 ] || break
    sleep 0.1
  done
  for p in "${pids[@]}"; do kill -KILL -- "-$p" 2>/dev/null || kill -KILL "$p" 2>/dev/null || true; done
  pids=()
}
# remove_olm_objects: everything an OLM install made, by label. OLM marks all it creates
# cluster-wide with olm.managed=true, and no other OLM runs here (checked above), so that label
# selects exactly this test's leftovers. Our CRDs keep their spec: OLM only labelled and
# annotated them when it adopted them.
remove_olm_objects() {
  local - crd obj crds keys
  set +e  # best effort, every step: what one cannot remove must not keep the others
  # With OLM stopped nobody would remove its finalizers (csv-cleanup), and the namespaces and
  # CRDs would hang in deletion.
  for crd in $(kubectl get crd -l "$mark=true" -o jsonpath='{.items[*].metadata.name}'); do
    for obj in $(kubectl get "$crd" -A -o go-template='{{range .items}}{{if .metadata.finalizers}}{{.metadata.namespace}}/{{.metadata.name}} {{end}}{{end}}'); do
      kubectl patch "$crd" -n "${obj%/*}" "${obj#*/}" --type=merge -p '{"metadata":{"finalizers":null}}' >/dev/null
    done
  done
  kubectl delete namespace operators olm --ignore-not-found --timeout=90s >/dev/null 2>&1
  kubectl delete clusterroles,clusterrolebindings -l olm.managed=true --ignore-not-found >/dev/null 2>&1
  # The OperatorGroup's aggregated roles get their label after creation; one caught in between
  # is found by its name, which OLM derives from the OperatorGroup's.
  kubectl get clusterroles -o name | grep "^clusterrole.rbac.authorization.k8s.io/olm\.og\.$package\." |
    xargs -r kubectl delete --ignore-not-found >/dev/null 2>&1
  kubectl delete crd -l "$mark=true" --ignore-not-found --timeout=90s >/dev/null 2>&1
  # One call for each: kubectl skips a key an object does not have.
  mapfile -t crds < <(kubectl get crd "${our_crds[@]}" --ignore-not-found -o name)
  [ ${#crds[@]} -gt 0 ] || return 0
  mapfile -t keys < <(crd_keys labels '^(olm\.managed|operators\.coreos\.com/.*)$')
  [ ${#keys[@]} = 0 ] || kubectl label "${crds[@]}" "${keys[@]/%/-}" >/dev/null
  mapfile -t keys < <(crd_keys annotations '^operatorframework\.io/installed-alongside-')
  [ ${#keys[@]} = 0 ] || kubectl annotate "${crds[@]}" "${keys[@]/%/-}" >/dev/null
}
# crd_keys labels|annotations PATTERN: the keys of that map on our CRDs that match PATTERN.
crd_keys() {
  kubectl get crd "${our_crds[@]}" --ignore-not-found -o go-template="{{range .items}}{{range \$k, \$v := .metadata.$1}}{{\$k}}
{{end}}{{end}}" | grep -E "$2" | sort -u || true
}
cleanup() {
  local rc=$?
  # A second Ctrl-C must not cut the clean-up short and leave OLM running against the cluster.
  trap '' INT TERM
  trap - EXIT
  set +e
  local began=$SECONDS
  log "cleaning up"
  if [ ${#pids[@]} -gt 0 ]; then
    # While OLM still runs, so that it undoes its install: first what would install the CSV
    # again (Subscription, InstallPlan), then the CSV, whose finalizer OLM runs.
    kubectl -n operators delete subscriptions,installplans --all --ignore-not-found --timeout=30s >/dev/null 2>&1
    kubectl -n operators delete csv --all --ignore-not-found --timeout=60s >/dev/null 2>&1
    kubectl -n operators delete operatorgroups --all --ignore-not-found --timeout=30s >/dev/null 2>&1
    kubectl delete namespace operators olm --ignore-not-found --timeout=60s >/dev/null 2>&1
  fi
  stop_processes
  remove_olm_objects
  if [ "$crds_before" = 0 ]; then
    kubectl delete crd "${our_crds[@]}" --ignore-not-found --timeout=90s >/dev/null 2>&1
  fi
  rm -f "$socket"
  log "cleaned up after $((SECONDS - began)) s"
  [ $rc = 0 ] || log "failed; logs in ${work#"$root"/}/"
  exit $rc
}
if [ -n "$(kubectl get crd -l "$mark=true" -o name)$(kubectl get namespace -l "$mark=true" -o name)" ]; then
  log "removing what an interrupted run left behind"
  remove_olm_objects
fi
crds_before=$(kubectl get crd "${our_crds[@]}" --ignore-not-found -o name | wc -l)
socket="$work/api.sock"
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- bundle and catalog ----------------------------------------------------------------------
start=$(date +%s)
elapsed() { echo "$(($(date +%s) - start))s"; }
IMG=$img "$root/hack/bundle.sh"
index="$work/catalog/$package/index.yaml"
opm init "$package" --default-channel="$channel" --icon=config/manifests/icon.svg \
  --description=README.md --output=yaml >"$index"
opm render ./bundle --output=yaml >>"$index"
printf -- '---\nschema: olm.channel\npackage: %s\nname: %s\nentries:\n  - name: %s\n' \
  "$package" "$channel" "$csv" >>"$index"
if [ "$upgrade" = true ]; then
  IMG=$next_img VERSION=$next_version REPLACES=$csv BUNDLE_DIR="$work/bundle-next" "$root/hack/bundle.sh"
  printf -- '  - name: %s\n    replaces: %s\n' "$next_csv" "$csv" >>"$index"
  opm render "$work/bundle-next" --output=yaml >>"$index"
fi
opm validate "$work/catalog"
grep -q '^image: ""$' "$index" || { log "the rendered bundle names an image: OLM would unpack it"; exit 1; }
log "catalog rendered and valid ($(elapsed))"
# subscription_config: the Subscription's spec.config for the real node (none on KWOK's nodes).
subscription_config() {
  [ "$real_node" = true ] || return 0
  printf '%s\n' "  config:" "    nodeSelector: {ato.dev/real-node: \"true\"}" \
    "    tolerations: [{key: ato.dev/real-node, operator: Exists, effect: NoSchedule}]" \
    "    env:" "      - {name: KUBERNETES_SERVICE_HOST, value: kubernetes.default.svc}" \
    "      - {name: KUBERNETES_SERVICE_PORT, value: \"443\"}"
}
if [ "$real_node" = true ]; then
  # One image under both releases' names: the upgrade changes the pod's image, as a release
  # does, and neither is ever pulled.
  "$root/hack/image-local.sh"
  names=()
  for i in "$img" "$next_img"; do names+=("$(python3 "$root/hack/image-local/layout.py" reference "$i")"); done
  "$root/hack/real-node.sh" import-image "$root/.local/image/$package.oci.tar" "${names[@]}"
  log "the operator's image imported into the real node's containerd as ${names[*]} ($(elapsed))"
fi

# --- OLM -----------------------------------------------------------------------------------
olm_dir=$(go mod download -json "github.com/operator-framework/operator-lifecycle-manager@$OLM_VERSION" |
  sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
[ -d "$olm_dir/deploy/chart/crds" ] || { log "no CRDs in $olm_dir/deploy/chart/crds"; exit 1; }
# Server-side: the CSV CRD is too large for the last-applied annotation of a client-side apply.
mapfile -t olm_crds < <(kubectl apply --server-side --force-conflicts -o name -f "$olm_dir/deploy/chart/crds")
kubectl label --overwrite "${olm_crds[@]}" "$mark=true" >/dev/null
kubectl wait --for=condition=Established crd -l "$mark=true" --timeout=60s >/dev/null
for ns in olm operators; do
  kubectl create namespace "$ns" --dry-run=client -o yaml | kubectl label -f - --local "$mark=true" -o yaml |
    kubectl apply -f - >/dev/null
done
kubectl apply -f - >/dev/null <<EOF
apiVersion: operators.coreos.com/v1
kind: OLMConfig
metadata:
  name: cluster
EOF
log "OLM $OLM_VERSION CRDs installed from the module source ($(elapsed))"

# Its own session: a Ctrl-C of the test must leave it to the clean-up, which OLM still needs.
setsid python3 "$root/hack/netns/relay.py" unix-to-tcp "$socket" "$api" 2>"$work/relay.log" &
pids+=($!)
for _ in $(seq 50); do [ -S "$socket" ] && break; sleep 0.1; done
in_netns=(setsid "${netns[@]}" -- "$root/hack/netns/in-netns.sh" "$api" "$socket")
"${in_netns[@]}" olm --namespace olm --writeStatusName "" --writePackageServerStatusName "" \
  >"$work/olm.log" 2>&1 &
pids+=($!)
# opm serves from a cache built (and digested) beforehand, so it starts at once and checks it.
opm serve "$work/catalog" --cache-dir "$work/opm-cache" --cache-only >"$work/opm.log" 2>&1
# opm and catalog share a namespace (catalog dials opm on its loopback); if either exits, so
# does the group's leader, which alive() notices.
# shellcheck disable=SC2016 # expanded by that inner bash
"${in_netns[@]}" bash -c 'opm serve "$1" --port 50051 --pprof-addr "" --cache-dir "$2" >>"$3" 2>&1 &
  "${@:4}" & wait -n; exit 1' _ "$work/catalog" "$work/opm-cache" "$work/opm.log" \
  catalog --namespace olm --writeStatusName "" >"$work/catalog.log" 2>&1 &
pids+=($!)
log "olm, catalog and opm serve started in their own network namespaces"

# --- install through OLM ------------------------------------------------------------------------
kubectl apply -f - >/dev/null <<EOF
apiVersion: operators.coreos.com/v1alpha1
kind: CatalogSource
metadata:
  name: ato-local
  namespace: olm
spec:
  sourceType: grpc
  address: 127.0.0.1:50051
  displayName: ansible-training-operator (local file-based catalog)
  publisher: ansible-training-operator
---
apiVersion: operators.coreos.com/v1
kind: OperatorGroup
metadata:
  name: ansible-training-operator
  namespace: operators
spec:
  targetNamespaces: [operators]
---
apiVersion: operators.coreos.com/v1alpha1
kind: Subscription
metadata:
  name: $package
  namespace: operators
spec:
  name: $package
  channel: $channel
  source: ato-local
  sourceNamespace: olm
  startingCSV: $csv
  installPlanApproval: $([ "$upgrade" = true ] && echo Manual || echo Automatic)
$(subscription_config)
EOF

alive() {
  local p
  for p in "${pids[@]}"; do
    kill -0 "$p" 2>/dev/null || { log "a process died (pid $p); see ${work#"$root"/}/*.log"; return 1; }
  done
}
wait_for() { # wait_for WHAT COMMAND...: until COMMAND succeeds, within the time left
  local what=$1; shift
  until "$@" >/dev/null 2>&1; do
    alive || return 1
    if [ $(($(date +%s) - start)) -ge "$timeout" ]; then log "timed out waiting for $what"; return 1; fi
    sleep 1
  done
  log "$what ($(elapsed))"
}
catalog_ready() {
  [ "$(kubectl -n olm get catalogsource ato-local -o jsonpath='{.status.connectionState.lastObservedState}')" = READY ]
}
report() {
  kubectl -n olm get catalogsource -o wide || true
  kubectl -n operators get subscription,installplan,csv,deployment,pods -o wide || true
  kubectl -n operators get subscription "$package" -o jsonpath='{range .status.conditions[*]}{.type}={.status} {.reason}: {.message}{"\n"}{end}' || true
  kubectl -n operators get csv "$csv" -o jsonpath='{.status.phase} {.status.reason}: {.status.message}{"\n"}' || true
  tail -n 15 "$work"/olm.log "$work"/catalog.log "$work"/opm.log || true
}
# plans_for CSV: each InstallPlan that installs CSV, a line "NAME APPROVED PHASE". OLM creates a plan,
# then writes its status (PHASE is empty until then) and, for a Manual Subscription, waits for
# approval. Approving between those two writes makes OLM's status write conflict: that plan stays
# without a status and OLM makes a second one, so only a plan RequiresApproval is approved, and
# every such plan for the CSV is, until the CSV has succeeded.
plans_for() {
  kubectl -n operators get installplan -o jsonpath='{range .items[*]}{.metadata.name} {.spec.approved} {.spec.clusterServiceVersionNames} {.status.phase}{"\n"}{end}' 2>/dev/null |
    awk -v csv="\"$1\"" 'index($3, csv) {print $1, $2, $4}'
}
plan_in_phase() { plans_for "$1" | awk -v phase="$2" '$3 == phase && !found {print $1; found = 1}'; }
has_plan_for() { [ -n "$(plans_for "$1")" ]; }
plan_complete() { [ -n "$(plan_in_phase "$1" Complete)" ]; }
approve_waiting() { # approve_waiting CSV: approve each plan for CSV that waits; fails if none did
  local plan approved=1
  for plan in $(plans_for "$1" | awk '$2 == "false" && $3 == "RequiresApproval" {print $1}'); do
    kubectl -n operators patch installplan "$plan" --type=merge -p '{"spec":{"approved":true}}' >/dev/null &&
      approved=0
  done
  return $approved
}
approve() { # approve CSV: once OLM has made the InstallPlan that installs CSV
  if [ "$upgrade" = true ]; then
    wait_for "InstallPlan for $1 approved" approve_waiting "$1"
  else
    wait_for "InstallPlan for $1" has_plan_for "$1"
  fi
}
succeeded() { # succeeded CSV: the CSV's phase is Succeeded (approving a plan OLM made again for it)
  if [ "$upgrade" = true ]; then approve_waiting "$1" || true; fi
  [ "$(kubectl -n operators get csv "$1" -o jsonpath='{.status.phase}' 2>/dev/null)" = Succeeded ]
}
wait_for "CatalogSource READY (gRPC to opm serve at 127.0.0.1:50051)" catalog_ready || { report; exit 1; }
approve "$csv" || { report; exit 1; }
wait_for "CSV $csv Succeeded" succeeded "$csv" || { report; exit 1; }
wait_for "InstallPlan Complete" plan_complete "$csv" || { report; exit 1; }

# --- what OLM installed --------------------------------------------------------------------------
fail() { log "$*"; report; exit 1; }
for crd in "${our_crds[@]}"; do
  kubectl get crd "$crd" >/dev/null || fail "OLM did not install CRD $crd"
  [ -n "$(kubectl get crd "$crd" -o jsonpath='{.metadata.labels.olm\.managed}')" ] || fail "OLM did not take CRD $crd in"
done
# The Kubeflow SDK's version ConfigMap (config/trainer-public), in the operator's namespace.
kubectl -n operators get configmap kubeflow-trainer-public >/dev/null || fail "OLM did not install kubeflow-trainer-public"
if [ "$crds_before" = 0 ]; then how="created by OLM"; else how="existed before; OLM adopted them"; fi
log "our ${#our_crds[@]} CRDs are there: $how"
deploy=$package-controller-manager
kubectl -n operators wait --for=condition=Available "deployment/$deploy" --timeout=30s >/dev/null ||
  fail "deployment $deploy is not Available"
targets=$(kubectl -n operators get deployment "$deploy" \
  -o jsonpath='{.spec.template.metadata.annotations.olm\.targetNamespaces}')
[ "$targets" = operators ] || fail "olm.targetNamespaces is '$targets', not operators"
image=$(kubectl -n operators get deployment "$deploy" -o jsonpath='{.spec.template.spec.containers[0].image}')
jobs=$(kubectl get jobs -A -o name | grep -c -i unpack || true)
[ "$jobs" = 0 ] || fail "OLM created bundle unpack Jobs; the embedded bundle should need none"
kubectl -n operators get installplan,csv -o yaml >"$work/installed.yaml"
plan=$(plan_in_phase "$csv" Complete)
lookups=$(kubectl -n operators get installplan "$plan" -o jsonpath='{.status.bundleLookups}')
[ -z "$lookups" ] || fail "InstallPlan $plan looked the bundle up in an image: $lookups"
phase=$(kubectl -n operators get installplan "$plan" -o jsonpath='{.status.phase}')
steps=$(kubectl -n operators get installplan "$plan" -o jsonpath='{range .status.plan[*]}{.resource.kind} {end}')
log "InstallPlan $plan $phase, from the catalog's embedded objects, no image: $steps"
node=$(kubectl -n operators get pods -l control-plane=controller-manager -o jsonpath='{.items[*].spec.nodeName}')
if [ "$real_node" = true ] && [ "$node" != "${REAL_NODE_IP:-127.0.2.1}" ]; then
  fail "the operator's pod is on '$node', not on the real node"
fi
log "deployment $deploy Available (image $image, watching: $targets, pod on node $node)"
log "OLM install test passed in $(elapsed)"
[ "$upgrade" = true ] || exit 0

# --- the upgrade, with jobs in flight ------------------------------------------------------------
# uids: our CRDs (uid and stored versions) and the jobs (uid), a line each.
uids() {
  kubectl get crd "${our_crds[@]}" \
    -o go-template='{{range .items}}crd/{{.metadata.name}}={{.metadata.uid}} {{.status.storedVersions}}{{"\n"}}{{end}}'
  kubectl -n operators get tfjobs,pytorchjobs,xgboostjobs,trainjobs \
    -o go-template='{{range .items}}{{.kind}}/{{.metadata.name}}={{.metadata.uid}}{{"\n"}}{{end}}'
}
kubectl -n operators apply -f config/samples/tfjob_dist.yaml -f config/samples/pytorchjob_simple.yaml \
  -f config/samples/xgboostjob_iris.yaml -f config/samples/trainer/trainjob_torch.yaml >/dev/null
before=$(uids | sort)
# pass_gate STEP NEXT: tell the test STEP is reached, and wait until it says NEXT (OLM_GATE); the
# wait is the test's time, not OLM's, so start moves on by it.
pass_gate() {
  [ -n "$gate" ] || return 0
  local from
  from=$(date +%s)
  touch "$gate/$1"
  log "gate: $1; waiting for $gate/$2"
  until [ -e "$gate/$2" ]; do alive || return 1; sleep 1; done
  start=$((start + $(date +%s) - from))
}
pass_gate installed upgrade || fail "a process died while the test had the jobs"
approve "$next_csv" || fail "no InstallPlan for the upgrade to $next_csv"
log "upgrade to $next_csv approved, $(echo "$before" | grep -vc '^crd/') jobs in flight"
first_gone() { ! kubectl -n operators get csv "$csv" >/dev/null 2>&1; }
wait_for "CSV $next_csv Succeeded" succeeded "$next_csv" || fail "the upgrade did not succeed"
wait_for "CSV $csv replaced and removed" first_gone || fail "$csv is still there"
installed=$(kubectl -n operators get subscription "$package" -o jsonpath='{.status.installedCSV}')
[ "$installed" = "$next_csv" ] || fail "the Subscription's installed CSV is $installed"
kubectl -n operators wait --for=condition=Available "deployment/$deploy" --timeout=60s >/dev/null ||
  fail "deployment $deploy is not Available after the upgrade"
owner=$(kubectl -n operators get deployment "$deploy" -o jsonpath='{.metadata.labels.olm\.owner}')
[ "$owner" = "$next_csv" ] || fail "deployment $deploy belongs to $owner, not $next_csv"
image=$(kubectl -n operators get deployment "$deploy" -o jsonpath='{.spec.template.spec.containers[0].image}')
[ "$image" = "$next_img" ] || fail "deployment $deploy runs $image after the upgrade, not $next_img"
after=$(uids | sort)
[ "$before" = "$after" ] || fail "CRDs or jobs replaced by the upgrade: $(diff <(echo "$before") <(echo "$after"))"
log "upgraded to $next_csv: CRDs updated in place, $(echo "$after" | grep -vc '^crd/') jobs kept ($(elapsed))"
pass_gate upgraded "done" || fail "a process died while the test had the jobs"
