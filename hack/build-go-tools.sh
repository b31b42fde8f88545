#!/usr/bin/env bash
# Build the project's Go tools from the Go module proxy at the versions pinned in
# versions.env, cache them outside the work tree and link them into bin/.
#
#   hack/build-go-tools.sh [tool ...]     (default: all)
#
# Tools: kube (kube-apiserver, kube-controller-manager, kube-scheduler, kubectl),
# etcd, kwok (kwok, kwokctl), ansible-operator, operator-sdk, kustomize.
# On demand only (not in the default list; hack/olm-test.sh builds them): opm, olm (olm, catalog).
# On demand only (hack/bench/training-operator.sh builds it): training-operator (Kubeflow's
# upstream operator, the benchmark's baseline).
# On demand only (hack/gang-schedulers.sh builds them): volcano (vc-scheduler), scheduler-plugins
# (scheduler-plugins-scheduler, scheduler-plugins-controller).
# On demand only (hack/kueue.sh builds it): kueue (Kueue's manager, sigs.k8s.io/kueue ./cmd/kueue).
# On demand only (hack/real-node.sh builds them): kubelet, pause, coredns (the real node).
#
# Builds are keyed by version under $ATO_CACHE (default ~/.cache/ansible-training-operator),
# so a second run only re-links. Nothing here downloads a release binary.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=../versions.env
source "$root/versions.env"
cache=${ATO_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ansible-training-operator}
bindir="$root/bin"
mkdir -p "$cache/tools" "$cache/src" "$bindir"
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-buildvcs=false
log() { printf '[build-go-tools] %s\n' "$*" >&2; }

# link NAME DIR: bin/NAME -> DIR/NAME
link() { ln -sfn "$2/$1" "$bindir/$1"; }

# have DIR NAME...: true when every named binary is already built in DIR
have() { local d=$1; shift; for b in "$@"; do [ -x "$d/$b" ] || return 1; done; }

# A wrapper module is needed when the module we build carries replace directives
# (k8s.io/kubernetes, etcd server): `go install pkg@version` refuses those.
wrapper() { # wrapper DIR MODULE_LINE...
  local d=$1; shift
  rm -rf "$d"; mkdir -p "$d"
  printf 'module ato.invalid/toolwrapper\n\ngo 1.26.0\n' >"$d/go.mod"
  printf '%s\n' "$@" >>"$d/go.mod"
}

