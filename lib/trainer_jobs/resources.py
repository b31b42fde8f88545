"""Resource arithmetic of Trainer v2.3: ``resourcesPerNode``, a pod's requests, GPUs and CPUs per node.

Upstream sources (kubeflow/trainer v2.3.0): ``pkg/util/trainingruntime.MergeResourceRequirements``,
``pkg/runtime/runtime.go`` (``ExtractResourcePerNodeFromRuntime``, ``GetNumGPUPerNode``),
``torch.getNumCPUPerNode``; Kubernetes' ``component-helpers/resource.PodRequests`` (v0.36), which
upstream uses for the PodGroups' ``minResources``. Quantities are exact and printed in Kubernetes'
canonical form (:mod:`training_jobs.quantity`, shared with the v1 engine: the same arithmetic),
as upstream's typed round trip prints them.
"""

from __future__ import annotations

import math
from typing import Any

from trainer_jobs.api import ANCESTOR_LABEL, ANCESTOR_TRAINER, NODE
from training_jobs.quantity import Quantity, format_quantity, parse_quantity

ResourceList = dict[str, Quantity]
# Pod-level resources (pod.spec.resources) override the containers' sum for these only.
POD_LEVEL = ("cpu", "memory")
POD_LEVEL_PREFIX = "hugepages-"


def canonical(resources: Any) -> dict[str, str]:
    """A resource list with every quantity in canonical form (``1000m`` -> ``1``)."""
    return {name: format_quantity(parse_quantity(v)) for name, v in (resources or {}).items()}


def canonical_requirements(requirements: dict[str, Any]) -> dict[str, Any]:
    out = dict(requirements)
    for field in ("limits", "requests"):
        if isinstance(out.get(field), dict):
            out[field] = canonical(out[field])
    return out


def canonical_pod_spec(pod_spec: dict[str, Any]) -> None:
    """Canonical quantities in a pod spec, in place: containers' and the pod's resources,
    ``overhead``, ``emptyDir.sizeLimit`` (Go's typed round trip prints them so)."""
    for field in ("containers", "initContainers", "ephemeralContainers"):
        for container in pod_spec.get(field) or []:
            if isinstance(container.get("resources"), dict):
                container["resources"] = canonical_requirements(container["resources"])
    if isinstance(pod_spec.get("resources"), dict):
        pod_spec["resources"] = canonical_requirements(pod_spec["resources"])
    if isinstance(pod_spec.get("overhead"), dict):
        pod_spec["overhead"] = canonical(pod_spec["overhead"])
    for volume in pod_spec.get("volumes") or []:
        empty_dir = volume.get("emptyDir")
        if isinstance(empty_dir, dict) and empty_dir.get("sizeLimit") is not None:
            empty_dir["sizeLimit"] = format_quantity(parse_quantity(empty_dir["sizeLimit"]))


def merge_requirements(base: dict[str, Any] | None, override: dict[str, Any]) -> dict[str, Any]:
    """``MergeResourceRequirements``: limits and requests merged key by key, claims by name;
    empty maps dropped as the typed round trip drops them."""
    merged = dict(base or {})
    for field in ("limits", "requests"):
        combined = {**(merged.get(field) or {}), **(override.get(field) or {})}
        if combined:
            merged[field] = canonical(combined)
        else:
            merged.pop(field, None)
    claims = list(merged.get("claims") or [])
    for claim in override.get("claims") or []:
        at = next((i for i, c in enumerate(claims) if c.get("name") == claim.get("name")), None)
        if at is None:
            claims.append(dict(claim))
        else:
            claims[at] = {**claims[at], **claim}
    if claims:
        merged["claims"] = claims
    return merged


def _add(total: ResourceList, resources: Any) -> None:
    """``addResourceList``: the receiver keeps its format unless it is zero."""
    for name, amount in (resources or {}).items():
        q = amount if isinstance(amount, Quantity) else parse_quantity(amount)
        total[name] = total[name] + q if name in total else q


