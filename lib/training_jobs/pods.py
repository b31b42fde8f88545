"""Desired pods and services of a job, and what observed pods say about their replicas."""

from __future__ import annotations

import copy
from typing import Any

from training_jobs.model import (
    ENV_ALL_CONTAINERS,
    ENV_DEFAULT_CONTAINER,
    ENV_FIRST_CONTAINER,
    RESTART_ALWAYS,
    RESTART_EXIT_CODE,
    RESTART_ON_FAILURE,
    Job,
    ReplicaGroup,
)
from training_jobs.profiles.base import Context, Profile

# Upstream's sentinel when the default container has no terminated state: treated as retryable.
UNKNOWN_EXIT_CODE = 0xBEEF


def _merge_env(existing: list[dict[str, Any]], added: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Append the contract's env; it wins over a variable of the same name in the template.

    Upstream appends its variables after the user's, and the kubelet takes the last of two
    entries with one name: ``TF_CONFIG`` and the rest always describe the job as it is. The
    user's entry is dropped rather than left first, so the pod spec says what the pod gets.
    """
    names = {e["name"] for e in added}
    return [e for e in existing if e.get("name") not in names] + added


def desired_pod(
    profile: Profile,
    job: Job,
    group: ReplicaGroup,
    index: int,
    ctx: Context,
) -> dict[str, Any]:
    template = copy.deepcopy(group.template)
    meta = template.get("metadata") or {}
    spec = template.get("spec") or {}
    labels = {**(meta.get("labels") or {}), **profile.pod_labels(job, group, index)}
    annotations = dict(meta.get("annotations") or {})
    # ExitCode is the operator's policy; the kubelet must not restart such containers itself.
    spec["restartPolicy"] = "Never" if group.restart_policy == RESTART_EXIT_CODE else group.restart_policy
    env = profile.env(job, group, index, ctx)
    env_from = profile.env_from(job, group, index, ctx)
    containers = spec.get("containers") or []
    for i, c in enumerate(containers):
        target = profile.env_target
        if (
            target == ENV_ALL_CONTAINERS
            or (target == ENV_DEFAULT_CONTAINER and c.get("name") == profile.default_container)
            or (target == ENV_FIRST_CONTAINER and i == 0)
        ):
            if env:
                c["env"] = _merge_env(list(c.get("env") or []), env)
            if env_from:
                c["envFrom"] = list(c.get("envFrom") or []) + env_from
    accelerators = (ctx.config or {}).get("accelerators") or {}
    if accelerators:
        from training_jobs.contracts import accelerators as acc

        spec = acc.apply(spec, accelerators)
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": profile.pod_name(job, group, index),
            "namespace": job.namespace,
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [job.owner_reference],
        },
        "spec": spec,
    }
    if not annotations:
        del pod["metadata"]["annotations"]
    profile.decorate_pod(job, group, index, pod, ctx)
    return pod


def desired_service(profile: Profile, job: Job, group: ReplicaGroup, index: int) -> dict[str, Any]:
    """The per-replica headless Service that gives each pod a stable DNS name."""
    selector = profile.pod_labels(job, group, index)
    selector.pop("training.kubeflow.org/job-role", None)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": profile.service_name(job, group, index),
            "namespace": job.namespace,
            "labels": dict(selector),
            "ownerReferences": [job.owner_reference],
        },
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": selector,
            "ports": profile.service_ports(job, group),
        },
    }


def phase(pod: dict[str, Any]) -> str:
    return (pod.get("status") or {}).get("phase") or "Pending"


def terminating(pod: dict[str, Any]) -> bool:
    return bool((pod.get("metadata") or {}).get("deletionTimestamp"))


def exit_code(pod: dict[str, Any], container: str) -> int:
    """Exit code of the named container, or upstream's retryable sentinel when unknown."""
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    for s in statuses:
        if s.get("name") == container:
            term = (s.get("state") or {}).get("terminated")
            if term is not None and term.get("exitCode") is not None:
                return int(term["exitCode"])
    return UNKNOWN_EXIT_CODE


def container_restarts(pod: dict[str, Any]) -> int:
    status = pod.get("status") or {}
    return sum(
        int(s.get("restartCount") or 0)
        for s in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or [])
    )


def should_recreate(group: ReplicaGroup, pod: dict[str, Any], default_container: str) -> bool:
    """Whether a Failed pod is deleted so the next pass creates it again (training-operator rules).

    OnFailure and Always: yes. ExitCode: only for retryable codes (128 and above, or unknown).
    Never: no, the job's status rules decide.
    """
    if phase(pod) != "Failed":
        return False
    if group.restart_policy in (RESTART_ON_FAILURE, RESTART_ALWAYS):
        return True
    if group.restart_policy == RESTART_EXIT_CODE:
        return exit_code(pod, default_container) >= 128
    return False


def permanent_exit(group: ReplicaGroup, pod: dict[str, Any], default_container: str) -> bool:
    """A Failed pod under ExitCode whose code (1-127) says the failure is permanent."""
    return (
        group.restart_policy == RESTART_EXIT_CODE
        and phase(pod) == "Failed"
        and exit_code(pod, default_container) < 128
    )
