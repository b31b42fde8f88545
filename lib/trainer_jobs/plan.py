"""The TrainJob reconcile engine: from a TrainJob, its runtime and what exists to what to do.

:func:`plan` is pure, like ``training_jobs.plan.plan`` for the v1 kinds: the role passes the
TrainJob, the runtime its ``runtimeRef`` names (None when there is none), the objects it
observed and the time, and gets back the objects to create, re-apply and delete, the new status,
the events and when to look again. One pass, as Trainer v2.3's ``trainjob`` controller
(``pkg/controller/trainjob_controller.go``), with its known bugs left out:

1. ``managedBy`` another controller (MultiKueue): nothing at all;
2. the status: ``Suspended``, then ``Complete``/``Failed`` and ``jobsStatus`` from the JobSet
   (:mod:`trainer_jobs.status`);
3. a finished TrainJob (Complete or Failed True) keeps its status and gets nothing new: when its
   JobSet is deleted (its TTL, a user), upstream removes the Failed condition and builds a new
   JobSet, which starts the training again and resets ``maxRestarts`` (trainer#3779, #3737,
   #2991); here it stays finished;
4. ``activeDeadlineSeconds`` (counted from creation, or from the last resume): past it,
   ``Failed`` (``DeadlineExceeded``) and the JobSet deleted; before it, a requeue at it. Checked
   before anything is created, so a TrainJob already past its deadline gets no JobSet (upstream
   creates it and deletes it in the same pass);
5. the runtime: a ``runtimeRef`` to another kind than (Cluster)TrainingRuntime ->
   ``Failed`` (``TrainingRuntimeNotSupported``, upstream's reason); the runtime snapshot if there
   is one (:mod:`trainer_jobs.snapshot`), else the runtime, snapshotted. A runtime that does not
   exist -> upstream retries the error forever with backoff; here ``Failed`` with reason
   ``TrainingRuntimeNotFound`` and upstream's error as the message, after a grace period from
   the TrainJob's creation (the informer cache may not have a runtime created just before it):
   meanwhile a Warning event and a requeue. An invalid snapshot or a runtime that cannot be
   built the same way, reason ``TrainJobResourcesCreationFailed`` (upstream's event reason);
6. the objects (:func:`trainer_jobs.render.render`): what is missing is created; the JobSet is
   applied again, as upstream does, only while the TrainJob or the JobSet is suspended - this
   is how suspend works both ways and how the runtime patches Kueue writes before it resumes a
   TrainJob reach the pods; the PodGroup is applied again while the TrainJob is suspended; MPI's
   hostfile whenever it differs; MPI's Secret never.

``create`` and ``patch`` hold whole objects, as upstream builds them, to be server-side applied
with field manager ``trainer`` (``api.FIELD_MANAGER``) and ``force``, as upstream applies them:
the same manager keeps ownership the same across a swap of the two controllers, so a field
upstream would remove (a runtime patch Kueue took back) is removed by both. ``patch`` holds an
object only when the observed one differs from it (:func:`covers`), so a steady TrainJob's pass
writes nothing. ``ssh_keys`` names the Secrets in ``create`` whose key pair the apply step
generates (``policies.mpi.ssh_auth_data``).

``observed``: lists ``jobsets``, ``podgroups`` (either scheduler's), ``configmaps``,
``secrets``, by the TrainJob's name (objects another controller owns are ignored), and
``runtime_snapshot``, the snapshot's runtime already parsed when it is YAML.
``config``: ``runtime_grace_seconds`` (default 30).

No ``training_jobs.contracts`` module is used: Trainer v2's env names (``PET_*``, ``JAX_*``,
``DMLC_*``, ``OMPI_MCA_*``) are none of the v1 operators'. Shared with the v1 engine: exact
quantities (``training_jobs.quantity``) and the finished label.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any, TypedDict

from trainer_jobs import api, snapshot
from trainer_jobs import jobset as jobsetlib
from trainer_jobs import status as statuslib
from trainer_jobs.idle import idle_label
from trainer_jobs.info import RenderError
from trainer_jobs.render import Rendered, render
from training_jobs.model import ObjectRef, PlanEvent
from training_jobs.passes import fmt_time, parse_time

# The label of a job with nothing left to do (training_jobs.plan.FINISHED_LABEL): watches.yaml's
# selector leaves such TrainJobs alone as it does the v1 kinds' jobs.
FINISHED_LABEL = "training.ato.dev/finished"
RUNTIME_GRACE_SECONDS = 30
RUNTIME_RETRY_SECONDS = 5
SUPPORTED_RUNTIMES = (
    api.group_kind(api.GROUP, api.TRAINING_RUNTIME),
    api.group_kind(api.GROUP, api.CLUSTER_TRAINING_RUNTIME),
)


class Plan(TypedDict):
    """One reconcile pass of a TrainJob, decided (see the module's docstring)."""

    job: dict[str, Any]
    create: list[dict[str, Any]]
    patch: list[dict[str, Any]]
    delete: list[ObjectRef]
    ssh_keys: list[str]
    status: dict[str, Any] | None
    events: list[PlanEvent]
    requeue_after: str
    final: bool
    state: str
    metrics: dict[str, int]
    idle: str
    apply: bool


# What a runtime patch may add to a pod or Job template, and take back again (Kueue does at each
# preemption): neither the API server nor the JobSet webhook defaults any of them.
TEMPLATE_PATCH_FIELDS = ("labels", "annotations", "nodeSelector", "tolerations", "schedulingGates")


def covers(observed: Any, desired: Any, path: tuple[str, ...] = ()) -> bool:
    """Whether applying ``desired`` would change nothing in ``observed``: every field it sets has
    that value there, lists have the same length (an item gone from the desired list is one the
    apply removes), string maps under ``labels``, ``annotations`` and ``nodeSelector`` have no
    other key, and a template has none of ``TEMPLATE_PATCH_FIELDS`` that ``desired`` lacks
    altogether (what a runtime patch no longer sets). Other extra fields (the JobSet webhook's
    defaults) are the API server's, not changes."""
    if isinstance(desired, dict):
        if observed is None and not desired:
            return True  # an empty map applies nothing (for_reapply leaves one out)
        if not isinstance(observed, dict):
            return False
        if path and path[-1] in ("labels", "annotations", "nodeSelector") and set(observed) - set(desired):
            return False
        if "template" in path and any(observed.get(k) and k not in desired for k in TEMPLATE_PATCH_FIELDS):
            return False
        return all(covers(observed.get(k), v, (*path, k)) for k, v in desired.items())
    if isinstance(desired, list):
        if not isinstance(observed, list) or len(observed) != len(desired):
            return False
        return all(covers(o, d, path) for o, d in zip(observed, desired, strict=True))
    return bool(observed == desired)


def _controller_uid(obj: dict[str, Any]) -> str | None:
    refs = [r for r in api.meta(obj).get("ownerReferences") or [] if r.get("controller")]
    return refs[0].get("uid") if refs else None


def _ref(obj: dict[str, Any]) -> ObjectRef:
    meta = api.meta(obj)
    return {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "name": meta["name"],
        "namespace": meta.get("namespace"),
    }


def _finished_jobset(jobset: dict[str, Any]) -> bool:
    conditions = (jobset.get("status") or {}).get("conditions") or []
    return api.is_true(conditions, api.JOBSET_COMPLETED) or api.is_true(conditions, api.JOBSET_FAILED)


class _Pass:
    """State of one pass; :func:`plan` drives it."""

    def __init__(self, trainjob, runtime, observed, config, now):
        self.trainjob = trainjob
        self.runtime = runtime
        self.config = config or {}
        self.now_dt = parse_time(now) or datetime.now(UTC)
        self.now = fmt_time(self.now_dt)
        uid = api.meta(trainjob).get("uid")
        name = api.meta(trainjob).get("name")
        self.observed: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.snapshot_cm: dict[str, Any] | None = None
        for key in ("jobsets", "podgroups", "configmaps", "secrets"):
            for obj in (observed or {}).get(key) or []:
                obj_name = api.meta(obj).get("name", "")
                if obj.get("kind") == "ConfigMap" and obj_name == snapshot.name_of(trainjob):
                    self.snapshot_cm = obj  # whoever owns it: upstream refuses another's
                elif _controller_uid(obj) in (None, uid):
                    self.observed[(obj.get("apiVersion", ""), obj.get("kind", ""), obj_name)] = obj
        self.parsed_snapshot = (observed or {}).get("runtime_snapshot")
        self.jobset = self.find(api.JOBSET_API_VERSION, api.JOBSET, name)
        self.old_status = trainjob.get("status") or {}
        self.status: dict[str, Any] = dict(self.old_status)
        self.create: list[dict[str, Any]] = []
        self.patch: list[dict[str, Any]] = []
        self.delete: list[ObjectRef] = []
        self.ssh_keys: list[str] = []
        self.events: list[PlanEvent] = []
        self.requeue: list[float] = []
        self.built_from: dict[str, Any] | None = None  # the runtime this pass built from

    def find(self, api_version: str, kind: str, name: Any) -> dict[str, Any] | None:
        return self.observed.get((api_version, kind, str(name)))

    def observed_like(self, obj: dict[str, Any]) -> dict[str, Any] | None:
        return self.find(obj["apiVersion"], obj["kind"], api.meta(obj)["name"])

    @property
    def conditions(self) -> list[dict[str, Any]]:
        return self.status.get("conditions") or []

    def fail(self, reason: str, message: str) -> None:
        failed = statuslib.condition(api.FAILED, api.TRUE, reason, message)
        self.status["conditions"] = statuslib.set_condition(self.conditions, failed, self.now)

    def event(self, etype: str, reason: str, message: str, about: str = "") -> None:
        event: PlanEvent = {"type": etype, "reason": reason, "message": message}
        if about:
            event["about"] = about
        self.events.append(event)

    def create_missing(self, obj: dict[str, Any]) -> bool:
        """Create ``obj`` unless it exists; whether it did."""
        if self.observed_like(obj) is not None:
            return True
        self.create.append(obj)
        kind, name = obj["kind"], api.meta(obj)["name"]
        self.event("Normal", f"SuccessfulCreate{kind}", f"Created {kind.lower()}: {name}", f"{kind}/{name}")
        return False

    def reapply(self, obj: dict[str, Any], applied: dict[str, Any] | None = None) -> None:
        """Apply ``obj`` again (as ``applied`` if given) if the observed one differs from it."""
        if not covers(self.observed_like(obj), obj):
            self.patch.append(applied or obj)


def _deadline(p: _Pass) -> datetime | None:
    """When ``activeDeadlineSeconds`` runs out (``reconcileDeadline``), or None."""
    seconds = int(api.spec(p.trainjob).get("activeDeadlineSeconds") or 0)
    if seconds <= 0 or api.finished(p.conditions) or api.suspended(p.trainjob):
        return None
    start = parse_time(api.meta(p.trainjob).get("creationTimestamp"))
    resumed = api.condition(p.conditions, api.SUSPENDED)
    if resumed is not None and resumed.get("status") == api.FALSE:
        start = parse_time(resumed.get("lastTransitionTime")) or start
    return start + timedelta(seconds=seconds) if start is not None else None


def _check_deadline(p: _Pass) -> bool:
    """Fail the TrainJob past its deadline (and delete its JobSet); whether it did."""
    deadline = _deadline(p)
    if deadline is None:
        return False
    if p.now_dt <= deadline:
        p.requeue.append(max((deadline - p.now_dt).total_seconds(), 1.0))
        return False
    p.fail(api.REASON_DEADLINE_EXCEEDED, api.MESSAGE_DEADLINE_EXCEEDED)
    if p.jobset is not None:
        ref = _ref(p.jobset)
        p.delete.append(ref)
        p.event("Normal", "SuccessfulDeleteJobSet", f"Deleted jobset: {ref['name']}", f"JobSet/{ref['name']}")
    return True


def _runtime(p: _Pass) -> dict[str, Any] | None:
    """The runtime to build from: the snapshot's, else the live one (snapshotted); None with the
    TrainJob failed or a retry planned when there is none."""
    cm = p.snapshot_cm
    if cm is not None:
        try:
            return snapshot.runtime_of(p.trainjob, cm, p.parsed_snapshot)
        except snapshot.SnapshotError as err:
            _resources_failed(p, str(err))
            return None
    _, kind, name = api.runtime_ref(p.trainjob)
    runtime = p.runtime
    if runtime is None or runtime.get("kind") != kind or api.meta(runtime).get("name") != name:
        _runtime_missing(p, kind, name)
        return None
    p.create_missing(snapshot.config_map(p.trainjob, runtime))
    return runtime


def _runtime_missing(p: _Pass, kind: str, name: str) -> None:
    # Upstream's error wrapping the API server's NotFound, word for word.
    not_found = f'{kind.lower()}s.{api.GROUP} "{name}" not found'
    if kind == api.TRAINING_RUNTIME:
        message = f"TrainingRuntime specified in TrainJob is not found: {not_found}"
    else:
        message = f"not found ClusterTrainingRuntime specified in TrainJob: {not_found}"
    created = parse_time(api.meta(p.trainjob).get("creationTimestamp"))
    grace = float(p.config.get("runtime_grace_seconds", RUNTIME_GRACE_SECONDS))
    if created is not None and (p.now_dt - created).total_seconds() < grace:
        p.event(
            "Warning", api.REASON_RESOURCES_FAILED, f"TrainJob resources reconciliation failed: {message}"
        )
        p.requeue.append(RUNTIME_RETRY_SECONDS)
        return
    p.fail(api.REASON_RUNTIME_NOT_FOUND, message)


def _resources_failed(p: _Pass, error: str) -> None:
    """What upstream reports in a Warning event and retries, as a Failed condition instead."""
    message = f"TrainJob resources reconciliation failed: {error[:950]}" + (
        " ..." if len(error) > 950 else ""
    )
    p.fail(api.REASON_RESOURCES_FAILED, message)


def _objects(p: _Pass, rendered: Rendered) -> None:
    """Create what is missing; apply again what upstream applies again (module docstring, 6)."""
    suspended = api.suspended(p.trainjob)
    for group in rendered.pod_groups:
        if p.create_missing(group) and suspended:
            p.reapply(group)
    if rendered.ssh_secret is not None and not p.create_missing(rendered.ssh_secret):
        p.ssh_keys.append(api.meta(rendered.ssh_secret)["name"])
    if rendered.hostfile is not None and p.create_missing(rendered.hostfile):
        p.reapply(rendered.hostfile)
    if p.jobset is None:
        p.create_missing(rendered.jobset)
    elif suspended or (p.jobset.get("spec") or {}).get("suspend") is True:
        p.reapply(rendered.jobset, jobsetlib.for_reapply(rendered.jobset))


def _active(p: _Pass) -> None:
    """A TrainJob not finished: the deadline, the runtime, the objects."""
    if _check_deadline(p):
        return
    group, kind, _ = api.runtime_ref(p.trainjob)
    if api.group_kind(group, kind) not in SUPPORTED_RUNTIMES:
        p.fail(api.REASON_RUNTIME_NOT_SUPPORTED, f"unsupported runtime: {api.group_kind(group, kind)}")
        return
    runtime = _runtime(p)
    if runtime is None:
        return
    p.built_from = runtime
    try:
        rendered = render(p.trainjob, runtime)
    except (RenderError, ValueError) as err:
        _resources_failed(p, str(err))
        return
    _objects(p, rendered)


def _condition_events(p: _Pass) -> None:
    """An event for each condition this pass sets or changes (upstream records none)."""
    old = {c.get("type"): (c.get("status"), c.get("reason")) for c in p.old_status.get("conditions") or []}
    for c in p.conditions:
        if old.get(c.get("type")) == (c.get("status"), c.get("reason")):
            continue
        warning = c.get("type") == api.FAILED and c.get("status") == api.TRUE
        p.event("Warning" if warning else "Normal", str(c.get("reason", "")), str(c.get("message", "")))


def _metrics(p: _Pass) -> dict[str, int]:
    counts = {}
    if (
        any(o["kind"] == api.JOBSET for o in p.create)
        and not p.old_status.get("conditions")
        and not p.old_status.get("jobsStatus")
    ):
        counts["created"] = 1
    for ctype, metric in ((api.COMPLETE, "successful"), (api.FAILED, "failed")):
        if api.is_true(p.conditions, ctype) and not api.is_true(p.old_status.get("conditions") or [], ctype):
            counts[metric] = 1
    return counts


def _framework(p: _Pass) -> str:
    """The runtime's ``trainer.kubeflow.org/framework`` label, the job counters' ``framework``:
    of the runtime the pass built from, else its snapshot's (a finished TrainJob's pass builds
    nothing), else the live one's; "" for none."""
    runtime = p.built_from
    if runtime is None and p.snapshot_cm is not None:
        try:
            runtime = snapshot.runtime_of(p.trainjob, p.snapshot_cm, p.parsed_snapshot)
        except snapshot.SnapshotError:
            runtime = None
    runtime = runtime or p.runtime or {}
    return str((api.meta(runtime).get("labels") or {}).get(api.FRAMEWORK_LABEL) or "")


def _status_patch(p: _Pass) -> dict[str, Any]:
    """The new status as a merge patch: a key it no longer has (``jobsStatus`` of a JobSet
    without replicated job status) is written as null, which removes it."""
    return {**p.status, **{k: None for k in p.old_status if k not in p.status}}


def _result(p: _Pass) -> Plan:
    changed = p.status != p.old_status
    meta = api.meta(p.trainjob)
    settled = p.jobset is None or _finished_jobset(p.jobset)
    final = (
        api.finished(p.conditions)
        and settled
        and not (p.create or p.patch or p.delete)
        and FINISHED_LABEL not in (meta.get("labels") or {})
    )
    pending = bool(p.create or p.patch or p.delete or p.requeue) or api.finished(p.conditions)
    idle = idle_label(p.trainjob, p.jobset, p.config, pending or not api.managed_here(p.trainjob))
    return {
        "job": {
            "apiVersion": p.trainjob.get("apiVersion", api.API_VERSION),
            "kind": api.TRAINJOB,
            "name": meta.get("name", ""),
            "namespace": meta.get("namespace", ""),
            "uid": meta.get("uid", ""),
            "resourceVersion": meta.get("resourceVersion", ""),
            "generation": meta.get("generation", ""),
            "framework": _framework(p),
        },
        "create": p.create,
        "patch": p.patch,
        "delete": p.delete,
        "ssh_keys": p.ssh_keys,
        "status": _status_patch(p) if changed else None,
        "events": p.events,
        "requeue_after": f"{math.ceil(min(p.requeue))}s" if p.requeue else "",
        "final": final,
        "state": (p.conditions[-1].get("type", "") if p.conditions else ""),
        "metrics": _metrics(p),
        "idle": idle,
        "apply": bool(p.create or p.patch or p.delete or changed or p.events or final or idle),
    }


def plan(
    trainjob: dict[str, Any],
    runtime: dict[str, Any] | None,
    observed: dict[str, Any] | None,
    config: dict[str, Any] | None,
    now: str | None,
) -> Plan:
    """One reconcile pass of ``trainjob`` (see the module's docstring)."""
    p = _Pass(trainjob, runtime, observed, config, now)
    if not api.managed_here(trainjob):
        return _result(p)
    p.status = statuslib.status(trainjob, p.jobset, p.now)
    if not api.finished(p.conditions):
        _active(p)
    _condition_events(p)
    return _result(p)
