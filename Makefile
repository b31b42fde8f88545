# ansible-training-operator: make help lists the targets.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

include versions.env
export

ROOT := $(CURDIR)
VENV := $(ROOT)/.venv
BIN := $(ROOT)/bin
PY := $(VENV)/bin/python
KUBECTL := $(BIN)/kubectl
# The local cluster's kubeconfig; a KUBECONFIG set by the user wins everywhere.
LOCAL_KUBECONFIG := $(ROOT)/.kwok/clusters/ato/kubeconfig.yaml

##@ Use

.PHONY: run
run: tools ## Run the operator locally in the foreground (starts the local cluster and JobSet unless KUBECONFIG is set)
	hack/run.sh

# The Go tools build in the background while lint and unit run (hack/test.sh all).
.PHONY: test
test: venv bytecode ## Everything CI runs: lint, unit, cluster tests and molecule with the operator, OLM install, bench smoke
	hack/test.sh all

##@ Set-up

.PHONY: tools
tools: venv bytecode go-tools ## Install every tool at its pinned version (idempotent, cached)

.PHONY: venv
venv: $(VENV)/.installed ## Python tools in .venv from requirements.txt

$(VENV)/.installed: requirements.txt
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install --quiet -r requirements.txt
	touch $@

# Bytecode of the project's own Python, written before the first run: Ansible loads the filter
# and action plugins (and through them lib/) in every reconcile, and compiles them again whenever
# no __pycache__ can be written (docs/performance.md: 58 ms against 30 ms for the first filter).
.PHONY: bytecode
bytecode: venv
	$(PY) -m compileall -q lib action_plugins filter_plugins

.PHONY: go-tools
go-tools: ## Build the Go tools into bin/ (cached in ~/.cache/ansible-training-operator)
	hack/build-go-tools.sh

.PHONY: versions
versions: tools ## Print what every tool reports as its version
	@$(BIN)/ansible-operator version; $(BIN)/operator-sdk version; $(BIN)/kube-apiserver --version
	@$(KUBECTL) version --client; $(BIN)/etcd --version | head -1; $(BIN)/kwokctl --version
	@$(BIN)/kustomize version; $(VENV)/bin/ansible --version | head -1

##@ Local cluster

.PHONY: cluster
cluster: go-tools ## Start the local cluster (kube-apiserver, controller-manager, scheduler, etcd, KWOK nodes)
	@hack/cluster.sh up >/dev/null && echo "KUBECONFIG=$(LOCAL_KUBECONFIG)"

.PHONY: cluster-down
cluster-down: ## Delete the local cluster (and stop JobSet's manager beside it)
	hack/cluster.sh down

.PHONY: install
install: tools ## Install the CRDs, the admission policy, the built-in Trainer runtimes and the SDK's version ConfigMap into the current cluster
	root=$(ROOT); source hack/lib.sh; use_cluster; install_apis

.PHONY: uninstall
uninstall: ## Remove the CRDs (and every job and runtime) and the admission policy from the current cluster
	export KUBECONFIG=$${KUBECONFIG:-$(LOCAL_KUBECONFIG)}; \
	$(KUBECTL) delete --ignore-not-found -k config/admission; $(KUBECTL) delete --ignore-not-found -k config/crd

##@ Development

.PHONY: lint
lint: venv ## ansible-lint (production profile), yamllint, ruff, hadolint, mypy, shellcheck
	hack/test.sh lint

.PHONY: unit
unit: venv ## Pure unit tests of the filters and plugins
	hack/test.sh unit

.PHONY: e2e
e2e: tools ## Against the cluster: harness checks, admission tests, molecule with the operator running
	hack/test.sh e2e

.PHONY: bench
bench: tools ## The full benchmark on its own cluster: floor, this operator, training-operator, then the scale scenarios (about 60 min)
	hack/bench.sh --profile full

.PHONY: bench-scale
bench-scale: tools ## The cost with changes only: steady state, restarts, a control-plane outage (about 25 min)
	hack/bench.sh --profile scale --targets ours

.PHONY: bench-smoke
bench-smoke: tools ## A few-minute run of every benchmark measurement (part of make test)
	hack/bench.sh --profile smoke

.PHONY: manifests
manifests: venv ## Regenerate the CRDs and admission policies from hack/gen_crds
	$(PY) hack/gen_crds

.PHONY: clean
clean: cluster-down ## Delete the local cluster, bin/ links and the venv (the build cache stays)
	rm -rf $(BIN) $(VENV) .kwok

.PHONY: help
help: ## Show this help
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\n"} \
	  /^[a-zA-Z0-9_-]+:.*?##/ { printf "  \033[36m%-14s\033[0m %s\n", $$1, $$2 } \
	  /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

include make/ship.mk
