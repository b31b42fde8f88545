"""Kueue's own manifests, from its module source, rewritten for a manager on this machine.

    render.py MODULE_DIR PORT CA_FILE FRAMEWORK...   (YAML of a v1 List on stdout)

Kueue's kustomize overlays point its CRDs' conversion webhook and its admission webhooks at the
Service ``kueue-webhook-service`` in ``kueue-system``; a process on 127.0.0.1 is reached by URL
instead, with the CA the script made (no cert-manager). Only the webhooks of Kueue's own kinds and
of the frameworks in the config are kept: the others (Deployments, Pods, batch Jobs, ...) would
send every such create in the cluster to Kueue, and fail it while Kueue is down. The namespace
selector is the one the overlay adds (kube-system and kueue-system left out)."""

from __future__ import annotations

import base64
import sys
from pathlib import Path

import yaml

NAME_PREFIX = "kueue-"
# The CRDs config/components/crd/kustomization.yaml patches with the conversion webhook.
CONVERTED = ("localqueues", "clusterqueues", "cohorts", "workloads", "multikueueclusters")
SYSTEM_NAMESPACES = {
    "matchExpressions": [
        {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system", "kueue-system"]}
    ]
}


def crds(module: Path, url: str, ca_bundle: str) -> list[dict]:
    out = []
    for path in sorted((module / "config/components/crd/bases").glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        if crd["spec"]["names"]["plural"] in CONVERTED:
            crd["spec"]["conversion"] = {
                "strategy": "Webhook",
                "webhook": {
                    "clientConfig": {"url": f"{url}/convert", "caBundle": ca_bundle},
                    "conversionReviewVersions": ["v1"],
                },
            }
        out.append(crd)
    return out


def wanted(webhook: dict, frameworks: set[str]) -> bool:
    """Kueue's own kinds, and the job kinds of the frameworks listed (``group/kind``)."""
    for rule in webhook.get("rules") or []:
        for group in rule["apiGroups"]:
            if group == "kueue.x-k8s.io":
                return True
            # Frameworks are named "group/kind", core kinds by their kind alone ("pod").
            prefix = f"{group}/" if group else ""
            if any(prefix + r.removesuffix("s") in frameworks for r in rule["resources"]):
                return True
    return False


def webhooks(module: Path, url: str, ca_bundle: str, frameworks: set[str]) -> list[dict]:
    text = (module / "config/components/webhook/manifests.yaml").read_text()
    out = []
    for config in yaml.safe_load_all(text):
        if not config:
            continue
        config["metadata"]["name"] = NAME_PREFIX + config["metadata"]["name"]
        kept = []
        for webhook in config["webhooks"]:
            if not wanted(webhook, frameworks):
                continue
            path = webhook["clientConfig"]["service"]["path"]
            webhook["clientConfig"] = {"url": url + path, "caBundle": ca_bundle}
            if not any(g == "kueue.x-k8s.io" for r in webhook["rules"] for g in r["apiGroups"]):
                webhook["namespaceSelector"] = SYSTEM_NAMESPACES
            kept.append(webhook)
        config["webhooks"] = kept
        out.append(config)
    return out


def main(argv: list[str]) -> None:
    module, port, ca_file, *frameworks = argv
    url = f"https://127.0.0.1:{port}"
    ca_bundle = base64.b64encode(Path(ca_file).read_bytes()).decode()
    items = crds(Path(module), url, ca_bundle) + webhooks(Path(module), url, ca_bundle, set(frameworks))
    yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}, sys.stdout, sort_keys=False)


if __name__ == "__main__":
    main(sys.argv[1:])
