"""The replica templates' schema: core/v1 PodTemplateSpec in full, as training-operator's CRDs have it.

It is read from the OpenAPI document of the pinned Kubernetes (``KUBERNETES_VERSION`` in
versions.env, the module the control plane is built from), so it follows the cluster's pod API
exactly: the API server prunes unknown template fields, ``kubectl apply`` refuses them with their
path, and ``kubectl explain`` reaches every pod field.

A CRD schema must be structural, so the document is rewritten the way controller-gen writes
Go types: references inlined, ``Quantity`` and ``IntOrString`` as int-or-string, only the
keywords a CRD schema accepts, and only the defaults the pod API declares with a value (such as
``protocol: TCP``, which the ``ports`` list-map key needs).
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
from pathlib import Path
from typing import Any

from .schema import QUANTITY, ROOT, Schema

DOCUMENT = "api/openapi-spec/v3/api__v1_openapi.json"
# batch/v1's document, for the Job templates of a JobSet (Trainer v2's runtimes).
BATCH_DOCUMENT = "api/openapi-spec/v3/apis__batch__v1_openapi.json"
BATCH_PREFIX = "io.k8s.api.batch.v1."
PREFIX = "#/components/schemas/"

# Keywords of an OpenAPI schema that a CRD schema keeps; the rest (x-kubernetes-patch-*,
# x-kubernetes-unions, readOnly, ...) describe the built-in API's machinery, not the data.
# Descriptions are left out, as controller-gen's maxDescLen=0 does: with them the nine CRDs
# would not fit in one OLM InstallPlan, which etcd limits to 1.5 MiB (kubectl explain
# pod.spec has the text).
KEPT = (
    "type",
    "format",
    "required",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-map-type",
)

INT_OR_STRING: Schema = {
    "anyOf": [{"type": "integer"}, {"type": "string"}],
    "x-kubernetes-int-or-string": True,
}

# An ObjectMeta inside a template is not an object's own metadata: only what the pods (or the
# volume claims of ephemeral volumes) are created with is kept, as controller-gen's
# generateEmbeddedObjectMeta does.
EMBEDDED_OBJECT_META: Schema = {
    "type": "object",
    "properties": {
        "annotations": {
            "description": "Annotations of the created object.",
            "type": "object",
            "additionalProperties": {"type": "string"},
        },
        "finalizers": {
            "description": "Finalizers of the created object.",
            "type": "array",
            "items": {"type": "string"},
        },
        "labels": {
            "description": "Labels of the created object.",
            "type": "object",
            "additionalProperties": {"type": "string"},
        },
        "name": {"description": "Name of the created object.", "type": "string"},
        "namespace": {"description": "Namespace of the created object.", "type": "string"},
    },
}

SPECIAL: dict[str, Schema] = {
    "io.k8s.apimachinery.pkg.api.resource.Quantity": QUANTITY,
    "io.k8s.apimachinery.pkg.util.intstr.IntOrString": INT_OR_STRING,
    "io.k8s.apimachinery.pkg.apis.meta.v1.Time": {"type": "string", "format": "date-time"},
    "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta": EMBEDDED_OBJECT_META,
}


def kubernetes_version() -> str:
    for line in (ROOT / "versions.env").read_text().splitlines():
        if line.startswith("KUBERNETES_VERSION="):
            return line.split("=", 1)[1].strip()
    raise RuntimeError("versions.env has no KUBERNETES_VERSION")


def openapi_document(version: str, document: str = DOCUMENT) -> Path:
    """A document in the Go module cache; the module is downloaded from the proxy if missing."""
    go_env = {**os.environ, "GOFLAGS": "-mod=mod"}
    module = f"k8s.io/kubernetes@{version}"
    cache = subprocess.run(
        ["go", "env", "GOMODCACHE"], check=True, capture_output=True, text=True, env=go_env
    ).stdout.strip()
    path = Path(cache) / module / document
    if not path.exists():
        subprocess.run(["go", "mod", "download", module], check=True, env=go_env, cwd="/")
    return path


@functools.cache
def _definitions() -> dict[str, Schema]:
    """core/v1's definitions and batch/v1's own; the batch document repeats core's, which win."""
    version = kubernetes_version()
    core = json.loads(openapi_document(version).read_text())["components"]["schemas"]
    batch = json.loads(openapi_document(version, BATCH_DOCUMENT).read_text())["components"]["schemas"]
    return {**{k: v for k, v in batch.items() if k.startswith(BATCH_PREFIX)}, **core}


def _default(value: Any) -> bool:
    """Defaults the pod API declares with a value; its zero values ('' , 0, false, {}) are left out."""
    return isinstance(value, str | int) and not isinstance(value, bool) and value not in ("", 0)


def _convert(node: Schema, definitions: dict[str, Schema], path: tuple[str, ...]) -> Schema:
    refs = [node["$ref"]] if "$ref" in node else [s["$ref"] for s in node.get("allOf", []) if "$ref" in s]
    if refs:
        out = definition(refs[0].removeprefix(PREFIX), definitions, path)
    else:
        out = {key: node[key] for key in KEPT if key in node}
        if "properties" in node:
            out["properties"] = {
                name: _convert(child, definitions, path) for name, child in sorted(node["properties"].items())
            }
        if "items" in node:
            out["items"] = keyed(
                _convert(node["items"], definitions, path), node.get("x-kubernetes-list-map-keys")
            )
        if isinstance(node.get("additionalProperties"), dict):
            out["additionalProperties"] = _convert(node["additionalProperties"], definitions, path)
    if _default(node.get("default")):
        out["default"] = node["default"]
    return out


def keyed(item: Schema, keys: list[str] | None) -> Schema:
    """A list-map key must be required or defaulted: an optional key gets the pod API's zero value
    (``imagePullSecrets[].name`` is keyed and defaults to "")."""
    for key in keys or []:
        prop = item["properties"][key]
        if key not in item.get("required", []) and "default" not in prop:
            prop["default"] = {"string": "", "integer": 0}[prop["type"]]
    return item


def definition(name: str, definitions: dict[str, Schema], path: tuple[str, ...] = ()) -> Schema:
    """The named OpenAPI definition as a structural CRD schema, references inlined."""
    if name in SPECIAL:
        return json.loads(json.dumps(SPECIAL[name]))
    if name in path:
        raise ValueError(f"recursive schema: {' -> '.join((*path, name))}")
    return _convert(definitions[name], definitions, (*path, name))


@functools.cache
def _api_schema(name: str) -> str:
    return json.dumps(definition(name, _definitions()))


def api_schema(name: str) -> Schema:
    """A fresh copy of a Kubernetes API type's schema (``io.k8s.api.core.v1.Volume``): callers
    change descriptions and requirements."""
    return json.loads(_api_schema(name))


def pod_template_spec() -> Schema:
    """A fresh copy of the PodTemplateSpec schema."""
    return api_schema("io.k8s.api.core.v1.PodTemplateSpec")