def _max(total: ResourceList, other: ResourceList) -> None:
    for name, q in other.items():
        if name not in total or q.nanos > total[name].nanos:
            total[name] = q


def pod_requests(pod_spec: dict[str, Any]) -> ResourceList:
    """``PodRequests`` of a pod with this spec: containers summed; each init container at its
    turn, beside the sidecars (``restartPolicy: Always``) started before it, raises the floor;
    pod-level requests replace the sum for cpu, memory and hugepages; plus ``overhead``."""
    total: ResourceList = {}
    for container in pod_spec.get("containers") or []:
        _add(total, (container.get("resources") or {}).get("requests"))
    sidecars: ResourceList = {}
    init_floor: ResourceList = {}
    for container in pod_spec.get("initContainers") or []:
        requests = (container.get("resources") or {}).get("requests")
        if container.get("restartPolicy") == "Always":
            _add(total, requests)
            _add(sidecars, requests)
            turn = dict(sidecars)
        else:
            turn = {}
            _add(turn, requests)
            _add(turn, sidecars)
        _max(init_floor, turn)
    _max(total, init_floor)
    pod_level = (pod_spec.get("resources") or {}).get("requests") or {}
    if any(_pod_level(name) for name in pod_level):
        for name, amount in pod_level.items():
            if _pod_level(name):
                total[name] = parse_quantity(amount)
    _add(total, pod_spec.get("overhead"))
    return total


def _pod_level(name: str) -> bool:
    return name in POD_LEVEL or name.startswith(POD_LEVEL_PREFIX)


def times(resources: ResourceList, count: int) -> ResourceList:
    """``Quantity.Mul``: the format is kept."""
    return {name: Quantity(q.nanos * count, q.format) for name, q in resources.items()}


def runtime_resources_per_node(jobset_spec: dict[str, Any]) -> dict[str, Any] | None:
    """``ExtractResourcePerNodeFromRuntime``: the resources of container ``node`` in the first
    replicated job named ``node`` or marked as the trainer, when it has any."""
    for rjob in jobset_spec.get("replicatedJobs") or []:
        labels = ((rjob.get("template") or {}).get("metadata") or {}).get("labels") or {}
        if rjob.get("name") != NODE and labels.get(ANCESTOR_LABEL) != ANCESTOR_TRAINER:
            continue
        pod = ((((rjob.get("template") or {}).get("spec") or {}).get("template") or {}).get("spec")) or {}
        for container in pod.get("containers") or []:
            if container.get("name") == NODE and container.get("resources") is not None:
                resources = container["resources"]
                return {"limits": resources.get("limits") or {}, "requests": resources.get("requests") or {}}
    return None


def _value(amount: Any) -> int:
    """``Quantity.Value()``: the value rounded up to an integer."""
    return math.ceil(parse_quantity(amount).value)


def gpus_per_node(resources: dict[str, Any] | None) -> int:
    """``GetNumGPUPerNode``: the first resource whose name contains "gpu" (requests, else
    limits). Upstream reads a Go map, so which of two such resources counts is random; here it is
    the first by name."""

    def first_gpu(values: Any) -> int:
        for name in sorted(values or {}):
            if "gpu" in name.lower():
                return _value(values[name])
        return 0

    if not resources:
        return 0
    count = first_gpu(resources.get("requests"))
    limit = first_gpu(resources.get("limits"))
    return limit if count == 0 and limit > 0 else count


def cpus_per_node(resources: dict[str, Any] | None) -> int:
    """``getNumCPUPerNode``: the CPU request rounded up, else the limit, else 0."""
    resources = resources or {}
    request = (resources.get("requests") or {}).get("cpu")
    if request is None or parse_quantity(request).nanos == 0:
        limit = (resources.get("limits") or {}).get("cpu")
        return _value(limit) if limit is not None else 0
    return _value(request)
