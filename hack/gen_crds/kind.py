"""A kind's API: its schema, rules, printer columns and admission policy, and the CRD made of them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .schema import Schema, string

CATEGORIES = ["all", "kubeflow"]


@dataclass
class Kind:
    group: str
    version: str
    kind: str
    plural: str
    short_names: list[str]
    description: str
    spec: Schema
    status: Schema | None
    root_rules: list[dict[str, Any]]
    columns: list[dict[str, Any]]
    policy: Callable[[Kind], list[dict[str, Any]]] | None = None
    # The scale subresource (kubectl scale, a HorizontalPodAutoscaler): spec, status and selector paths.
    scale: dict[str, str] | None = None
    # The profile's name (lib/training_jobs/registry.py) when it is not the singular: two kinds
    # named PaddleJob need two admission policies.
    name: str = ""
    # A second served version with the same schema, which only the operator's runtime uses to
    # watch the kind: the runtime names its controllers <kind>-<version>-controller, without the
    # group, so two PaddleJob v1 watches would collide (docs/architecture.md "Two PaddleJobs").
    runtime_version: str = ""
    scope: str = "Namespaced"
    categories: list[str] = field(default_factory=lambda: list(CATEGORIES))
    # Upstream's Trainer v2 kinds leave spec optional (it has required fields of its own).
    spec_required: bool = True

    @property
    def file(self) -> str:
        return f"{self.group}_{self.plural}.yaml"

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def id(self) -> str:
        return self.name or self.singular


STATE_COLUMN = {
    "name": "State",
    "type": "string",
    "description": "Type of the job's last condition: its current state.",
    "jsonPath": ".status.conditions[-1:].type",
}
AGE_COLUMN = {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}


def _root(k: Kind) -> dict[str, Any]:
    properties = {
        "apiVersion": string("Versioned schema of this object (group/version)."),
        "kind": string("REST resource this object represents."),
        "metadata": {"type": "object"},
        "spec": k.spec,
    }
    if k.status is not None:
        properties["status"] = k.status
    root: dict[str, Any] = {"description": k.description, "type": "object"}
    if k.spec_required:
        root["required"] = ["spec"]
    root["properties"] = properties
    if k.root_rules:
        root["x-kubernetes-validations"] = k.root_rules
    return root


def _version(k: Kind, version: str) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": version,
        "served": True,
        "storage": version == k.version,
        "schema": {"openAPIV3Schema": _root(k)},
    }
    if k.status is not None:
        out["subresources"] = {"status": {}, **({"scale": k.scale} if k.scale else {})}
    if k.columns:
        out["additionalPrinterColumns"] = k.columns
    return out


def crd(k: Kind) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{k.plural}.{k.group}",
            "labels": {"app.kubernetes.io/part-of": "ansible-training-operator"},
        },
        "spec": {
            "group": k.group,
            "names": {
                "kind": k.kind,
                "listKind": f"{k.kind}List",
                "plural": k.plural,
                "singular": k.singular,
                "shortNames": k.short_names,
                "categories": k.categories,
            },
            "scope": k.scope,
            "versions": [_version(k, version) for version in [k.version, k.runtime_version] if version],
        },
    }
