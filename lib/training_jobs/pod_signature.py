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


def signature_of_pods(pods: list[dict[str, Any]]) -> str:
    """:func:`signature` of pods as read from the API server."""
    return signature({pod_key(p): pod_state(p) for p in pods})


def _pods_part(sig: str) -> str:
    return sig.rpartition(";pods=")[2]


def wake_of(cr: dict[str, Any]) -> dict[str, str] | None:
    """The job's last wake, as the role hands it to the read (plain data): ``{"signature": the
    annotation, "time": when the companion wrote it, "" if unknown}``; None if never woken."""
    meta = cr.get("metadata") or {}
    annotation = (meta.get("annotations") or {}).get(ANNOTATION)
    if not annotation:
        return None
    time = ""
    for entry in meta.get("managedFields") or []:
        if entry.get("manager") == WAKE_MANAGER and not entry.get("subresource") and entry.get("time"):
            time = str(entry["time"])
            break
    return {"signature": annotation, "time": time}


def _parse_time(value: str) -> datetime | None:
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")) if value else None
    except ValueError:
        return None


def _recent(wake: dict[str, str], now: datetime) -> bool:
    woken = _parse_time(wake.get("time") or "")
    return woken is not None and 0 <= (now - woken).total_seconds() < WAKE_FENCE_SECONDS


def disagrees_with_wake(wake: dict[str, str] | None, pods: list[dict[str, Any]], now: datetime) -> bool:
    """Whether the pods a pass read from the runtime's cache are not what a wake (:func:`wake_of`)
    less than :data:`WAKE_FENCE_SECONDS` old saw, in their states or in which pods there are.
    The read then lists them once more from the API server itself (``training_job_observe``).

    A pass reads pods from the runtime's informer cache; the wake comes from the companion's own
    watch. After an API outage the cache re-lists only when its backoff allows (up to half a
    minute): a pass woken by "every pod Succeeded" can read them still Running, or not at all
    when they were created while the cache's watch was down, decide nothing, and no later event
    comes (a pod's status change alone reconciles nothing).
    """
    if not wake or not wake.get("signature"):
        return False
    return signature_of_pods(pods) != wake["signature"] and _recent(wake, now)


def behind_wake(wake: dict[str, str] | None, pods: list[dict[str, Any]], now: datetime) -> bool:
    """Whether the pods a pass planned with are the pods a recent wake saw, in other states:
    the pass looks again after :data:`FENCE_RETRY_SECONDS`, in case even the API server's
    answer lagged (or none could be had). Other pods than the wake saw are ones the pass itself
    created, replaced or deleted since, which wake nothing by design: no reason to look again.
    After :data:`WAKE_FENCE_SECONDS` the pods read are trusted (a companion that stopped writing
    wakes costs a few looks, not a poll)."""
    if not disagrees_with_wake(wake, pods, now):
        return False
    return _pods_part(signature_of_pods(pods)) == _pods_part((wake or {}).get("signature", ""))


def pods_behind_wake(cr: dict[str, Any], pods: list[dict[str, Any]], now: datetime) -> bool:
    """:func:`behind_wake` for the job ``cr``: the pass should look again soon."""
    return behind_wake(wake_of(cr), pods, now)
