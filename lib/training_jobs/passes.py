"""One reconcile pass's state (:class:`Pass`): what the pass read, what it decided so far, and the
time helpers every part of the pass uses. Pure; :func:`training_jobs.plan.plan` drives it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from training_jobs import conditions as cond
from training_jobs import pod_problems as problems
from training_jobs.model import ObjectRef, PlanEvent

STATUS_TIMES = ("startTime", "completionTime", "lastReconcileTime")


def parse_time(value: str | None) -> datetime | None:
    """An RFC 3339 time, or None when unset or malformed (a status someone else wrote)."""
    if not value:
        return None
    try:
        moment = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def fmt_time(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def object_ref(obj: dict[str, Any]) -> ObjectRef:
    meta = obj.get("metadata") or {}
    return {
        "apiVersion": obj.get("apiVersion", "v1"),
        "kind": obj["kind"],
        "name": meta["name"],
        "namespace": meta.get("namespace"),
    }


def owned_or_orphaned(observed: dict[str, Any], uid: str | None) -> dict[str, Any]:
    """The observed objects minus those another controller owns.

    The observe step lists by labels, and two kinds may label alike: training-operator's and
    paddle-operator's PaddleJob both say ``operator-name: paddlejob-controller``, so the pods of
    a same-named job of the other kind must not count as this job's replicas.
    """
    if not uid:
        return observed

    def ours(obj: dict[str, Any]) -> bool:
        refs = [r for r in (obj.get("metadata") or {}).get("ownerReferences") or [] if r.get("controller")]
        return not refs or any(r.get("uid") == uid for r in refs)

    return {k: [o for o in v if ours(o)] if isinstance(v, list) else v for k, v in observed.items()}


class Pass:
    """State of one reconcile pass; :func:`plan` drives it."""

    def __init__(self, cr, observed, config, now):
        self.cr = cr
        self.config = config or {}
        self.now_dt = parse_time(now) or datetime.now(UTC)
        self.now = fmt_time(self.now_dt)
        observed = owned_or_orphaned(observed or {}, (cr.get("metadata") or {}).get("uid"))
        self.pods = {p["metadata"]["name"]: p for p in observed.get("pods") or []}
        self.services = {s["metadata"]["name"]: s for s in observed.get("services") or []}
        self.extras = {
            (o.get("kind"), o["metadata"]["name"]): o for objs in observed.values() for o in objs or []
        }
        self.pod_groups = {o["metadata"]["name"]: o for o in observed.get("podgroups") or []}
        self.priority_classes = {
            o["metadata"]["name"]: o.get("value", 0) for o in observed.get("priorityclasses") or []
        }
        self.create: list[dict[str, Any]] = []
        self.update: list[dict[str, Any]] = []
        self.delete: list[ObjectRef] = []
        self.events: list[PlanEvent] = []
        self.requeue: list[float] = []
        self.delete_job = False
        # Failed pods deleted to be recreated; dropped again if the job finishes in this pass.
        self.recreating: list[ObjectRef] = []
        self.old_status = dict(cr.get("status") or {})
        self.status = dict(self.old_status.items())
        for key in STATUS_TIMES:
            # A malformed time is dropped and set again, instead of failing every pass.
            if key in self.status and parse_time(self.status[key]) is None:
                del self.status[key]
        # What the runtime wrote onto the status when a run failed is undone (cond.kubeflow_only);
        # a changed list makes the status differ, so this pass writes it.
        self.conditions = cond.kubeflow_only(self.status.get("conditions") or [], cr.get("kind") or "")
        # Restarts of pods that are gone: kept in the status so backoffLimit sees every one.
        self.restart_count = int(self.status.get("restartCount") or 0)
        self.evictions = int(self.status.get("evictionCount") or 0)
        # UIDs of pods already counted as a restart or an eviction: a stale pod cache shows a
        # deleted pod again, and it must not be counted twice.
        self.counted_pods = set(self.status.get("countedPods") or [])
        # Failed pods deleted in this pass to be recreated under their restart policy.
        self.restarted_pods = 0
        # Replica types with a pod that exited with a permanent code under ExitCode.
        self.permanent_failures: list[str] = []
        # The job is final with nothing pending: the apply step labels it FINISHED_LABEL.
        self.final = False
        # Whether an unfinished job with nothing pending may be labelled idle (training_jobs.idle).
        self.may_idle = True
        # Nodes of terminating pods, by name; None when the observe step did not read them.
        nodes = observed.get("nodes")
        self.nodes = None if nodes is None else {n["metadata"]["name"]: n for n in nodes}

    # --- helpers ---------------------------------------------------------------------------
    def count_once(self, pod: dict[str, Any]) -> bool:
        """Whether this failed pod is counted now: False if an earlier pass already did."""
        uid = (pod.get("metadata") or {}).get("uid")
        if not uid:
            return True
        if uid in self.counted_pods:
            return False
        self.counted_pods.add(uid)
        return True

    def keep_counted_pods(self) -> None:
        """Keep only UIDs of pods still observed, so the list stays as short as the failures."""
        alive = {(pod.get("metadata") or {}).get("uid") for pod in self.pods.values()}
        kept = sorted(self.counted_pods & alive)
        if kept or "countedPods" in self.status:
            self.status["countedPods"] = kept

    def node_state(self, pod: dict[str, Any]) -> str | None:
        """Ready, NotReady or Gone for the pod's node; None when nodes were not read."""
        if self.nodes is None:
            return None
        node = (pod.get("spec") or {}).get("nodeName")
        return problems.node_state(self.nodes.get(node)) if node else None

    def event(self, etype: str, why: str, message: str, about: str = "") -> None:
        """Record an event on the job. ``about`` ("Kind/name") ties it to a create or delete, so
        the apply step only records it when that write really happened."""
        event: PlanEvent = {"type": etype, "reason": why, "message": message}
        if about:
            event["about"] = about
        self.events.append(event)

    def set_condition(self, kind: str, ctype: str, status: str, what: str, message: str) -> None:
        before = cond.current_state(self.conditions), cond.find(self.conditions, ctype)
        self.conditions = cond.set_condition(
            self.conditions, ctype, status, cond.reason(kind, what), message, self.now
        )
        after = cond.find(self.conditions, ctype)
        if status == cond.TRUE and after != before[1] and ctype != cond.CREATED:
            etype = "Warning" if ctype in (cond.FAILED, cond.RESTARTING) else "Normal"
            self.event(etype, cond.reason(kind, what), message)

    def delete_obj(self, obj: dict[str, Any], force: bool = False) -> None:
        ref = object_ref(obj)
        if force:
            ref["force"] = True
        if ref not in self.delete:
            self.delete.append(ref)
            verb = "SuccessfulDelete" + ref["kind"]
            about = f"{ref['kind']}/{ref['name']}"
            self.event("Normal", verb, f"Deleted {ref['kind'].lower()}: {ref['name']}", about)

    def create_obj(self, obj: dict[str, Any]) -> None:
        self.create.append(obj)
        name = obj["metadata"]["name"]
        self.event(
            "Normal",
            "SuccessfulCreate" + obj["kind"],
            f"Created {obj['kind'].lower()}: {name}",
            f"{obj['kind']}/{name}",
        )

    def requeue_in(self, seconds: float) -> None:
        self.requeue.append(max(1.0, seconds))
