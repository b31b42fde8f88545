"""What is wrong with a job's pods, said on the job - once per problem, not on every pass.

Upstream training-operator answers issue #1131 ("Surface Pod and other Errors that Prevent TFJob
from starting") with ``RecordAbnormalPods`` (``pkg/core/job.go``) and the ``ExitedWithCode`` event
of ``ReconcilePods``; both record the same Warning again on every reconcile. Here each problem is
reported once: the engine keeps the keys of what it already reported (``seen``) and passes them
back in; every function returns the events plus the keys it adds.

Key format (strings, so the set can live in the job's status or an annotation as a list):

- ``<pod uid>/<container>/<reason>`` for a container's problem, e.g.
  ``6c1d.../tensorflow/ImagePullBackOff``;
- ``<pod uid>/-/<reason>`` for a pod-level problem (``Unschedulable``, ``Evicted``): ``-`` is no
  valid container name;
- ``<pod uid>/<container>/ExitedWithCode/<restartCount>`` for an exit, so each in-place restart's
  exit is reported once too.

A recreated replica is a new pod with a new uid, so its problems are reported afresh;
:func:`prune_seen` drops the keys of pods that are gone. A pod without a uid (never from the API
server) is keyed by its name instead.

It also decides two things the restart logic needs: :func:`lost_pod` (issue #2072, a pod stuck
Terminating on a lost node) and :func:`evicted` (issue #1570, system failures are not the
training's failures).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from training_jobs.model import PlanEvent

# Waiting reasons of a container that is simply starting: not a problem.
STARTING_REASONS = frozenset({"", "ContainerCreating", "PodInitializing"})
ACTIVE_PHASES = ("Pending", "Running")
POD_LEVEL = "-"
# events.k8s.io/v1 refuses a note longer than 1 kB; core/v1 events are shown truncated anyway.
MAX_MESSAGE = 1000


def _parse_time(value: Any) -> datetime | None:
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    return datetime.fromisoformat(str(value).replace("Z", "+00:00"))


def _meta(pod: dict[str, Any]) -> dict[str, Any]:
    return pod.get("metadata") or {}


def _status(pod: dict[str, Any]) -> dict[str, Any]:
    return pod.get("status") or {}


def _phase(pod: dict[str, Any]) -> str:
    return _status(pod).get("phase") or "Pending"


def _pod_id(pod: dict[str, Any]) -> str:
    meta = _meta(pod)
    return meta.get("uid") or f"name:{meta.get('name', '')}"


def pod_key(pod: dict[str, Any], container: str, reason: str) -> str:
    """The ``seen`` key of one problem of one pod (see the module docstring for the format)."""
    return f"{_pod_id(pod)}/{container or POD_LEVEL}/{reason}"


def _where(pod: dict[str, Any], container: str = "") -> str:
    meta = _meta(pod)
    where = f"Pod {meta.get('namespace', '')}/{meta.get('name', '')}"
    return f"{where} container {container}" if container else where


def _message(*parts: str) -> str:
    text = ": ".join(p for p in parts if p)
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 3] + "..."


def _condition(pod: dict[str, Any], ctype: str) -> dict[str, Any] | None:
    for c in _status(pod).get("conditions") or []:
        if c.get("type") == ctype:
            return c
    return None


def evicted(pod: dict[str, Any]) -> bool:
    """Whether the pod failed for a system reason, not because the training failed.

    Phase ``Failed`` with ``status.reason: Evicted`` (kubelet node-pressure eviction), or a
    ``DisruptionTarget=True`` condition (preemption, taint eviction, API eviction, node shutdown,
    pod GC). Upstream #1570 / PR #1572: such pods are recreated whatever the restartPolicy (also
    ``Never`` and ``ExitCode``) and do not count as the job's failure.
    """
    if _phase(pod) == "Failed" and _status(pod).get("reason") == "Evicted":
        return True
    c = _condition(pod, "DisruptionTarget")
    return c is not None and c.get("status") == "True"


NODE_READY, NODE_NOT_READY, NODE_GONE = "Ready", "NotReady", "Gone"


def node_state(node: dict[str, Any] | None) -> str:
    """``Ready``, ``NotReady`` or ``Gone`` (``node`` is None: the object does not exist)."""
    if node is None:
        return NODE_GONE
    ready = _condition(node, "Ready")
    return NODE_READY if ready and ready.get("status") == "True" else NODE_NOT_READY


def lost_pod(pod: dict[str, Any], now: datetime | str, grace_seconds: float, node: str | None) -> bool:
    """Whether the pod will never go away by itself, so the engine force-deletes it (issue #2072).

    ``node`` is the :func:`node_state` of the pod's node, or None when it was not read.

    - The node is gone: a bound pod that is not Succeeded or Failed will never run or finish.
    - The node is NotReady and the pod is Terminating past ``deletionTimestamp + grace_seconds``:
      the API server sets ``deletionTimestamp`` to the deletion request time *plus*
      ``deletionGracePeriodSeconds``, so that is already the end of the pod's own grace period;
      ``grace_seconds`` is the extra time a kubelet gets to confirm. Nothing confirms on a lost
      node, and upstream's job stays ``Restarting`` forever.
    - A pod on a Ready node is never lost, however long it takes: its kubelet is still stopping
      it, and a force delete would let the replacement run beside the old containers.

    The engine deletes such a pod with ``gracePeriodSeconds: 0`` so the replica can be recreated.
    """
    bound = bool((pod.get("spec") or {}).get("nodeName"))
    if not bound or node not in (NODE_GONE, NODE_NOT_READY):
        return False
    if node == NODE_GONE and (
        _phase(pod) not in ("Succeeded", "Failed") or _meta(pod).get("deletionTimestamp")
    ):
        return True
    deleting = _parse_time(_meta(pod).get("deletionTimestamp"))
    current = _parse_time(now)
    if deleting is None or current is None:
        return False
    return current > deleting + timedelta(seconds=float(grace_seconds or 0))


def _container_events(pod: dict[str, Any]) -> Iterable[tuple[str, str, str]]:
    """(container, reason, message) of every abnormal container state of an active pod."""
    status = _status(pod)
    running = _phase(pod) == "Running"
    statuses = [(True, s) for s in status.get("initContainerStatuses") or []]
    statuses += [(False, s) for s in status.get("containerStatuses") or []]
    for is_init, s in statuses:
        name = s.get("name") or ""
        state = s.get("state") or {}
        waiting = state.get("waiting")
        if waiting is not None and (waiting.get("reason") or "") not in STARTING_REASONS:
            reason = waiting["reason"]
            detail = waiting.get("message") or ""
            last = (s.get("lastState") or {}).get("terminated")
            if reason == "CrashLoopBackOff" and last:
                ended = f"last exit code {last.get('exitCode')}"
                if last.get("reason"):
                    ended += f", {last['reason']}"
                detail = f"{detail} ({ended})" if detail else ended
            yield name, reason, _message(_where(pod, name), reason, detail)
        term = state.get("terminated")
        if term is not None and int(term.get("exitCode") or 0) != 0 and (running or is_init):
            reason = term.get("reason") or "Error"
            detail = f"exit code {term.get('exitCode')}"
            if term.get("message"):
                detail += f": {term['message']}"
            yield name, reason, _message(_where(pod, name), reason, detail)


def abnormal_pod_events(
    pods: Iterable[dict[str, Any]], default_container: str, seen: Iterable[str], limit: int | None = None
) -> tuple[list[PlanEvent], set[str]]:
    """Warnings for what keeps a job's pods from running (upstream ``RecordAbnormalPods``, #1131).

    For each Pending or Running pod that is not being deleted:

    - a container (init or regular) waiting for a reason other than ``ContainerCreating`` /
      ``PodInitializing`` (``ImagePullBackOff``, ``ErrImagePull``, ``CrashLoopBackOff`` - with the
      last exit code and reason, e.g. ``OOMKilled`` -, ``CreateContainerConfigError``, ...): the
      event's reason is the waiting reason, its message
      ``Pod <ns>/<name> container <c>: <reason>: <message>``;
    - a container terminated with a non-zero exit code in a Running pod, or an init container that
      did in a Pending pod: reason from ``terminated.reason`` (``Error`` when empty);
    - ``PodScheduled=False`` with reason ``Unschedulable``: reason ``Unschedulable``, the
      scheduler's message;

    and for every pod that :func:`evicted` says was evicted or disrupted: reason ``Evicted``.

    Differences from upstream: each problem once (``seen``); init containers are checked even when
    regular container statuses exist (upstream skipped them, hiding a crash-looping init
    container); a waiting reason is reported even without a message; of the pod conditions only
    ``Unschedulable`` is reported (upstream reported the latest non-True condition, mostly the
    noise ``ContainersNotReady``). ``default_container`` is accepted for symmetry with
    :func:`exit_code_events`; all containers are checked.

    ``limit`` bounds ``seen`` plus the new keys: the set lives in the job's status, which must
    stay small enough to be written (a 500-worker job with a missing image has 500 problems).
    Problems beyond it are not reported until reported ones go with their pods; the first ones
    already tell the user what is wrong.

    Returns the events and the keys to add to ``seen``.
    """
    known = set(seen or ())
    events: list[PlanEvent] = []
    added: set[str] = set()
    for pod in pods or ():
        for container, reason, message in _pod_problems(pod):
            key = pod_key(pod, container, reason)
            if key in known or key in added:
                continue
            if limit is not None and len(known) + len(added) >= limit:
                continue
            added.add(key)
            events.append({"type": "Warning", "reason": reason, "message": message})
    return events, added


def _pod_problems(pod: dict[str, Any]) -> Iterable[tuple[str, str, str]]:
    """(container, reason, message) of what keeps one pod from running; see abnormal_pod_events."""
    if evicted(pod):
        status = _status(pod)
        disruption = _condition(pod, "DisruptionTarget") or {}
        detail = status.get("message") or disruption.get("message") or ""
        cause = disruption.get("reason") if not status.get("message") else ""
        yield "", "Evicted", _message(_where(pod), "Evicted", cause or "", detail)
        return
    if _phase(pod) not in ACTIVE_PHASES or _meta(pod).get("deletionTimestamp"):
        return
    yield from _container_events(pod)
    scheduled = _condition(pod, "PodScheduled")
    if scheduled and scheduled.get("status") == "False" and scheduled.get("reason") == "Unschedulable":
        yield "", "Unschedulable", _message(_where(pod), "Unschedulable", scheduled.get("message") or "")


def exit_code_events(
    pods: Iterable[dict[str, Any]], default_container: str, seen: Iterable[str]
) -> tuple[list[PlanEvent], set[str]]:
    """Normal ``ExitedWithCode`` events for terminated default containers (upstream ``ReconcilePods``).

    Message as upstream: ``Pod: <ns>.<name> exited with code <n>``. Upstream records it on every
    reconcile while the container stays terminated; here once per exit (pod uid and the
    container's restart count). Returns the events and the keys to add to ``seen``.
    """
    known = set(seen or ())
    events: list[PlanEvent] = []
    added: set[str] = set()
    for pod in pods or ():
        for s in _status(pod).get("containerStatuses") or []:
            if s.get("name") != default_container:
                continue
            term = (s.get("state") or {}).get("terminated")
            if term is None or term.get("exitCode") is None:
                continue
            key = f"{pod_key(pod, default_container, 'ExitedWithCode')}/{int(s.get('restartCount') or 0)}"
            if key in known or key in added:
                continue
            added.add(key)
            meta = _meta(pod)
            events.append(
                {
                    "type": "Normal",
                    "reason": "ExitedWithCode",
                    "message": f"Pod: {meta.get('namespace', '')}.{meta.get('name', '')} exited with code {int(term['exitCode'])}",
                }
            )
    return events, added


def prune_seen(seen: Iterable[str], pods: Iterable[dict[str, Any]]) -> set[str]:
    """The keys of ``seen`` whose pod still exists, so the set does not grow without bound."""
    alive = {_pod_id(p) for p in pods or ()}
    return {k for k in seen or () if k.split("/", 1)[0] in alive}
