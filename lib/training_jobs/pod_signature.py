"""The signature of a job's pods: what the companion's wake watcher writes into the job's
annotation :data:`ANNOTATION` (see :mod:`training_wake.signature` for why), and what a pass
compares with the pods it read (:func:`pods_behind_wake`). Pure.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from datetime import datetime
from typing import Any

ANNOTATION = "training.ato.dev/pod-signature"
# The companion's field manager (its user agent): its managedFields entry on a job dates the
# last wake, the only field it writes.
WAKE_MANAGER = "training-companion"
# How long after a wake a pass distrusts pods that disagree with it, and how soon it looks again.
WAKE_FENCE_SECONDS = 60
FENCE_RETRY_SECONDS = 5
# Waiting reasons of a container that is simply starting: not worth a reconcile.
BENIGN_WAITING = {"ContainerCreating", "PodInitializing"}

PodState = tuple[str, int, tuple[str, ...]]  # (phase, container restarts, problems)
AS_CREATED: PodState = ("Pending", 0, ())


def pod_key(pod: dict[str, Any]) -> str:
    """A pod as the signature names it: name and uid, so a pod replaced under the same name
    (restartPolicy ExitCode, an eviction) counts as another pod."""
    meta = pod.get("metadata") or {}
    name, uid = meta.get("name", ""), meta.get("uid")
    return f"{name}/{uid}" if uid else name


def pod_state(pod: dict[str, Any]) -> PodState:
    """(phase, container restarts, problems) of one pod."""
    status = pod.get("status") or {}
    restarts = 0
    problems = []
    for c in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or []):
        restarts += int(c.get("restartCount") or 0)
        reason = ((c.get("state") or {}).get("waiting") or {}).get("reason")
        if reason and reason not in BENIGN_WAITING:
            problems.append(reason)
    for cond in status.get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            problems.append(cond.get("reason") or "Unschedulable")
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        # Being deleted: the plan looks again when the grace period ends, and force-deletes a pod
        # stuck on a lost node (#2072); nothing else would reconcile the job for it.
        problems.append("Terminating")
    return status.get("phase") or "Pending", restarts, tuple(sorted(problems))


def signature(pods: dict[str, PodState]) -> str:
    """One job's pods (state by :func:`pod_key`) as a short stable string, e.g.
    ``Running=3,Succeeded=2,restarts=1;pods=1f0c9a2e`` (the last part names the pods)."""
    counts: Counter[str] = Counter()
    restarts = 0
    for phase, n, problems in pods.values():
        counts[phase] += 1
        restarts += n
        for p in problems:
            counts[p] += 1
    parts = [f"{k}={v}" for k, v in sorted(counts.items())]
    if restarts:
        parts.append(f"restarts={restarts}")
    if not pods:
        return ""
    names = hashlib.blake2s("\n".join(sorted(pods)).encode(), digest_size=4).hexdigest()
    return f"{','.join(parts)};pods={names}"


def _pods_part(sig: str) -> str:
    return sig.rpartition(";pods=")[2]


def _wake_time(cr: dict[str, Any]) -> datetime | None:
    for entry in (cr.get("metadata") or {}).get("managedFields") or []:
        if entry.get("manager") == WAKE_MANAGER and not entry.get("subresource") and entry.get("time"):
            try:
                return datetime.fromisoformat(str(entry["time"]).replace("Z", "+00:00"))
            except ValueError:
                return None
    return None


def pods_behind_wake(cr: dict[str, Any], pods: list[dict[str, Any]], now: datetime) -> bool:
    """Whether the pods a pass read disagree with the wake that started it, recently enough
    that the pass should look again soon (after :data:`FENCE_RETRY_SECONDS`).

    The pass reads pods from the runtime's informer cache; the wake comes from the companion's
    own watch. After an API outage the cache re-lists only when its backoff allows (up to half a
    minute), so a pass woken by "every pod Succeeded" can still read them Running, decide
    nothing, and no later event comes: a pod's status change alone reconciles nothing. Within
    :data:`WAKE_FENCE_SECONDS` of the wake such a pass looks again, if the pods are the ones
    the wake saw; after that the cache is trusted (a companion that stopped writing wakes costs
    a few looks, not a poll).
    """
    annotation = ((cr.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION)
    if not annotation:
        return False
    seen = signature({pod_key(p): pod_state(p) for p in pods})
    if seen == annotation or _pods_part(seen) != _pods_part(annotation):
        # Other pods than the wake saw: ones the pass itself created, replaced or deleted, which
        # wake nothing by design. Only the same pods in other states mean a lagging cache.
        return False
    woken = _wake_time(cr)
    return woken is not None and 0 <= (now - woken).total_seconds() < WAKE_FENCE_SECONDS
