#!/usr/bin/env bash
# The file-based catalog (FBC) of the bundle in bundle/ (make bundle), in catalog/ (git-ignored),
# with catalog.Dockerfile beside it: what catalog-build turns into CATALOG_IMG.
#
#   hack/catalog.sh     render, name the bundle image, validate
#
# The bundle entry names BUNDLE_IMG, the image bundle-build makes of the same bundle/ directory:
# `opm render` of the directory instead of the image needs no registry, and gives the same entry
# but for that image reference, which is set here.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=lib.sh
source "$root/hack/lib.sh"
VERSION=${VERSION:-$OPERATOR_VERSION}
BUNDLE_IMG=${BUNDLE_IMG:-ansible-training-operator-bundle:v$VERSION}
DEFAULT_CHANNEL=${DEFAULT_CHANNEL:-candidate}
package=ansible-training-operator
csv=$package.v$VERSION
cd "$root"
[ -f bundle/manifests/$package.clusterserviceversion.yaml ] || { log "no bundle/: run make bundle first"; exit 1; }

rm -rf catalog catalog.Dockerfile
mkdir -p "catalog/$package"
index="catalog/$package/index.yaml"
opm init "$package" --default-channel="$DEFAULT_CHANNEL" --icon=config/manifests/icon.svg \
  --description=README.md --output=yaml >"$index"
opm render ./bundle --output=yaml | sed "s|^image: \"\"$|image: $BUNDLE_IMG|" >>"$index"
grep -qxF "image: $BUNDLE_IMG" "$index" || { log "the rendered bundle has no image to set"; exit 1; }
printf -- '---\nschema: olm.channel\npackage: %s\nname: %s\nentries:\n  - name: %s\n' \
  "$package" "$DEFAULT_CHANNEL" "$csv" >>"$index"
opm validate catalog
# The serving image at the opm version this project pins (versions.env), not :latest.
opm generate dockerfile catalog --base-image "quay.io/operator-framework/opm:$OPM_VERSION" \
  --builder-image "quay.io/operator-framework/opm:$OPM_VERSION"
log "catalog/ for $csv (bundle image $BUNDLE_IMG), catalog.Dockerfile written and valid"
