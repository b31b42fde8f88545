"""Upstream's list upserts (``pkg/apply``) and the containers they write into.

An upsert replaces the first item that matches in place and appends the others, in order: env
by name, volumes by name, volume mounts by mount path, ports by ``containerPort`` *or* name,
where two ports without a name match (Go's ``ptr.Equal(nil, nil)``), so upserting the trainer's
port replaces a template's first unnamed port. Env from a TrainJob goes through ``apply.EnvVar``,
which keeps only what its apply configuration carries (see :func:`env_var`).
"""

from __future__ import annotations

import copy
from typing import Any

from trainer_jobs.api import ANCESTOR_LABEL
from trainer_jobs.resources import canonical


def _upsert(items: list[dict[str, Any]], new: list[dict[str, Any]], same) -> list[dict[str, Any]]:
    result = list(items)
    for item in new:
        at = next((i for i, old in enumerate(result) if same(old, item)), None)
        if at is None:
            result.append(copy.deepcopy(item))
        else:
            result[at] = copy.deepcopy(item)
    return result


def upsert_env(container: dict[str, Any], env: list[dict[str, Any]]) -> None:
    container["env"] = _upsert(container.get("env") or [], env, lambda a, b: a.get("name") == b.get("name"))
    _drop_if_empty(container, "env")


def upsert_ports(container: dict[str, Any], ports: list[dict[str, Any]]) -> None:
    def same(a: dict[str, Any], b: dict[str, Any]) -> bool:
        return a.get("containerPort") == b.get("containerPort") or a.get("name") == b.get("name")

    container["ports"] = _upsert(container.get("ports") or [], ports, same)
    _drop_if_empty(container, "ports")


def upsert_mounts(container: dict[str, Any], mounts: list[dict[str, Any]]) -> None:
    same = lambda a, b: a.get("mountPath") == b.get("mountPath")  # noqa: E731
    container["volumeMounts"] = _upsert(container.get("volumeMounts") or [], mounts, same)
    _drop_if_empty(container, "volumeMounts")


def upsert_volumes(pod_spec: dict[str, Any], volumes: list[dict[str, Any]]) -> None:
    pod_spec["volumes"] = _upsert(
        pod_spec.get("volumes") or [], volumes, lambda a, b: a.get("name") == b.get("name")
    )
    _drop_if_empty(pod_spec, "volumes")


def _drop_if_empty(obj: dict[str, Any], field: str) -> None:
    if not obj[field]:
        del obj[field]


def env_var(env: dict[str, Any]) -> dict[str, Any]:
    """``apply.EnvVar``: a TrainJob's env entry as upstream copies it into the JobSet.

    ``value`` is always written (even ""), unless there is a ``valueFrom``; of a ``valueFrom``
    only ``fieldRef.fieldPath``, ``resourceFieldRef`` (with its ``containerName`` and
    ``divisor``, "" and "0" when unset), ``configMapKeyRef`` and ``secretKeyRef`` (``key``,
    ``name``, ``optional`` when set) are kept.
    """
    out: dict[str, Any] = {"name": env.get("name", "")}
    source = env.get("valueFrom")
    if not isinstance(source, dict):
        out["value"] = env.get("value", "")
        return out
    kept: dict[str, Any] = {}
    if isinstance(source.get("fieldRef"), dict):
        kept["fieldRef"] = {"fieldPath": source["fieldRef"].get("fieldPath", "")}
    if isinstance(source.get("resourceFieldRef"), dict):
        ref = source["resourceFieldRef"]
        divisor = canonical({"d": ref["divisor"]})["d"] if ref.get("divisor") is not None else "0"
        kept["resourceFieldRef"] = {
            "containerName": ref.get("containerName", ""),
            "resource": ref.get("resource", ""),
            "divisor": divisor,
        }
    for field in ("configMapKeyRef", "secretKeyRef"):
        if isinstance(source.get(field), dict):
            ref = source[field]
            kept[field] = {"key": ref.get("key", ""), "name": ref.get("name", "")}
            if ref.get("optional") is not None:
                kept[field]["optional"] = ref["optional"]
    out["valueFrom"] = kept
    return out


def env_vars(env: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    return [env_var(e) for e in env or []]


def pod_spec(rjob: dict[str, Any]) -> dict[str, Any]:
    """The pod spec of a replicated job, created on the way if missing."""
    job = rjob.setdefault("template", {}).setdefault("spec", {})
    return job.setdefault("template", {}).setdefault("spec", {})


def job_labels(rjob: dict[str, Any]) -> dict[str, str]:
    return ((rjob.get("template") or {}).get("metadata") or {}).get("labels") or {}


def ancestor(rjob: dict[str, Any]) -> str | None:
    return job_labels(rjob).get(ANCESTOR_LABEL)


def container(rjob: dict[str, Any], name: str, *, init_too: bool = False) -> dict[str, Any] | None:
    """Container ``name`` of the replicated job (``FindContainerByPodSetName`` looks at the
    init containers too, after the containers)."""
    spec = pod_spec(rjob)
    fields = ("containers", "initContainers") if init_too else ("containers",)
    return next((c for f in fields for c in spec.get(f) or [] if c.get("name") == name), None)
