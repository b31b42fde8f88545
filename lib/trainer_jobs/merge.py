"""How upstream merges a TrainJob's ``runtimePatches`` into its runtime's JobSet template.

``mergeRuntimePatches`` (``pkg/runtime/core/trainingruntime.go``) marshals each patch's
``trainingRuntimeSpec.template.spec`` and applies it to the template's JobSet spec with
Kubernetes' strategic merge patch (``strategicpatch.StrategicMergePatch`` with the
``JobSetSpec`` struct as schema), patch after patch in the TrainJob's order, then restores the
template's order of ``replicatedJobs``. This module does the same on plain data:

- maps merge key by key; a ``null`` in the patch removes the key;
- a list with a merge key in the Go types (:data:`MERGE_KEYS`: replicated jobs and containers by
  ``name``, env by ``name``, volume mounts by ``mountPath``...) merges item by item, and the
  result is ordered as ``normalizeElementOrder`` orders it: the patch's items in the patch's
  order, the template's other items kept relative to them by their old positions;
- every other list (``tolerations``, ``args``, affinity terms) is replaced.

The patch first goes through what Go's typed round trip does to it: ``null``, empty strings,
empty lists and empty maps are dropped (``omitempty``, :func:`trainer_jobs.typed.omit_empty`). A ``false`` that Go would also drop
(a non-pointer ``bool``) is kept: telling those fields apart needs the Go types, and no field a
runtime patch may carry is such a ``bool`` except ``readOnly`` of a volume mount.
"""

from __future__ import annotations

import copy
from typing import Any

from trainer_jobs.typed import omit_empty

_POD = ("replicatedJobs", "template", "spec", "template", "spec")
_CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")
# Lists merged by a key, by their path of field names (list positions left out) from JobSetSpec.
MERGE_KEYS: dict[tuple[str, ...], str] = {
    ("replicatedJobs",): "name",
    ("replicatedJobs", "dependsOn"): "name",
    (*_POD, "volumes"): "name",
    (*_POD, "imagePullSecrets"): "name",
    (*_POD, "schedulingGates"): "name",
    (*_POD, "hostAliases"): "ip",
    (*_POD, "topologySpreadConstraints"): "topologyKey",
    (*_POD, "resourceClaims"): "name",
}
for _list in _CONTAINER_LISTS:
    MERGE_KEYS[(*_POD, _list)] = "name"
    MERGE_KEYS[(*_POD, _list, "env")] = "name"
    MERGE_KEYS[(*_POD, _list, "volumeMounts")] = "mountPath"
    MERGE_KEYS[(*_POD, _list, "ports")] = "containerPort"
    MERGE_KEYS[(*_POD, _list, "volumeDevices")] = "devicePath"
# Lists of scalars merged as a set (patchStrategy "merge" without a key): object finalizers.
SCALAR_MERGE = {
    ("replicatedJobs", "template", "metadata", "finalizers"),
    (*_POD[:-1], "metadata", "finalizers"),
}


def merge_map(original: dict[str, Any], patch: dict[str, Any], path: tuple[str, ...] = ()) -> dict[str, Any]:
    """``mergeMap``: ``patch`` merged into a copy of ``original``."""
    merged = dict(original)
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
            continue
        here = (*path, key)
        old = merged.get(key)
        if isinstance(old, dict) and isinstance(value, dict):
            merged[key] = merge_map(old, value, here)
        elif isinstance(old, list) and isinstance(value, list):
            merged[key] = _merge_list(old, value, here)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def _merge_list(original: list[Any], patch: list[Any], path: tuple[str, ...]) -> list[Any]:
    key = MERGE_KEYS.get(path)
    if path in SCALAR_MERGE:
        return list(dict.fromkeys([*original, *patch]))
    if key is None or not all(isinstance(i, dict) for i in [*original, *patch]):
        return copy.deepcopy(patch)
    merged = list(original)
    for item in patch:
        at = next((i for i, o in enumerate(merged) if o.get(key) == item.get(key)), None)
        if at is None:
            merged.append(copy.deepcopy(item))
        else:
            merged[at] = merge_map(merged[at], item, path)
    return _element_order(merged, patch, original, key)


def _element_order(merged: list[Any], patch: list[Any], original: list[Any], key: str) -> list[Any]:
    """``normalizeElementOrder``: the patched items in the patch's order, interleaved with the
    items only the original has (in their order) by their positions in the original."""
    patch_keys = [p.get(key) for p in patch]
    patched = sorted(
        (m for m in merged if m.get(key) in patch_keys), key=lambda m: patch_keys.index(m.get(key))
    )
    server_only = [m for m in merged if m.get(key) not in patch_keys]
    position = {o.get(key): i for i, o in reversed(list(enumerate(original)))}
    result: list[Any] = []
    i = j = 0
    while i < len(server_only) or j < len(patched):
        if j >= len(patched):
            result.append(server_only[i])
            i += 1
        elif i >= len(server_only):
            result.append(patched[j])
            j += 1
        else:
            left, right = position.get(server_only[i].get(key)), position.get(patched[j].get(key))
            if left is not None and right is not None and left < right:
                result.append(server_only[i])
                i += 1
            else:
                result.append(patched[j])
                j += 1
    return result


def apply_runtime_patches(template_spec: dict[str, Any], patches: list[dict[str, Any]]) -> dict[str, Any]:
    """The runtime's JobSet spec with every patch's ``template.spec`` merged, in order."""
    order = {rj.get("name"): i for i, rj in enumerate(template_spec.get("replicatedJobs") or [])}
    merged = template_spec
    for patch in patches or []:
        body = (((patch or {}).get("trainingRuntimeSpec") or {}).get("template") or {}).get("spec")
        if isinstance(body, dict):
            merged = merge_map(merged, omit_empty(body))
    if "replicatedJobs" in merged:
        jobs = merged["replicatedJobs"]
        merged = {**merged, "replicatedJobs": sorted(jobs, key=lambda rj: order.get(rj.get("name"), 0))}
    return copy.deepcopy(merged)


def patched_metadata(
    template_meta: dict[str, Any], patches: list[dict[str, Any]], field: str
) -> dict[str, str] | None:
    """The JobSet's ``labels`` or ``annotations``: the template's, then each patch's
    ``template.metadata`` on top (``newRuntimeInfo``); None when neither has any."""
    result = dict(template_meta[field]) if isinstance(template_meta.get(field), dict) else None
    for patch in patches or []:
        metadata = (((patch or {}).get("trainingRuntimeSpec") or {}).get("template") or {}).get(
            "metadata"
        ) or {}
        values = metadata.get(field) or {}
        if values:
            result = {**(result or {}), **values}
    return result
