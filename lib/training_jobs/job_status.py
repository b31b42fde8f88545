"""A pass's status: pods counted per replica type as training-operator counts them, replica
statuses, the job's state and final conditions, reported pod problems, the job counters. Pure."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from training_jobs import conditions as cond
from training_jobs import pod_problems as problems
from training_jobs import pods as podlib
from training_jobs.model import Job
from training_jobs.passes import Pass
from training_jobs.profiles.base import Counts, Outcome, Profile

# Pod problems remembered in the status (reportedPodProblems): far below the CRD's maxItems, so
# the status of a job with hundreds of failing pods can always be written.
MAX_REPORTED_PROBLEMS = 100


def count_pods(profile: Profile, job: Job, p: Pass, recreating: set[str]) -> dict[str, Counts]:
    """Pods by phase per replica type, as training-operator counts them."""
    counts = {g.rtype: Counts(replicas=g.replicas) for g in job.groups}
    by_label = {g.label: g for g in job.groups}
    for pod in p.pods.values():
        idx = profile.replica_index(pod)
        if idx is None or idx[0] not in by_label:
            continue
        g = by_label[idx[0]]
        c = counts[g.rtype]
        ph = podlib.phase(pod)
        if podlib.terminating(pod):
            # A pod being deleted (drain, preemption, scale-down, a lost node, kubectl delete) is
            # a replica being replaced, whatever its phase: since Kubernetes 1.27 the kubelet turns
            # it Failed (143 after SIGTERM) or Succeeded before the object goes. Upstream counted
            # it failed, which failed the job (#2072).
            c.pending += 1
        elif ph == "Running":
            c.active += 1
        elif ph == "Succeeded":
            c.succeeded += 1
        elif ph == "Failed":
            c.failed += 1
            if pod["metadata"]["name"] in recreating:
                c.restarting += 1
        elif ph == "Pending":
            c.pending += 1
    return counts


def replica_statuses(profile: Profile, job: Job, counts: dict[str, Counts], finished_ok: bool):
    out = {}
    for g in job.groups:
        c = counts[g.rtype]
        active, succeeded = c.active, c.succeeded
        if finished_ok:
            # Upstream moves active replicas to succeeded once the job succeeded.
            succeeded, active = succeeded + active, 0
        out[g.rtype] = {
            "active": active,
            "succeeded": succeeded,
            "failed": c.failed,
            "selector": profile.group_selector(job, g),
        }
    return out


def finish(job: Job, p: Pass, ctype: str, what: str, message: str) -> None:
    record_running(job, p)
    p.set_condition(job.kind, ctype, cond.TRUE, what, message)
    p.status["completionTime"] = p.status.get("completionTime") or p.now


def record_running(job: Job, p: Pass) -> None:
    """A job whose pods started and ended between two of its passes records ``Running`` before
    its final condition, as one whose passes saw them run: its history must not depend on how busy
    the operator's queue was."""
    if cond.find(p.conditions, cond.RUNNING) or cond.find(p.conditions, cond.RESTARTING):
        return
    if any(a_container_started(pod) for pod in p.pods.values()):
        p.set_condition(job.kind, cond.RUNNING, cond.TRUE, "Running", f"{job.kind} {job.name} is running.")


def a_container_started(pod: dict[str, Any]) -> bool:
    """Whether a container of the pod has run (now or before), by its container statuses."""
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        for state in (status.get("state") or {}, status.get("lastState") or {}):
            if any((state.get(phase) or {}).get("startedAt") for phase in ("running", "terminated")):
                return True
    return False


def set_state(job: Job, p: Pass, kind: str, name: str, outcome: Outcome, counts: dict[str, Counts]) -> None:
    """The condition the framework's outcome and the restarts call for."""
    if outcome.state == cond.SUCCEEDED:
        message = outcome.message or f"{kind} {job.namespace}/{name} successfully completed."
        finish(job, p, cond.SUCCEEDED, "Succeeded", message)
    elif outcome.state == cond.FAILED:
        finish(job, p, cond.FAILED, "Failed", outcome.message)
    elif any(c.restarting for c in counts.values()):
        types = ", ".join(g.rtype for g in job.groups if counts[g.rtype].restarting)
        message = f"job {name} is restarting because {types} replica(s) failed."
        p.set_condition(kind, cond.RESTARTING, cond.TRUE, "Restarting", message)
    elif outcome.state == cond.RUNNING:
        message = outcome.message or f"{kind} {name} is running."
        p.set_condition(kind, cond.RUNNING, cond.TRUE, "Running", message)


def report_pod_problems(profile: Profile, p: Pass) -> None:
    """Warnings on the job for what keeps its pods from running (#1131), each reported once."""
    pods = [p.pods[name] for name in sorted(p.pods)]
    seen = problems.prune_seen(p.old_status.get("reportedPodProblems") or [], pods)
    events, new = problems.abnormal_pod_events(
        pods, profile.default_container, seen, limit=MAX_REPORTED_PROBLEMS
    )
    p.events.extend(events)
    kept = sorted(seen | new)
    if kept or "reportedPodProblems" in p.status:
        p.status["reportedPodProblems"] = kept


def metric_counts(p: Pass) -> dict[str, int]:
    """What this pass adds to the operator's job counters (training-operator's names).

    A counter moves with the status change that records it (a condition turning True, a pod
    recreated for a restart), so the apply step counts it only once that status is written,
    and a pass that is retried counts nothing twice; ``deleted`` counts a TTL deletion.
    """
    old = p.old_status.get("conditions") or []
    counts = {
        metric: 1
        for ctype, metric in (
            (cond.CREATED, "created"),
            (cond.SUCCEEDED, "successful"),
            (cond.FAILED, "failed"),
        )
        if cond.is_true(p.conditions, ctype) and not cond.is_true(old, ctype)
    }
    if p.restarted_pods:
        counts["restarted"] = p.restarted_pods
    if p.delete_job:
        counts["deleted"] = 1
    return counts


def status_digest(status: dict[str, Any] | None) -> str:
    """A short fingerprint of a job's status, the same for equal statuses whatever the key order."""
    text = json.dumps(status or {}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]
