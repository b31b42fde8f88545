"""Upstream's admission webhook configurations, rewritten for a manager run on this machine.

    kubectl kustomize DIR | loopback_webhooks.py URL CA_FILE [NAME_PREFIX]   (a v1 List on stdout)

Upstream's manifests point every webhook at a Service in the cluster; a manager listening on
127.0.0.1 is reached by URL instead (``URL`` + the webhook's own path), trusting the CA the calling
script made (no cert-manager, no cert rotation). Rules, selectors and failure policies stay as
upstream wrote them. Everything else in the stream (Services, Deployments, ...) is left out.
``NAME_PREFIX`` is the prefix upstream's default overlay gives the configurations' names.
Used by hack/jobset.sh and hack/trainer.sh."""

from __future__ import annotations

import base64
import sys
from pathlib import Path
from typing import Any

import yaml

KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")


def by_url(webhook: dict[str, Any], url: str, ca_bundle: str) -> dict[str, Any]:
    """The webhook, calling ``url`` + the path of its Service reference."""
    path = webhook["clientConfig"]["service"].get("path", "")
    return {**webhook, "clientConfig": {"url": url + path, "caBundle": ca_bundle}}


def loopback(docs: list[Any], url: str, ca_bundle: str, prefix: str = "") -> list[dict[str, Any]]:
    """The webhook configurations among ``docs``, renamed with ``prefix``, served at ``url``."""
    out = []
    for doc in docs:
        if not doc or doc.get("kind") not in KINDS:
            continue
        webhooks = [by_url(w, url, ca_bundle) for w in doc.get("webhooks") or []]
        metadata = {"name": prefix + doc["metadata"]["name"]}
        out.append(
            {"apiVersion": doc["apiVersion"], "kind": doc["kind"], "metadata": metadata, "webhooks": webhooks}
        )
    return out


def main(argv: list[str]) -> None:
    url, ca_file, *rest = argv
    ca_bundle = base64.b64encode(Path(ca_file).read_bytes()).decode()
    items = loopback(list(yaml.safe_load_all(sys.stdin)), url, ca_bundle, rest[0] if rest else "")
    yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}, sys.stdout, sort_keys=False)


if __name__ == "__main__":
    main(sys.argv[1:])