# kube_wrapper DIR BINARY...: a wrapper module building k8s.io/kubernetes/cmd/BINARY at
# KUBERNETES_VERSION, its staging modules (replaced by ./staging in upstream's go.mod) pinned to
# their published v0.X.Y.
kube_wrapper() {
  local src=$1 v=$KUBERNETES_VERSION b; shift
  go mod download -json "k8s.io/kubernetes@$v" >/dev/null
  local gomod; gomod=$(go mod download -json "k8s.io/kubernetes@$v" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  local staging; staging=$(sed -n 's|^[[:space:]]*k8s.io/\([^ ]*\) => ./staging/src/k8s.io/.*|\1|p' "$gomod")
  local lines=("godebug default=go1.26" "replace (")
  for m in $staging; do lines+=("	k8s.io/$m => k8s.io/$m v0.${v#v1.}"); done
  lines+=(")")
  wrapper "$src" "${lines[@]}"
  (cd "$src" && for b in "$@"; do go get -tool "k8s.io/kubernetes/cmd/$b@$v"; done)
}

# kube_ldflags: the version stamps upstream's build sets (`kubectl version`, /version).
kube_ldflags() {
  local v=$KUBERNETES_VERSION minor=${KUBERNETES_VERSION#v1.} p date ld="-s -w"
  minor=${minor%%.*}
  date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld+=" -X $p.gitVersion=$v -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean -X $p.buildDate=$date"
  done
  echo "$ld"
}

build_kube() {
  local v=$KUBERNETES_VERSION out="$cache/tools/kubernetes-$KUBERNETES_VERSION"
  local bins=(kube-apiserver kube-controller-manager kube-scheduler kubectl)
  if ! have "$out" "${bins[@]}"; then
    log "building Kubernetes $v (kube-apiserver, kube-controller-manager, kube-scheduler, kubectl)"
    local src="$cache/src/kubernetes-$v"
    kube_wrapper "$src" "${bins[@]}"
    mkdir -p "$out.tmp"
    (cd "$src" && go build -trimpath -ldflags "$(kube_ldflags)" -o "$out.tmp/" \
      "${bins[@]/#/k8s.io/kubernetes/cmd/}")
    rm -rf "$out"; mv "$out.tmp" "$out"
  fi
  for b in "${bins[@]}"; do link "$b" "$out"; done
}

build_etcd() {
  local v=$ETCD_VERSION out="$cache/tools/etcd-$ETCD_VERSION"
  if ! have "$out" etcd; then
    log "building etcd $v"
    local src="$cache/src/etcd-$v"
    wrapper "$src"
    (cd "$src" && go get -tool "go.etcd.io/etcd/server/v3@$v" && mkdir -p "$out.tmp" &&
      go build -trimpath -ldflags "-s -w" -o "$out.tmp/etcd" go.etcd.io/etcd/server/v3)
    rm -rf "$out"; mv "$out.tmp" "$out"
  fi
  link etcd "$out"
}

# go_install NAME VERSION LDFLAGS TAGS PKG...: build packages of one module at one version.
# Not `go install pkg@version`: that asks the proxy for the module's version list (to report
# deprecations), which the proxy here refuses for some modules. A wrapper module requiring the
# exact version builds the same packages with the same dependency versions.
go_install() {
  local name=$1 v=$2 ld=$3 tags=$4; shift 4
  local out="$cache/tools/$name-$v" src="$cache/src/$name-$v"
  local bins=() p b
  for p in "$@"; do
    b=${p##*/}
    # go build names a binary after the element before a major-version suffix (.../kustomize/v5).
    [[ $b =~ ^v[0-9]+$ ]] && { b=${p%/*}; b=${b##*/}; }
    bins+=("$b")
  done
  if ! have "$out" "${bins[@]}"; then
    log "building $name $v"
    wrapper "$src"
    (cd "$src" && for p in "$@"; do go get -tool "$p@$v"; done)
    mkdir -p "$out.tmp"
    (cd "$src" && go build -trimpath ${tags:+-tags "$tags"} -ldflags "-s -w $ld" -o "$out.tmp/" "$@")
    rm -rf "$out"; mv "$out.tmp" "$out"
  fi
  for b in "${bins[@]}"; do link "$b" "$out"; done
}

# client_go_of MODULE VERSION: the Kubernetes version a tool is built against (its client-go),
# which the tool reports as its "kubernetes version", as its upstream Makefile does.
client_go_of() {
  local gomod; gomod=$(go mod download -json "$1@$2" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  sed -n 's/^[[:space:]]*k8s.io\/client-go v0\.\([0-9.]*\).*/v1.\1/p' "$gomod" | head -1
}

build_kwok() {
  local ld="-X sigs.k8s.io/kwok/pkg/consts.Version=$KWOK_VERSION -X sigs.k8s.io/kwok/pkg/consts.KubeVersion=$KUBERNETES_VERSION"
  go_install kwok "$KWOK_VERSION" "$ld" "" sigs.k8s.io/kwok/cmd/kwok sigs.k8s.io/kwok/cmd/kwokctl
}

build_ansible_operator() {
  local r=github.com/operator-framework/ansible-operator-plugins v=$ANSIBLE_OPERATOR_VERSION
  local client_go ld
  client_go=$(client_go_of "$r" "$v")
  ld="-X $r/internal/version.Version=$v -X $r/internal/version.GitVersion=$v -X $r/internal/version.ImageVersion=$v -X $r/internal/version.KubernetesVersion=$client_go"
  go_install ansible-operator "$v" "$ld" "" "$r/cmd/ansible-operator"
}

build_operator_sdk() {
  local r=github.com/operator-framework/operator-sdk v=$OPERATOR_SDK_VERSION
  local client_go ld
  client_go=$(client_go_of "$r" "$v")
  ld="-X $r/internal/version.Version=$v -X $r/internal/version.GitVersion=$v -X $r/internal/version.ImageVersion=$v -X $r/internal/version.KubernetesVersion=$client_go"
  go_install operator-sdk "$v" "$ld" containers_image_openpgp "$r/cmd/operator-sdk"
}

build_kustomize() {
  local ld="-X sigs.k8s.io/kustomize/api/provenance.version=kustomize/$KUSTOMIZE_VERSION"
  go_install kustomize "$KUSTOMIZE_VERSION" "$ld" "" sigs.k8s.io/kustomize/kustomize/v5
}

build_opm() {
  local r=github.com/operator-framework/operator-registry v=$OPM_VERSION
  local ld
  ld="-X $r/cmd/opm/version.opmVersion=$v -X $r/cmd/opm/version.buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  # containers_image_openpgp: the image signature code without gpgme (a cgo library), as upstream.
  go_install opm "$v" "$ld" containers_image_openpgp "$r/cmd/opm"
}

# OLM's two controllers, run as local processes by hack/olm-test.sh. json1 is upstream's tag; with
# cgo off it only matters to the sqlite catalogs, which a file-based catalog does not use.
build_olm() {
  local r=github.com/operator-framework/operator-lifecycle-manager v=$OLM_VERSION
  local ld="-X $r/pkg/version.OLMVersion=$v"
  go_install olm "$v" "$ld" json1 "$r/cmd/olm" "$r/cmd/catalog"
}

# Kubeflow's training-operator, run out of cluster by hack/bench/training-operator.sh. Its main
# package is cmd/training-operator.v1, which `go build` would name training-operator.v1 (upstream's
# image calls it manager); here it is training-operator. No ldflags: upstream sets none. The
# wrapper takes the GODEBUG defaults of upstream's own go.mod (its go line), not the wrapper's.
build_training_operator() {
  local r=github.com/kubeflow/training-operator v=$TRAINING_OPERATOR_VERSION
  local out="$cache/tools/training-operator-$v" src="$cache/src/training-operator-$v"
  if ! have "$out" training-operator; then
    log "building training-operator $v"
    local gomod go_line
    gomod=$(go mod download -json "$r@$v" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
    go_line=$(sed -n 's/^go \([0-9]*\.[0-9]*\).*/\1/p' "$gomod")
    wrapper "$src" "godebug default=go$go_line"
    (cd "$src" && go get -tool "$r/cmd/training-operator.v1@$v")
    mkdir -p "$out.tmp"
    (cd "$src" && go build -trimpath -ldflags "-s -w" -o "$out.tmp/training-operator" \
      "$r/cmd/training-operator.v1")
    rm -rf "$out"; mv "$out.tmp" "$out"
  fi
  link training-operator "$out"
}

# module_source_build NAME MODULE VERSION LDFLAGS BIN=PKG...: build packages inside a copy of the
# module's own source, with its own go.mod and go.sum. For modules whose go.mod pins its
# dependencies by replace directives (Volcano, scheduler-plugins): a wrapper module would ignore
# them and resolve other (newer, often incompatible) Kubernetes libraries.
module_source_build() {
  local name=$1 mod=$2 v=$3 ld=$4; shift 4
  local out="$cache/tools/$name-$v" src="$cache/src/$name-$v" bins=() pair
  for pair in "$@"; do bins+=("${pair%%=*}"); done
  if ! have "$out" "${bins[@]}"; then
    log "building $name $v (${bins[*]})"
    local dir; dir=$(go mod download -json "$mod@$v" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
    rm -rf "$src"; cp -r "$dir" "$src"; chmod -R u+w "$src"
    mkdir -p "$out.tmp"
    for pair in "$@"; do
      (cd "$src" && go build -trimpath -ldflags "-s -w $ld" -o "$out.tmp/${pair%%=*}" "${pair#*=}")
    done
    rm -rf "$out"; mv "$out.tmp" "$out"
  fi
  for pair in "$@"; do link "${pair%%=*}" "$out"; done
}

# Volcano's scheduler (vc-scheduler), run on the host by hack/gang-schedulers.sh. ldflags as
# upstream's Makefile.def (GitSHA is the tag's commit, from the module's origin).
build_volcano() {
  local r=volcano.sh/volcano v=$VOLCANO_VERSION sha
  sha=$(go mod download -json "$r@$v" | sed -n 's/.*"Hash": "\(.*\)".*/\1/p')
  local built ld
  built=$(date -u '+%Y-%m-%d %H:%M:%S')
  ld="-X $r/pkg/version.GitSHA=$sha -X $r/pkg/version.Version=$v -X '$r/pkg/version.Built=$built'"
  module_source_build volcano "$r" "$v" "$ld" vc-scheduler=./cmd/scheduler
}

# scheduler-plugins' scheduler (kube-scheduler with Coscheduling and the project's other plugins)
# and its controller (PodGroup status), run on the host by hack/gang-schedulers.sh. Upstream names
# them kube-scheduler and controller; here they are prefixed, as bin/kube-scheduler is Kubernetes'.
# gitVersion is the Kubernetes version they are built against (v1.33.5 for v0.33.5), not the
# plugins' own version as upstream's Makefile sets it: component-base v0.33 takes the binary's
# emulation version from gitVersion, and the scheduler refuses to start with v0.33.5 ("emulation
# version 0.33 is not between [1.31, 0.33.0]").
build_scheduler_plugins() {
  local r=sigs.k8s.io/scheduler-plugins v=$SCHEDULER_PLUGINS_VERSION kube
  kube=$(client_go_of "$r" "$v")
  module_source_build scheduler-plugins "$r" "$v" \
    "-X k8s.io/component-base/version.gitVersion=$kube" \
    scheduler-plugins-scheduler=./cmd/scheduler scheduler-plugins-controller=./cmd/controller
}

# Kueue's manager (cmd/kueue), run on the host by hack/kueue.sh. Upstream's Makefile names it
# manager and stamps pkg/version the same way; the commit is the tag's, as the proxy reports it.
build_kueue() {
  local r=sigs.k8s.io/kueue v=$KUEUE_VERSION commit ld
  commit=$(go mod download -json "$r@$v" | sed -n 's/.*"Hash": "\(.*\)".*/\1/p')
  ld="-X $r/pkg/version.GitVersion=$v -X $r/pkg/version.GitCommit=$commit"
  ld+=" -X $r/pkg/version.BuildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  go_install kueue "$v" "$ld" "" "$r/cmd/kueue"
}
# JobSet's manager (the module root's main package), run on the host by hack/jobset.sh. Built in a
# copy of its module source: `go install sigs.k8s.io/jobset@VERSION` asks the proxy for the
# module's version list, which the proxy here refuses (403). Upstream's Makefile names it manager
# and stamps pkg/version with the tag and its commit (here the commit the proxy reports).
build_jobset() {
  local r=sigs.k8s.io/jobset v=$JOBSET_VERSION commit
  commit=$(go mod download -json "$r@$v" | sed -n 's/.*"Hash": "\(.*\)".*/\1/p')
  module_source_build jobset "$r" "$v" \
    "-X $r/pkg/version.GitVersion=$v -X $r/pkg/version.GitCommit=$commit" jobset=.
}

# Kubeflow Trainer v2's controller manager (cmd/trainer-controller-manager), run on the host by
# hack/trainer.sh. Upstream's image calls it manager and sets no ldflags; built in a copy of its
# module source like JobSet, with upstream's own go.sum.
build_trainer() {
  module_source_build trainer github.com/kubeflow/trainer/v2 "$TRAINER_VERSION" "" \
    trainer-controller-manager=./cmd/trainer-controller-manager
}
# --- The real node (hack/real-node.sh): on demand only ------------------------------------------
# kubelet from k8s.io/kubernetes at KUBERNETES_VERSION (the control plane's wrapper technique; its
# Go build cache makes this cheap), the pod sandbox's pause process and CoreDNS with a few plugins,
# both from the project's own main packages under hack/real-node/.

build_kubelet() {
  local v=$KUBERNETES_VERSION out="$cache/tools/kubelet-$KUBERNETES_VERSION"
  if ! have "$out" kubelet; then
    log "building kubelet $v"
    local src="$cache/src/kubelet-$v"
    kube_wrapper "$src" kubelet
    mkdir -p "$out.tmp"
    (cd "$src" && go build -trimpath -ldflags "$(kube_ldflags)" -o "$out.tmp/" k8s.io/kubernetes/cmd/kubelet)
    rm -rf "$out"; mv "$out.tmp" "$out"
  fi
  link kubelet "$out"
}

# main_module NAME VERSION DIR REQUIRE...: build the main package in hack/real-node/DIR as bin/NAME,
# in a wrapper module requiring exactly REQUIRE (module@version); the cache key is VERSION.
main_module() {
  local name=$1 v=$2 dir=$root/hack/real-node/$3 r; shift 3
  local out="$cache/tools/$name-$v" src="$cache/src/$name-$v"
  if ! have "$out" "$name"; then
    log "building $name $v"
    wrapper "$src"
    cp "$dir"/*.go "$src/"
    # Not `go mod tidy`: it would also fetch the modules of every dependency's tests.
    (cd "$src" && for r in "$@"; do go get "$r"; done)
    mkdir -p "$out.tmp"
    (cd "$src" && go build -mod=mod -trimpath -ldflags "-s -w" -o "$out.tmp/$name" .)
    rm -rf "$out"; mv "$out.tmp" "$out"
  fi
  link "$name" "$out"
}

# The pause program has no version of its own: its source's hash is one.
build_pause() {
  main_module pause "src-$(cat "$root"/hack/real-node/pause/*.go | sha256sum | cut -c1-12)" pause
}

build_coredns() {
  local h; h=$(cat "$root"/hack/real-node/coredns/*.go | sha256sum | cut -c1-12)
  main_module coredns "$COREDNS_VERSION-$h" coredns "github.com/coredns/coredns@$COREDNS_VERSION"
}
# --- end of the real node ------------------------------------------------------------------------

# build TOOL: build one tool (if not cached) and link it.
build() {
  case $1 in
    kube) build_kube ;;
    etcd) build_etcd ;;
    kwok) build_kwok ;;
    ansible-operator) build_ansible_operator ;;
    operator-sdk) build_operator_sdk ;;
    kustomize) build_kustomize ;;
    opm) build_opm ;;
    olm) build_olm ;;
    training-operator) build_training_operator ;;
    volcano) build_volcano ;;
    scheduler-plugins) build_scheduler_plugins ;;
    kueue) build_kueue ;;
    jobset) build_jobset ;;
    trainer) build_trainer ;;
    kubelet) build_kubelet ;;
    pause) build_pause ;;
    coredns) build_coredns ;;
    *) log "unknown tool: $1"; exit 2 ;;
  esac
}

# Two builds of one tool at once (make test's background build, and a make target or a test run
# meanwhile) would share its output and source directories: the second waits for the first under
# a lock of the tool's own, then finds it built.
mkdir -p "$cache/locks"
tools=("$@")
[ ${#tools[@]} -gt 0 ] || tools=(kube etcd kwok ansible-operator operator-sdk kustomize)
for t in "${tools[@]}"; do
  (
    flock 9
    build "$t"
  ) 9>"$cache/locks/$t.lock"
done
