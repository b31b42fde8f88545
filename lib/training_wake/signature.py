"""What about a job's pods should wake the job up: the pure half of the wake watcher.

ansible-operator never reconciles a job because one of its pods changed phase: its watch on
owned objects drops updates that touch only ``status`` (operator-lib's ``DependentPredicate``),
and a pod finishing is exactly such an update. Polling every active job every few seconds
covers it, but each poll is a whole Ansible run (about a CPU second), so polling alone cannot
keep up with more than a handful of jobs on a small machine.

The wake watcher (:mod:`training_wake.watcher`) watches the operator's pods and, when the
*signature* of a job's pods changes, writes it into the job's annotation :data:`ANNOTATION`.
The job kinds are watched with ``watchAnnotationsChanges: true`` (``watches.yaml``), so that
write is what triggers the reconcile; every decision stays in the reconcile's plan.

The signature holds what the plan acts on and a pod's phase alone would miss: phases, container
restarts (backoffLimit counts in-place restarts), pods the scheduler cannot place, containers
waiting for a reason worth reporting (image pull errors, crash loops) and pods being deleted,
and which pods they are: a scale-down and a scale-up in one edit can leave every count as it
was while the job's status still lists the pods it removed.
A pod's creation wakes nothing (the reconcile created it), nor does its disappearance: the plan
that deleted a pod asks for its own next pass.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from training_jobs.conditions import foreign_types
from training_jobs.idle import IDLE_LABEL
from training_jobs.plan import FINISHED_LABEL, OWN_MANAGERS

# Re-exported: the watcher and its tests know the signature by this module.
from training_jobs.pod_signature import ANNOTATION as ANNOTATION
from training_jobs.pod_signature import AS_CREATED as AS_CREATED
from training_jobs.pod_signature import PodState as PodState
from training_jobs.pod_signature import pod_key as pod_key
from training_jobs.pod_signature import pod_state as pod_state
from training_jobs.pod_signature import signature as signature
from training_jobs.registry import BY_KIND, PROFILES

# The job kinds, from the framework profiles: a fifth framework is woken without a change here.
JOB_KINDS = frozenset((p.api_version, p.kind) for p in PROFILES.values())
# Label selectors ("key exists") that together match every pod of every kind.
POD_SELECTORS = tuple(sorted({p.wake_label for p in PROFILES.values()}))
# The job kinds whose pods each selector matches (Caffe2 pods carry caffe2-operator's labels).
KINDS_BY_SELECTOR = {
    selector: frozenset((p.api_version, p.kind) for p in PROFILES.values() if p.wake_label == selector)
    for selector in POD_SELECTORS
}
JobKey = tuple[str, str, str, str]  # (apiVersion, kind, namespace, name)


def job_of(pod: dict[str, Any]) -> JobKey | None:
    """The job that controls ``pod``, if it is one of the operator's kinds."""
    meta = pod.get("metadata") or {}
    for ref in meta.get("ownerReferences") or []:
        if ref.get("controller") and (ref.get("apiVersion"), ref.get("kind")) in JOB_KINDS:
            return ref["apiVersion"], ref["kind"], meta.get("namespace", ""), ref["name"]
    return None


class PodIndex:
    """The watcher's memory: every watched pod's state, by job. Pure; the watcher feeds it.

    :meth:`observe` answers whether the event changed the signature of an existing pod's job;
    the signature itself comes from :meth:`signature_of`.
    """

    def __init__(self) -> None:
        self.pods: dict[JobKey, dict[str, PodState]] = {}

    def replace(self, pods: list[dict[str, Any]], kinds: frozenset[tuple[str, str]]) -> None:
        """Start over from a full list of the pods of ``kinds``' jobs (after a watch error, a
        restart or a periodic re-list): pods that went meanwhile are forgotten. Wakes nothing by
        itself; :func:`stale_jobs` says which jobs missed a change."""
        self.pods = {job: pods for job, pods in self.pods.items() if job[:2] not in kinds}
        for pod in pods:
            self.observe("ADDED", pod)

    def observe(self, event_type: str, pod: dict[str, Any]) -> JobKey | None:
        """Record a watch event; the job to wake, or ``None``."""
        job = job_of(pod)
        if job is None:
            return None
        name = pod_key(pod)
        pods = self.pods.setdefault(job, {})
        if event_type == "DELETED":
            pods.pop(name, None)
            if not pods:
                self.pods.pop(job, None)
            return None
        state = pod_state(pod)
        before = pods.get(name)
        pods[name] = state
        if event_type == "ADDED" or before is None or before == state:
            return None
        return job

    def signature_of(self, job: JobKey) -> str:
        return signature(self.pods.get(job, {}))


class JobSeen(NamedTuple):
    """What a full list of the jobs says of one job."""

    annotation: str | None  # its ANNOTATION; None when never written
    ours_to_run: bool  # not labelled finished, and no other manager (runPolicy.managedBy) owns it
    # Condition types on its status that are not Kubeflow's; only for a job whose status the
    # operator writes (another manager's status is that manager's).
    foreign: tuple[str, ...] = ()
    # Its idle label (training_jobs.idle), if it has one.
    idle: str | None = None
    # The names of the pods its spec asks for (none while it is suspended or not the operator's).
    wanted: frozenset[str] = frozenset()


