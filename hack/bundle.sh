#!/usr/bin/env bash
# The OLM bundle in bundle/ (git-ignored): manifests/ (CSV, CRDs, Service, ClusterRoles),
# metadata/annotations.yaml, tests/scorecard/ and bundle.Dockerfile, then the strict validation.
#
#   hack/bundle.sh            generate and validate; fails on any validation error or warning
#
# VERSION (default $OPERATOR_VERSION from versions.env) is the CSV version, IMG (default
# ansible-training-operator:$VERSION) the operator image, CHANNELS / DEFAULT_CHANNEL the
# channels (default candidate: the validator's naming convention wants candidate, fast or stable).
# BUNDLE_DIR (default bundle) is where it goes; REPLACES names the CSV this one upgrades
# (spec.replaces), as a later release's bundle does (hack/olm-test.sh builds one to upgrade to).
# Everything comes from config/manifests (CSV base, CRDs, operator, samples as alm-examples,
# scorecard); only the image is set, in a throw-away overlay under .local/.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=lib.sh
source "$root/hack/lib.sh"
VERSION=${VERSION:-$OPERATOR_VERSION}
IMG=${IMG:-ansible-training-operator:$VERSION}
CHANNELS=${CHANNELS:-candidate}
DEFAULT_CHANNEL=${DEFAULT_CHANNEL:-candidate}
REPLACES=${REPLACES:-}
out=${BUNDLE_DIR:-bundle}
package=ansible-training-operator
base=config/manifests/bases/$package.clusterserviceversion.yaml
cd "$root"

# The CSV carries the icon inline; its source is the SVG beside it.
icon=$(base64 -w0 config/manifests/icon.svg)
if ! grep -qF "base64data: $icon" "$base"; then
  log "the icon in $base is not config/manifests/icon.svg; set base64data to: $icon"
  exit 1
fi

mkdir -p "$root/.local"
work=$(mktemp -d "$root/.local/bundle.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/overlay"
cat >"$work/overlay/kustomization.yaml" <<EOF
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - ../../../config/manifests
patches:
  - target: {kind: ClusterServiceVersion}
    patch: |-
      - op: replace
        path: /metadata/annotations/containerImage
        value: "$IMG"
EOF
(cd "$work/overlay" && kustomize edit set image "ansible-training-operator=$IMG")

log "bundle $package v$VERSION ($IMG), channels $CHANNELS"
rm -rf "$out"
# generate bundle reads stdin only from a pipe, and writes bundle.Dockerfile into the current
# directory: it is kept in the bundle's directory.
kustomize build "$work/overlay" | operator-sdk generate bundle -q --overwrite --version "$VERSION" \
  --package "$package" --channels "$CHANNELS" --default-channel "$DEFAULT_CHANNEL" --output-dir "$out"
mv bundle.Dockerfile "$out/bundle.Dockerfile"
# The PaddleJob version kubeflow.org/v1-runtime exists for the operator's watch alone
# (docs/architecture.md "Two PaddleJobs"): generate bundle lists every served version as an owned
# API, which asks for an example of it, and an example would invite users to create it. The CSV
# owns the CRD through kubeflow.org/v1; the CRD itself, with both versions, stays in the bundle.
csv=$(ls "$out"/manifests/*.clusterserviceversion.yaml)
"$root/.venv/bin/python" - "$csv" "$REPLACES" <<'PY'
import sys

import yaml

path, replaces = sys.argv[1:3]
with open(path) as f:
    csv = yaml.safe_load(f)
crds = csv["spec"]["customresourcedefinitions"]
crds["owned"] = [o for o in crds["owned"] if (o["name"], o["version"]) != ("paddlejobs.kubeflow.org", "v1-runtime")]
if replaces:
    csv["spec"]["replaces"] = replaces
with open(path, "w") as f:
    yaml.safe_dump(csv, f, sort_keys=False, width=120)
PY

# The validator exits 0 on warnings; this project wants none, so read its JSON report.
report=$(operator-sdk bundle validate "$out" --select-optional suite=operatorframework \
  --optional-values="k8s-version=${KUBERNETES_VERSION#v}" -o json-alpha1) || {
  echo "$report"; exit 1
}
echo "$report" | python3 -c '
import json, sys
report = json.load(sys.stdin)
# The removed-APIs check cannot tell API versions apart in an RBAC rule (rules have none): the
# rule for horizontalpodautoscalers, which the operator creates as autoscaling/v2 (an elastic
# PyTorchJob), reads to it as the autoscaling/v2beta1 removed in 1.25. Only that one is let by.
def false_positive(o):
    m = o["message"]
    return (
        "Migrate the API(s) for horizontalpodautoscalers: ([\"ClusterServiceVersion.Spec.InstallStrategy.StrategySpec.ClusterPermissions" in m
    )
problems = [o for o in report.get("outputs") or [] if o["type"] != "info" and not false_positive(o)]
for o in report.get("outputs") or []:
    print("%s: %s" % (o["type"], o["message"]), file=sys.stderr)
if not report.get("passed") or problems:
    sys.exit(f"bundle validation: {len(problems)} error(s)/warning(s)")
known = sum(1 for o in report.get("outputs") or [] if false_positive(o))
print("bundle validation passed: no errors, no warnings (suite=operatorframework)"
      + (f"; {known} known false positive(s) above" if known else ""), file=sys.stderr)
'
