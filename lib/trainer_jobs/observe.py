"""What a TrainJob's pass reads, and the JobSet signature that wakes it. Pure.

The observe step (``action_plugins/trainjob_observe.py``) reads by name, as upstream's controller
does, never by label: the JobSet, the PodGroup and the ConfigMaps a TrainJob owns are named after
it. :func:`reads` says what to read before anything is known of the runtime: the runtime its
``runtimeRef`` names, the runtime snapshot, the JobSet. :func:`runtime_reads` says what the
runtime adds: MPI's hostfile, the PodGroup of its ``podGroupPolicy``. MPI's SSH Secret is never
read (the operator may only create Secrets): the apply step creates it, and a Secret that exists
answers 409.

:func:`jobset_signature` is what of a JobSet a pass acts on: its conditions, per-job counts and
``suspend``. The companion (``training_wake.jobsets``) writes it into the TrainJob's annotation
:data:`WAKE_ANNOTATION` when it changes: the runtime ignores status-only updates of owned
objects, and a JobSet's progress is exactly such an update. A pass whose cached JobSet does not
have the signature of the last wake (the runtime's cache lags the companion's watch) reads the
JobSet once more past the cache (:func:`behind_wake`), so it never plans from a JobSet older than
the change that woke it.
"""

from __future__ import annotations

from typing import Any

from trainer_jobs import api, snapshot
from trainer_jobs.podgroups import COSCHEDULING_API, VOLCANO_API
from trainer_jobs.policies.mpi import HOSTFILE_SUFFIX
from training_jobs.idle import JOBSET_SIGNATURE_ANNOTATION

WAKE_ANNOTATION = JOBSET_SIGNATURE_ANNOTATION
# The signature of a TrainJob without a JobSet (none yet, or deleted).
NO_JOBSET = "none"
# The observe step's answer when the API server could not be read (training_jobs.plan.UNAVAILABLE).
UNAVAILABLE = "unavailable"
UNAVAILABLE_RETRY_SECONDS = 5
# The runtime kinds a runtimeRef may name, and whether they are namespaced.
RUNTIME_KINDS = {api.TRAINING_RUNTIME: True, api.CLUSTER_TRAINING_RUNTIME: False}
POD_GROUP_APIS = {"coscheduling": COSCHEDULING_API, "volcano": VOLCANO_API}


def _read(key: str, api_version: str, kind: str, name: str, namespace: str | None) -> dict[str, Any]:
    return {"key": key, "apiVersion": api_version, "kind": kind, "name": name, "namespace": namespace}


def reads(trainjob: dict[str, Any]) -> dict[str, Any]:
    """The reads of a pass that need nothing but the TrainJob. ``runtime`` is None for a
    ``runtimeRef`` to a kind that is no runtime (the plan fails the TrainJob without it)."""
    meta = api.meta(trainjob)
    name, namespace = str(meta.get("name", "")), str(meta.get("namespace", ""))
    group, kind, runtime_name = api.runtime_ref(trainjob)
    runtime = None
    if group == api.GROUP and kind in RUNTIME_KINDS:
        scope = namespace if RUNTIME_KINDS[kind] else None
        runtime = _read("runtime", api.API_VERSION, kind, runtime_name, scope)
    return {
        "name": name,
        "namespace": namespace,
        "runtime": runtime,
        "snapshot": _read("configmaps", "v1", "ConfigMap", snapshot.name_of(trainjob), namespace),
        "objects": [_read("jobsets", api.JOBSET_API_VERSION, api.JOBSET, name, namespace)],
        "wake": (meta.get("annotations") or {}).get(WAKE_ANNOTATION),
    }


def runtime_reads(job_reads: dict[str, Any], runtimes: list[dict[str, Any] | None]) -> list[dict[str, Any]]:
    """What the runtimes add to :func:`reads` (the live one and the snapshot's: either may be
    the one the plan builds from): MPI's hostfile, the PodGroup of each ``podGroupPolicy``."""
    name, namespace = job_reads["name"], job_reads["namespace"]
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for runtime in runtimes:
        if not isinstance(runtime, dict):
            continue
        if api.mpi_policy(runtime) is not None:
            found[("v1", "ConfigMap")] = _read(
                "configmaps", "v1", "ConfigMap", name + HOSTFILE_SUFFIX, namespace
            )
        for policy, api_version in POD_GROUP_APIS.items():
            if policy in api.pod_group_policy(runtime):
                found[(api_version, "PodGroup")] = _read(
                    "podgroups", api_version, "PodGroup", name, namespace
                )
    return list(found.values())


def _conditions(status: dict[str, Any]) -> str:
    found = [
        f"{c.get('type', '')}={c.get('status', '')}:{c.get('reason', '')}"
        for c in status.get("conditions") or []
        if isinstance(c, dict)
    ]
    return ",".join(sorted(found))


def _jobs(status: dict[str, Any]) -> str:
    fields = ("ready", "succeeded", "failed", "active", "suspended")
    return ",".join(
        f"{j.get('name', '')}:" + "/".join(str(j.get(f, 0)) for f in fields)
        for j in status.get("replicatedJobsStatus") or []
        if isinstance(j, dict)
    )


def jobset_signature(jobset: dict[str, Any] | None) -> str:
    """What a pass reads of ``jobset`` (None: there is none), as one short string: its uid's
    start (a JobSet deleted and made again is another), ``suspend``, its conditions (type,
    status, reason) and its replicated jobs' counts."""
    if jobset is None:
        return NO_JOBSET
    status = jobset.get("status") or {}
    suspend = "suspended" if (jobset.get("spec") or {}).get("suspend") is True else "running"
    uid = str(api.meta(jobset).get("uid", ""))[:8]
    return f"{uid} {suspend} [{_conditions(status)}] [{_jobs(status)}]"


def behind_wake(job_reads: dict[str, Any], jobset: dict[str, Any] | None) -> bool:
    """Whether the JobSet a pass read is not the one of the TrainJob's last wake."""
    wake = job_reads.get("wake")
    return wake is not None and wake != jobset_signature(jobset)


def unavailable_plan() -> dict[str, Any]:
    """The pass when the API server could not be read: nothing applied, a look again soon (a
    failed task would leave the TrainJob to the runtime's doubling backoff)."""
    return {"apply": False, "requeue_after": f"{UNAVAILABLE_RETRY_SECONDS}s", "job": {}}
