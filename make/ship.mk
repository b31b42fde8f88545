# Shipping the operator: in-cluster deploy, the OLM bundle and the registry-less OLM install test.
# Included by the Makefile (which includes versions.env and exports every variable).

# The CSV version of the bundle and the tag of the operator image; IMG can name any registry.
VERSION ?= $(OPERATOR_VERSION)
IMG ?= ansible-training-operator:$(VERSION)
# The bundle and catalog images, as operator-sdk projects name them.
BUNDLE_IMG ?= ansible-training-operator-bundle:v$(VERSION)
CATALOG_IMG ?= ansible-training-operator-catalog:v$(VERSION)
# docker or podman: no container engine is needed for anything but the *-build and *-push targets
# (image-local assembles the operator image without one, hack/image-local.sh).
CONTAINER_TOOL ?= docker
# What `make deploy` applies: config/default, or an overlay of it (config/testing/real-node).
DEPLOY_CONFIG ?= config/default

##@ Ship

.PHONY: deploy
deploy: go-tools ## Deploy CRDs, admission policy and the operator (IMG, DEPLOY_CONFIG) to the cluster in KUBECONFIG
	hack/deploy.sh deploy $(DEPLOY_CONFIG)

.PHONY: undeploy
undeploy: ## Remove the operator (namespace, RBAC, Deployment); CRDs and jobs stay (see uninstall)
	hack/deploy.sh undeploy

.PHONY: bundle
bundle: venv go-tools ## Write the OLM bundle to bundle/ (VERSION, IMG) and validate it: no errors, no warnings
	hack/bundle.sh

.PHONY: olm-test
olm-test: venv go-tools ## Install and upgrade the bundle through OLM (local olm, catalog, opm serve) on the cluster
	hack/olm-test.sh

.PHONY: catalog
catalog: bundle ## Write the file-based catalog of the bundle (naming BUNDLE_IMG) to catalog/ and catalog.Dockerfile
	hack/build-go-tools.sh opm
	hack/catalog.sh

.PHONY: docker-build
docker-build: ## Build the operator image IMG with CONTAINER_TOOL (docker or podman)
	$(CONTAINER_TOOL) build -t $(IMG) .

.PHONY: image-local
image-local: ## Assemble the operator image IMG without a container engine: .local/image/ansible-training-operator.oci.tar
	hack/image-local.sh

.PHONY: docker-push
docker-push: ## Push the operator image IMG
	$(CONTAINER_TOOL) push $(IMG)

.PHONY: bundle-build
bundle-build: bundle ## Build the bundle image BUNDLE_IMG from bundle/ (make bundle IMG=... first names the operator image)
	$(CONTAINER_TOOL) build -f bundle/bundle.Dockerfile -t $(BUNDLE_IMG) .

.PHONY: bundle-push
bundle-push: ## Push the bundle image BUNDLE_IMG
	$(CONTAINER_TOOL) push $(BUNDLE_IMG)

.PHONY: catalog-build
catalog-build: catalog ## Build the catalog image CATALOG_IMG (its bundle is BUNDLE_IMG)
	$(CONTAINER_TOOL) build -f catalog.Dockerfile -t $(CATALOG_IMG) .

.PHONY: catalog-push
catalog-push: ## Push the catalog image CATALOG_IMG
	$(CONTAINER_TOOL) push $(CATALOG_IMG)
