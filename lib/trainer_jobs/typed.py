"""What Go's typed round trip does to a JobSet spec, which upstream's output shows.

Upstream reads the runtime into Go structs and writes the JobSet from apply configurations
built from them (``apply.FromTypedObjWithFields``). On the way:

- ``omitempty`` drops null, "", empty lists and empty maps (:func:`omit_empty`), but not a
  pointer to a struct that is set and empty, which Go writes as ``{}``: a volume's
  ``emptyDir: {}`` stays (:data:`SET_EVEN_EMPTY`);
- a struct field that is not a pointer is always written, empty or not
  (:func:`struct_defaults`): the ``metadata`` of every job and pod template, the ``resources``
  of every container, and in claim templates ``metadata``, ``spec.resources`` and ``status``
  (``{}``); a ``resourceFieldRef`` without ``divisor`` gets ``"0"``.

These were found by comparing the engine's output with upstream's own ``NewObjects`` (v2.3.0,
built from the Go module cache with a fake client) on the built-in runtimes.
"""

from __future__ import annotations

from typing import Any

CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")
# Pointers to structs whose every field may be left out, so that ``{}`` is a value a manifest
# means: the empty-directory volume source, and the security contexts.
SET_EVEN_EMPTY = frozenset({"emptyDir", "securityContext"})


def omit_empty(value: Any) -> Any:
    """``value`` as Go's ``omitempty`` would write it back: no null, "", [] or {} anywhere, except
    a struct pointer of :data:`SET_EVEN_EMPTY` that is set."""
    if isinstance(value, dict):
        kept = {k: omit_empty(v) for k, v in value.items()}
        return {
            k: v for k, v in kept.items() if not _empty(v) or (k in SET_EVEN_EMPTY and isinstance(v, dict))
        }
    if isinstance(value, list):
        return [omit_empty(v) for v in value]
    return value


def _empty(value: Any) -> bool:
    return value is None or (isinstance(value, (str, list, dict)) and not value)


def _claim_template(template: dict[str, Any], *, with_status: bool) -> None:
    template.setdefault("metadata", {})
    spec = template.setdefault("spec", {})
    spec.setdefault("resources", {})
    if with_status:
        template.setdefault("status", {})


def _container(container: dict[str, Any]) -> None:
    container.setdefault("resources", {})
    for env in container.get("env") or []:
        ref = (env.get("valueFrom") or {}).get("resourceFieldRef")
        if isinstance(ref, dict):
            ref.setdefault("divisor", "0")


def _pod_spec(pod_spec: dict[str, Any]) -> None:
    for field in CONTAINER_LISTS:
        for container in pod_spec.get(field) or []:
            _container(container)
    for volume in pod_spec.get("volumes") or []:
        claim = (volume.get("ephemeral") or {}).get("volumeClaimTemplate")
        if isinstance(claim, dict):
            _claim_template(claim, with_status=False)


def struct_defaults(jobset_spec: dict[str, Any]) -> None:
    """Add, in place, the empty structs Go writes (see the module's docstring)."""
    for rjob in jobset_spec.get("replicatedJobs") or []:
        job_template = rjob.setdefault("template", {})
        job_template.setdefault("metadata", {})
        pod_template = job_template.setdefault("spec", {}).setdefault("template", {})
        pod_template.setdefault("metadata", {})
        _pod_spec(pod_template.setdefault("spec", {}))
    for policy in jobset_spec.get("volumeClaimPolicies") or []:
        for template in policy.get("templates") or []:
            _claim_template(template, with_status=True)