def job_seen(api_version: str, kind: str, job: dict[str, Any]) -> JobSeen:
    meta = job.get("metadata") or {}
    manager = BY_KIND[(api_version, kind)].run_policy(job.get("spec") or {}).get("managedBy") or ""
    ours = manager in OWN_MANAGERS
    conditions = (job.get("status") or {}).get("conditions") or []
    to_run = FINISHED_LABEL not in (meta.get("labels") or {}) and ours
    return JobSeen(
        (meta.get("annotations") or {}).get(ANNOTATION),
        to_run,
        tuple(foreign_types(conditions)) if ours else (),
        (meta.get("labels") or {}).get(IDLE_LABEL),
        wanted_pods(api_version, kind, job) if to_run else frozenset(),
    )


def wanted_pods(api_version: str, kind: str, job: dict[str, Any]) -> frozenset[str]:
    """The names of the pods ``job``'s spec asks for; none while it is suspended, and none for a
    spec the engine refuses (its pass fails the job instead)."""
    profile = BY_KIND[(api_version, kind)]
    try:
        parsed = profile.job(job)
    except (ValueError, TypeError, KeyError, AttributeError):
        return frozenset()
    if parsed.run_policy.get("suspend"):
        return frozenset()
    return frozenset(profile.pod_name(parsed, g, i) for g in parsed.groups for i in range(g.replicas))


def foreign_condition_jobs(
    jobs: dict[JobKey, JobSeen], kinds: frozenset[tuple[str, str]]
) -> dict[JobKey, tuple[str, ...]]:
    """The jobs of ``kinds`` whose status holds a condition type that is not Kubeflow's, with
    those types: what ansible-operator writes when a run fails (``training_jobs.conditions.
    kubeflow_only``), which only a pass of the job takes out again. A job the runtime no longer
    watches (labelled finished or idle) gets no pass by itself, so the watcher wakes it."""
    return {job: seen.foreign for job, seen in jobs.items() if job[:2] in kinds and seen.foreign}


def podless_jobs(
    index: PodIndex, jobs: dict[JobKey, JobSeen], kinds: frozenset[tuple[str, str]]
) -> set[JobKey]:
    """After a list that follows a watch error (the API server was unreachable): the jobs of
    ``kinds`` that are still the operator's to run, have no pods and were never woken.

    The runtime retries a pass that could not reach the API server with a per-job backoff that
    doubles up to minutes, and only a change to the job cuts it short. :func:`stale_jobs` wakes
    the jobs whose pods changed; these are the others that may be waiting for a pass: created just
    before the outage, or between two passes that create their pods (a PaddleJob's ConfigMap
    comes first). A wake writes the (empty) signature, so each is woken once.
    """
    return {
        job
        for job, seen in jobs.items()
        if job[:2] in kinds and seen.ours_to_run and seen.annotation is None and not index.pods.get(job)
    }


def short_of_pods(
    index: PodIndex, jobs: dict[JobKey, JobSeen], kinds: frozenset[tuple[str, str]]
) -> set[JobKey]:
    """After a full list: the jobs of ``kinds`` never woken whose pods are all as they were created,
    but fewer than their spec asks for (:attr:`JobSeen.wanted`).

    A pod's removal wakes nothing while the watcher runs: its deletion marks it first, and that
    change does. A pending pod deleted while the watcher was down (a companion restart) leaves
    no trace but its absence, and :func:`stale_jobs` sees nothing behind: the rest are as created
    and the job was never woken. Waking these costs one pass for a job whose pass holds pods back
    on purpose (a gang not admitted yet, a PaddleJob's ConfigMap first): the wake writes the
    signature, so each is woken once.
    """
    short = set()
    for job, seen in jobs.items():
        if job[:2] not in kinds or not seen.ours_to_run or seen.annotation is not None or not seen.wanted:
            continue
        pods = index.pods.get(job, {})
        if any(state != AS_CREATED for state in pods.values()):
            continue  # stale_jobs decides
        if seen.wanted - {key.split("/", 1)[0] for key in pods}:
            short.add(job)
    return short


def stale_jobs(
    index: PodIndex, annotations: dict[JobKey, str | None], kinds: frozenset[tuple[str, str]]
) -> tuple[set[JobKey], dict[JobKey, str]]:
    """After a full list: the jobs whose annotation does not say what their pods are now (a
    change the watcher missed while it, or the API server, was down) and, for the others, the
    signature they already carry.

    ``annotations`` maps every existing job of ``kinds`` to its :data:`ANNOTATION` (None when
    unset); a job that is gone, or whose pods are not listed, is nobody's business here. A job
    never woken whose pods are all as they were created (Pending, nothing to report) has missed
    nothing: the pass that created them asked for its own next pass.
    """
    stale, current = set(), {}
    for job, pods in index.pods.items():
        if job[:2] not in kinds or job not in annotations:
            continue
        sig = index.signature_of(job)
        if annotations[job] == sig:
            current[job] = sig
        elif annotations[job] is not None or any(state != AS_CREATED for state in pods.values()):
            stale.add(job)
    return stale, current
