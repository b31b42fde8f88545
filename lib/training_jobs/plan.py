"""The reconcile engine: from a job and what exists in the cluster to what to do.

:func:`plan` is pure: the role passes the job CR, the objects it observed and the current time,
and gets back the objects to create and delete, the new status (``None`` when unchanged), the
events to record and when to look again. The role applies that and nothing else.

One pass, in training-operator's order, with its known bugs left out:

1. invalid spec -> ``Failed`` with the reason, nothing created;
2. finished job -> clean-pod policy, TTL; nothing else changes;
3. suspended -> pods and services removed, ``Suspended``; resumed -> ``startTime`` reset;
4. pods: create missing replicas, delete scaled-down ones, recreate failed ones whose restart
   policy says so (counting every recreation for ``backoffLimit``, upstream #2045);
5. status from pod phases through the profile's success rules;
6. ``activeDeadlineSeconds`` and ``backoffLimit``: ``Failed`` first, then the clean-pod policy
   (upstream #3419), and a requeue for the deadline even when nothing else happens (#3358).
"""

from __future__ import annotations

import hashlib
import json
import math
from datetime import UTC, datetime, timedelta
from typing import Any, TypedDict

from training_jobs import conditions as cond
from training_jobs import gang, idle, pod_signature, tensorboard
from training_jobs import pod_problems as problems
from training_jobs import pods as podlib
from training_jobs.model import InvalidJob, Job, ObjectRef, PlanEvent, ReplicaGroup
from training_jobs.profiles.base import Context, Counts, Outcome, Profile
from training_jobs.registry import BY_KIND, profile_of

CLEAN_NONE, CLEAN_RUNNING, CLEAN_ALL = "None", "Running", "All"
# How often a job held for its gang looks at its PodGroup again: Volcano admitting the gang
# triggers no reconcile by itself.
GANG_POLL_SECONDS = 30
# Why the gang's pods are held (the last PodGroupPending event's message), while they are.
PENDING_MESSAGE = "podGroupPendingMessage"
PENDING_MESSAGE_MAX = 4096  # the CRD's maxLength; Volcano's fit errors can list every node
# The API server could not be read or written: try again soon, as a planned requeue rather than
# a failed task, whose backoff controller-runtime doubles up to minutes during an outage.
UNAVAILABLE_RETRY_SECONDS = 5
# The observe step's key for "the API server could not be read" (its message).
UNAVAILABLE = "unavailable"
# Written on a job that is final and has nothing pending (clean-pod policy applied, no TTL):
# watches.yaml's selector leaves such jobs to nobody, so they cost nothing, even at a restart.
FINISHED_LABEL = "training.ato.dev/finished"
# Waiting for something that triggers no reconcile by itself: a deleted pod to be gone so its
# replacement can be created, a config map or a Volcano PodGroup before the pods.
WAIT_SECONDS = 2
# A pod still Terminating this long after its deletion deadline is on a lost node (#2072): it is
# force-deleted so its replica can be created again.
LOST_POD_GRACE_SECONDS = 30
# Without a backoffLimit, a job whose pods are evicted this often fails instead of looping: the
# default backoffLimit of a Kubernetes Job, which counts evictions too.
DEFAULT_EVICTION_LIMIT = 6
# A recreated object the API server refused for now (quota, webhook, throttling): try again.
CREATE_RETRY_SECONDS = 10
# Pod problems remembered in the status (reportedPodProblems): far below the CRD's maxItems, so
# the status of a job with hundreds of failing pods can always be written.
MAX_REPORTED_PROBLEMS = 100
STATUS_TIMES = ("startTime", "completionTime", "lastReconcileTime")
# runPolicy.managedBy values this operator runs; any other manager (Kueue's MultiKueue) owns the job.
OWN_MANAGERS = ("", "kubeflow.org/training-operator")


class PlanJob(TypedDict):
    """The job a plan is about, as the apply step addresses and checks it."""

    apiVersion: str
    kind: str
    name: str
    namespace: str
    uid: str
    resourceVersion: str
    generation: Any
    statusDigest: str
    framework: str


class Plan(TypedDict):
    """One reconcile pass, decided: what ``training_job_apply`` writes (its docstring has each
    field's meaning) and what the requeue task asks for."""

    job: PlanJob
    create: list[dict[str, Any]]
    patch: list[dict[str, Any]]
    delete: list[ObjectRef]
    status: dict[str, Any] | None
    events: list[PlanEvent]
    requeue_after: str
    create_retry_after: str
    delete_job: bool
    final: bool
    idle: str
    state: str
    metrics: dict[str, int]
    apply: bool


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


def _ref(obj: dict[str, Any]) -> ObjectRef:
    meta = obj.get("metadata") or {}
    return {
        "apiVersion": obj.get("apiVersion", "v1"),
        "kind": obj["kind"],
        "name": meta["name"],
        "namespace": meta.get("namespace"),
    }


def _owned_or_orphaned(observed: dict[str, Any], uid: str | None) -> dict[str, Any]:
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


class _Pass:
    """State of one reconcile pass; :func:`plan` drives it."""

    def __init__(self, cr, observed, config, now):
        self.cr = cr
        self.config = config or {}
        self.now_dt = parse_time(now) or datetime.now(UTC)
        self.now = fmt_time(self.now_dt)
        observed = _owned_or_orphaned(observed or {}, (cr.get("metadata") or {}).get("uid"))
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
        ref = _ref(obj)
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


def _counts(profile: Profile, job: Job, p: _Pass, recreating: set[str]) -> dict[str, Counts]:
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


def _replica_statuses(profile: Profile, job: Job, counts: dict[str, Counts], finished_ok: bool):
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


def _cleanup_finished(profile: Profile, job: Job, p: _Pass, succeeded: bool) -> None:
    policy = profile.clean_pod_policy(job, succeeded=succeeded)
    if policy == CLEAN_NONE:
        return
    for name, pod in sorted(p.pods.items()):
        if podlib.terminating(pod):
            continue
        if policy == CLEAN_ALL or podlib.phase(pod) in ("Running", "Pending"):
            p.delete_obj(pod)
            if name in p.services:
                p.delete_obj(p.services[name])


def _delete_everything(profile: Profile, p: _Pass) -> None:
    """Suspend: every pod of the job and every replica's service go (TensorBoard stays)."""
    for pod in sorted(p.pods.values(), key=lambda o: o["metadata"]["name"]):
        if not podlib.terminating(pod):
            p.delete_obj(pod)
    for svc in sorted(p.services.values(), key=lambda o: o["metadata"]["name"]):
        if profile.replica_index(svc) is not None:
            p.delete_obj(svc)


def _ttl(job: Job, p: _Pass) -> None:
    ttl = job.run_policy.get("ttlSecondsAfterFinished")
    done = parse_time(p.status.get("completionTime"))
    if ttl is None or done is None:
        return
    left = (done + timedelta(seconds=int(ttl)) - p.now_dt).total_seconds()
    if left <= 0:
        p.delete_job = True
        p.event("Normal", "SuccessfulDeleteJob", f"Deleted job: {job.name} (ttlSecondsAfterFinished)")
    else:
        p.requeue_in(left)


def _until_gone(pod: dict[str, Any], now: datetime) -> float:
    """When to look at a terminating pod again: as its grace period ends, when it would count
    as lost (``LOST_POD_GRACE_SECONDS`` later), then every ``LOST_POD_GRACE_SECONDS`` while a
    Ready node's kubelet takes its time (its node may be lost meanwhile; nothing else says so)."""
    deleting = parse_time((pod.get("metadata") or {}).get("deletionTimestamp"))
    if deleting is None:
        return LOST_POD_GRACE_SECONDS
    left = (deleting - now).total_seconds()
    if left > 0:
        return left + 1
    if left + LOST_POD_GRACE_SECONDS >= 0:
        return LOST_POD_GRACE_SECONDS + left + 1
    return LOST_POD_GRACE_SECONDS


def _mark_final(job: Job, p: _Pass) -> None:
    """A finished job with no TTL has nothing left once this pass's clean-up is written."""
    if job.run_policy.get("ttlSecondsAfterFinished") is None and not p.delete_job:
        p.final = True


def _finish(job: Job, p: _Pass, ctype: str, what: str, message: str) -> None:
    _record_running(job, p)
    p.set_condition(job.kind, ctype, cond.TRUE, what, message)
    p.status["completionTime"] = p.status.get("completionTime") or p.now


def _record_running(job: Job, p: _Pass) -> None:
    """A job whose pods started and ended between two of its passes records ``Running`` before
    its final condition, as one whose passes saw them run: its history must not depend on how busy
    the operator's queue was."""
    if cond.find(p.conditions, cond.RUNNING) or cond.find(p.conditions, cond.RESTARTING):
        return
    if any(_a_container_started(pod) for pod in p.pods.values()):
        p.set_condition(job.kind, cond.RUNNING, cond.TRUE, "Running", f"{job.kind} {job.name} is running.")


def _a_container_started(pod: dict[str, Any]) -> bool:
    """Whether a container of the pod has run (now or before), by its container statuses."""
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        for state in (status.get("state") or {}, status.get("lastState") or {}):
            if any((state.get(phase) or {}).get("startedAt") for phase in ("running", "terminated")):
                return True
    return False


def _reconcile_extras(profile: Profile, job: Job, p: _Pass, ctx: Context) -> bool:
    """Create the framework's extra objects that are missing and patch those the profile keeps
    current; the job's TensorBoard too. Returns whether every extra object already existed."""
    ready = True
    for obj in profile.extra_objects(job, ctx):
        observed = p.extras.get((obj["kind"], obj["metadata"]["name"]))
        if observed is None:
            p.create_obj(obj)
            ready = False
            continue
        kept = profile.extras_kept_current.get(obj["kind"])
        if kept and observed.get(kept) != obj.get(kept):
            p.update.append(obj)
    for obj in tensorboard.objects(job, profile.selector(job), p.config):
        if (obj["kind"], obj["metadata"]["name"]) not in p.extras:
            p.create_obj(obj)
    return ready


def _reconcile_replica(
    profile: Profile,
    job: Job,
    g: ReplicaGroup,
    i: int,
    p: _Pass,
    ctx: Context,
    hold_pods: bool,
    recreating: set[str],
) -> int:
    """Create, recreate or leave one replica's pod (and create its service). Returns the pod's
    in-place container restarts that count against the backoff limit."""
    name = profile.pod_name(job, g, i)
    pod = p.pods.get(name)
    live_restarts = 0
    if pod is None:
        if not hold_pods:
            desired = podlib.desired_pod(profile, job, g, i, ctx)
            warning = gang.decorate_pod(desired, job, g, p.config)
            if warning:
                p.events.append(warning)
            p.create_obj(desired)
    elif podlib.terminating(pod):
        node = p.node_state(pod)
        if problems.lost_pod(pod, p.now, LOST_POD_GRACE_SECONDS, node):
            p.event(
                "Warning",
                "ForceDeletePod",
                f"Pod {job.namespace}/{name} is stuck terminating on a node that is {node}: "
                "force-deleting it to recreate the replica",
            )
            p.delete_obj(pod, force=True)
            p.requeue_in(1)
        else:
            p.requeue_in(_until_gone(pod, p.now_dt))
    elif problems.evicted(pod):
        recreating.add(name)
        if p.count_once(pod):
            p.evictions += 1
            p.event("Warning", "Evicted", f"Pod {job.namespace}/{name} was evicted: recreating it")
        p.delete_obj(pod)
        p.recreating.append(_ref(pod))
    elif podlib.should_recreate(g, pod, profile.default_container):
        recreating.add(name)
        if p.count_once(pod):
            code = podlib.exit_code(pod, profile.default_container)
            p.event("Normal", "ExitedWithCode", f"Pod: {job.namespace}.{name} exited with code {code}")
            p.restart_count += 1 + podlib.container_restarts(pod)
            p.restarted_pods += 1
        # The replacement is created on the pass the deletion triggers.
        p.delete_obj(pod)
        p.recreating.append(_ref(pod))
    elif podlib.permanent_exit(g, pod, profile.default_container):
        p.permanent_failures.append(g.rtype)
    elif g.restart_policy != "Never":
        live_restarts = podlib.container_restarts(pod)
    if profile.wants_services(job) and profile.service_name(job, g, i) not in p.services:
        p.create_obj(podlib.desired_service(profile, job, g, i))
    return live_restarts


def _scale_down(profile: Profile, job: Job, p: _Pass) -> None:
    """Our pods and services beyond the current replica counts go."""
    wanted = {profile.pod_name(job, g, i) for g in job.groups for i in range(g.replicas)}
    for name, pod in sorted(p.pods.items()):
        if name not in wanted and profile.replica_index(pod) is not None and not podlib.terminating(pod):
            p.delete_obj(pod)
    wanted_services = {profile.service_name(job, g, i) for g in job.groups for i in range(g.replicas)}
    for name, svc in sorted(p.services.items()):
        if name not in wanted_services and profile.replica_index(svc) is not None:
            p.delete_obj(svc)


def _reconcile_pods(
    profile: Profile, job: Job, p: _Pass, ctx: Context, gang_ready: bool
) -> tuple[set[str], int]:
    """Create, scale down and recreate pods and services.

    Returns the pods being recreated and the job's restarts so far: recreations recorded in the
    status plus in-place container restarts of current pods under a restarting policy. Evicted
    pods are recreated whatever the restart policy and do not count as restarts (#1570).
    """
    extras_ready = _reconcile_extras(profile, job, p, ctx)
    hold_pods = (profile.extra_objects_first(job, ctx) and not extras_ready) or not gang_ready
    if hold_pods:
        # What the pods wait for (the framework's config map, Volcano admitting the gang) changes
        # nothing that would reconcile the job: look again soon.
        p.requeue_in(WAIT_SECONDS)
    recreating: set[str] = set()
    live_restarts = sum(
        _reconcile_replica(profile, job, g, i, p, ctx, hold_pods, recreating)
        for g in job.groups
        for i in range(g.replicas)
    )
    _scale_down(profile, job, p)
    if p.recreating:
        # Nothing reconciles the job when a pod is gone (the runtime does not watch pods): the
        # next pass, which creates the replacements, is asked for here.
        p.requeue_in(WAIT_SECONDS)
    if p.restart_count:
        p.status["restartCount"] = p.restart_count
    if p.evictions:
        p.status["evictionCount"] = p.evictions
    p.keep_counted_pods()
    return recreating, p.restart_count + live_restarts


def plan(cr: dict[str, Any], observed: dict[str, Any], config: dict[str, Any], now: str) -> Plan:
    """Decide one reconcile pass. See the module docstring for the order of rules."""
    profile = profile_of(cr)
    kind = cr.get("kind") or profile.kind
    name = (cr.get("metadata") or {}).get("name", "")
    if (observed or {}).get(UNAVAILABLE):
        # The job's objects could not be read: decide nothing from a partial view.
        p = _Pass(cr, {}, config, now)
        p.status = p.old_status
        p.requeue_in(UNAVAILABLE_RETRY_SECONDS)
        return _result(p, kind)
    p = _Pass(cr, observed, config, now)
    if _managed_elsewhere(profile, cr):
        # training-operator's ManagedByExternalController: another controller (Kueue's
        # MultiKueue) runs the job; this operator creates nothing and writes no status.
        p.status = p.old_status
        p.may_idle = False
        return _result(p, kind)
    if pod_signature.pods_behind_wake(cr, list(p.pods.values()), p.now_dt):
        # The runtime's cache may not yet hold what woke this pass: decide from it, look again.
        p.requeue_in(pod_signature.FENCE_RETRY_SECONDS)
    if not cond.find(p.conditions, cond.CREATED):
        p.set_condition(kind, cond.CREATED, cond.TRUE, "Created", f"{kind} {name} is created.")
    try:
        job = profile.job(cr)
        profile.validate(job)
        return _plan_valid(profile, job, p, kind, name)
    except InvalidJob as err:
        # The job cannot run as written: it fails with the reason instead of the reconcile
        # failing (and retrying) forever. Any other exception is an engine bug: the task fails
        # and the runtime retries with backoff, logging it, rather than failing the user's job.
        p = _Pass(cr, observed, config, now)
        message = f"{kind} {name} is invalid: {err}"
        if not cond.find(p.conditions, cond.CREATED):
            p.set_condition(kind, cond.CREATED, cond.TRUE, "Created", f"{kind} {name} is created.")
        if not cond.is_finished(p.conditions):
            p.set_condition(kind, cond.FAILED, cond.TRUE, "FailedValidation", message)
            p.status["completionTime"] = p.status.get("completionTime") or p.now
        return _result(p, kind)


def _managed_elsewhere(profile: Profile, cr: dict[str, Any]) -> bool:
    manager = profile.run_policy(cr.get("spec") or {}).get("managedBy") or ""
    return manager not in OWN_MANAGERS


def _delete_pod_group(job: Job, p: _Pass) -> None:
    """Upstream deletes the PodGroup when the job finishes or is suspended."""
    _clear_pending_message(p)
    if job.name in p.pod_groups:
        p.delete_obj(p.pod_groups[job.name])


def _sync_pod_group(profile: Profile, job: Job, p: _Pass, kind: str) -> bool:
    """Create or update the job's PodGroup; returns whether pods may be created (Volcano waits
    until the gang is admitted, upstream #1630)."""
    scheduler = gang.scheduler_kind(p.config)
    if not scheduler:
        return True
    observed = p.pod_groups.get(job.name)
    desired = gang.pod_group(
        job, p.config, p.priority_classes, existing=observed, labels=profile.selector(job)
    )
    if desired is None:  # no gang scheduler (checked above)
        return True
    if observed is None:
        p.create_obj(desired)
    elif gang.needs_update(desired, observed):
        p.update.append(desired)
    ready, why = gang.may_create_pods(scheduler, observed)
    why = why[:PENDING_MESSAGE_MAX]
    if not ready:
        # Said again whenever the reason changes (the PodGroup created, Volcano's verdict), not on
        # every poll: a gang that never fits says why once, and the status keeps saying it.
        if p.old_status.get(PENDING_MESSAGE) != why:
            p.event("Normal", "PodGroupPending", why)
        p.status[PENDING_MESSAGE] = why
        p.status["lastReconcileTime"] = p.now
        # Volcano's PodGroup CRD has no status subresource, so each change of its status bumps its
        # generation and the runtime's dependent watch reconciles the job: this is the safety net.
        poll = p.config.get("poll_seconds") or p.config.get("gang_poll_seconds") or GANG_POLL_SECONDS
        p.requeue_in(float(poll))
    else:
        _clear_pending_message(p)
    return ready


def _clear_pending_message(p: _Pass) -> None:
    """The hold is over. The status is written as a merge patch, where only a null removes a key."""
    if PENDING_MESSAGE in p.old_status:
        p.status[PENDING_MESSAGE] = None
    else:
        p.status.pop(PENDING_MESSAGE, None)


def _report_pod_problems(profile: Profile, p: _Pass) -> None:
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


def _plan_valid(profile: Profile, job: Job, p: _Pass, kind: str, name: str) -> Plan:
    if cond.is_finished(p.conditions):
        # The status of a finished job is final: its counts are never recomputed from the pods
        # the clean-pod policy left, so an operator restart changes nothing.
        p.status.setdefault("completionTime", p.now)
        _close_finished(profile, job, p, cond.is_true(p.conditions, cond.SUCCEEDED))
        return _result(p, kind)
    if job.run_policy.get("suspend"):
        _suspend(profile, job, p, kind, name)
        return _result(p, kind)
    if cond.is_true(p.conditions, cond.SUSPENDED):
        p.set_condition(kind, cond.SUSPENDED, cond.FALSE, "Resumed", f"{kind} {name} is resumed.")
        p.event("Normal", cond.reason(kind, "Resumed"), f"{kind} {name} is resumed.")
        p.status["startTime"] = p.now

    ctx = Context(config=p.config, pods=p.pods, now=p.now)
    gang_ready = _sync_pod_group(profile, job, p, kind)
    recreating, restarts = _reconcile_pods(profile, job, p, ctx, gang_ready)
    _report_pod_problems(profile, p)
    counts = _counts(profile, job, p, recreating)
    if p.permanent_failures:
        # ReconcilePods' verdict, before the framework's status rules (upstream's pod_test.go
        # "Test Unretryable Exit Code" asserts this message verbatim, Go's %q quoting included).
        rtype = p.permanent_failures[-1]
        _finish(
            job, p, cond.FAILED, "Failed", f'job "{name}" is failing because "{rtype}" replica(s) failed.'
        )
    outcome: Outcome = profile.outcome(job, counts, ctx)
    if gang_ready:
        # The deadline's clock starts when the pods may start, not while the gang is held.
        p.status.setdefault("startTime", p.now)
    _set_state(job, p, kind, name, outcome, counts)
    if not cond.is_finished(p.conditions):
        _limits(job, p, kind, restarts)
    ok = cond.is_true(p.conditions, cond.SUCCEEDED)
    p.status["replicaStatuses"] = _replica_statuses(profile, job, counts, ok)
    p.status.update(profile.status_extras(job, counts, ctx, p.conditions))
    if cond.is_finished(p.conditions):
        _drop_starts(p)
        _close_finished(profile, job, p, ok)
    elif float(p.config.get("poll_seconds") or 0) > 0:
        # Opt-in (JOB_POLL_SECONDS): pod changes wake the job through the companion's watcher
        # (lib/training_wake), whose periodic re-list is the cheap safety net.
        p.requeue_in(float(p.config["poll_seconds"]))
    return _result(p, kind)


def _close_finished(profile: Profile, job: Job, p: _Pass, succeeded: bool) -> None:
    """What a finished job still gets: the clean-pod policy, its PodGroup gone, the TTL, and the
    label that takes it out of the runtime's watch."""
    _cleanup_finished(profile, job, p, succeeded)
    _delete_pod_group(job, p)
    _ttl(job, p)
    _mark_final(job, p)


def _suspend(profile: Profile, job: Job, p: _Pass, kind: str, name: str) -> None:
    """A suspended job has no pods, Services or PodGroup, nor what would act on it (an
    autoscaler), and says so in its conditions."""
    _delete_everything(profile, p)
    _delete_pod_group(job, p)
    for (extra_kind, _), obj in sorted(p.extras.items()):
        if extra_kind in profile.extras_removed_while_suspended:
            p.delete_obj(obj)
    if cond.is_true(p.conditions, cond.RUNNING):
        p.set_condition(kind, cond.RUNNING, cond.FALSE, "Suspended", f"{kind} {name} is suspended.")
    p.set_condition(kind, cond.SUSPENDED, cond.TRUE, "Suspended", f"{kind} {name} is suspended.")
    counts = {g.rtype: Counts(replicas=g.replicas) for g in job.groups}
    p.status["replicaStatuses"] = _replica_statuses(profile, job, counts, False)


def _set_state(job: Job, p: _Pass, kind: str, name: str, outcome: Outcome, counts: dict[str, Counts]) -> None:
    """The condition the framework's outcome and the restarts call for."""
    if outcome.state == cond.SUCCEEDED:
        message = outcome.message or f"{kind} {job.namespace}/{name} successfully completed."
        _finish(job, p, cond.SUCCEEDED, "Succeeded", message)
    elif outcome.state == cond.FAILED:
        _finish(job, p, cond.FAILED, "Failed", outcome.message)
    elif any(c.restarting for c in counts.values()):
        types = ", ".join(g.rtype for g in job.groups if counts[g.rtype].restarting)
        message = f"job {name} is restarting because {types} replica(s) failed."
        p.set_condition(kind, cond.RESTARTING, cond.TRUE, "Restarting", message)
    elif outcome.state == cond.RUNNING:
        message = outcome.message or f"{kind} {name} is running."
        p.set_condition(kind, cond.RUNNING, cond.TRUE, "Running", message)


def _drop_starts(p: _Pass) -> None:
    """A job that finished in this pass starts and restarts nothing: its pods are left to the
    clean-pod policy."""
    p.create = []
    p.delete = [r for r in p.delete if r not in p.recreating]
    p.events = [e for e in p.events if not e["reason"].startswith(("SuccessfulDelete", "SuccessfulCreate"))]
    p.update = []
    p.requeue = []
    p.restarted_pods = 0


def status_digest(status: dict[str, Any] | None) -> str:
    """A short fingerprint of a job's status, the same for equal statuses whatever the key order."""
    text = json.dumps(status or {}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def observe_args(cr: dict[str, Any], config: dict[str, Any] | None = None) -> dict[str, Any]:
    """What the role reads before planning: the job's objects, listed by the job's labels, and
    with gang scheduling its PodGroup and the cluster's PriorityClasses (for minResources); and
    the job's last wake (:func:`pod_signature.wake_of`)."""
    profile = profile_of(cr)
    meta = cr.get("metadata") or {}
    selector = profile.selector_for(meta.get("name", ""), meta.get("namespace", ""))
    kinds: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": k, "key": k.lower() + "s"} for k in profile.observed_kinds
    ]
    kinds += profile.extra_observed(cr.get("spec") or {})
    if (meta.get("annotations") or {}).get(tensorboard.LOG_DIR_ANNOTATION):
        kinds.append({"apiVersion": "apps/v1", "kind": "Deployment", "key": "deployments"})
    scheduler = gang.scheduler_kind(config)
    if scheduler:
        api = gang.VOLCANO_API if scheduler == gang.VOLCANO else gang.SCHEDULER_PLUGINS_API
        kinds += [
            {"apiVersion": api, "kind": "PodGroup", "key": "podgroups"},
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "key": "priorityclasses",
                "cluster": True,
            },
        ]
    return {
        "namespace": meta.get("namespace", ""),
        "selector": selector,
        "kinds": kinds,
        "nodes_of_terminating_pods": True,
        # Pods that disagree with a recent wake are read again past the runtime's cache.
        "wake": pod_signature.wake_of(cr),
    }


def rejected_plan(
    cr: dict[str, Any], previous: dict[str, Any], rejected: list[dict[str, Any]], now: str
) -> Plan:
    """The API server refused some of the job's objects (an invalid pod template, a quota).

    Such a job cannot run as written: it fails with the API's message, and what this pass
    created is deleted again so no half-created job is left behind.
    """
    p = _Pass(cr, {}, {}, now)
    kind = cr.get("kind", "")
    name = (cr.get("metadata") or {}).get("name", "")
    first = rejected[0]
    message = (
        f"{kind} {name} cannot run: the API server rejected {first['kind']} {first['name']}: "
        f"{first['message']}"
    )
    if previous.get("status"):
        p.conditions = list(previous["status"].get("conditions") or p.conditions)
        p.status = dict(previous["status"])
    p.set_condition(kind, cond.FAILED, cond.TRUE, "Failed", message)
    p.status["completionTime"] = p.status.get("completionTime") or p.now
    p.delete = [_ref(o) for o in previous.get("create") or []]
    result = _result(p, kind)
    result["requeue_after"] = ""
    return result


def refused_status_plan(cr: dict[str, Any], previous: dict[str, Any], message: str, now: str) -> Plan:
    """The API server refused the planned status as invalid (it grew past a schema limit).

    Writing it again would fail again on every pass, leaving the job's status frozen: instead
    the job fails with the API's reason, in a status that carries only what is needed.
    """
    p = _Pass(cr, {}, {}, now)
    kind = cr.get("kind", "")
    name = (cr.get("metadata") or {}).get("name", "")
    p.set_condition(
        kind,
        cond.FAILED,
        cond.TRUE,
        "Failed",
        f"{kind} {name} failed: the API server refused its status: {message}",
    )
    p.status = {
        key: value
        for key, value in p.status.items()
        if key in ("startTime", "completionTime", "restartCount", "evictionCount")
    }
    p.status["completionTime"] = p.status.get("completionTime") or p.now
    result = _result(p, kind)
    result["requeue_after"] = ""
    return result


def _limits(job: Job, p: _Pass, kind: str, restarts: int) -> None:
    deadline = job.run_policy.get("activeDeadlineSeconds")
    start = parse_time(p.status.get("startTime"))
    if deadline is not None and start is not None:
        left = (start + timedelta(seconds=int(deadline)) - p.now_dt).total_seconds()
        if left <= 0:
            _finish(
                job,
                p,
                cond.FAILED,
                "Failed",
                f"Job {job.name} has failed because it was active longer than specified deadline",
            )
            return
        p.requeue_in(left)
    limit = job.run_policy.get("backoffLimit")
    if limit is not None and _past_backoff_limit(restarts + p.evictions, int(limit)):
        _finish(
            job,
            p,
            cond.FAILED,
            "Failed",
            f"Job {job.name} has failed because it has reached the specified backoff limit",
        )
    elif limit is None and p.evictions >= DEFAULT_EVICTION_LIMIT:
        _finish(
            job,
            p,
            cond.FAILED,
            "Failed",
            f"Job {job.name} has failed because its pods were evicted {p.evictions} times "
            "(set runPolicy.backoffLimit to allow more)",
        )


def _past_backoff_limit(restarts: int, limit: int) -> bool:
    """training-operator's ``PastBackoffLimit``: failed once the restarts reach the limit; a
    limit of 0 fails on the first restart."""
    return restarts > 0 if limit == 0 else restarts >= limit


def _metric_counts(p: _Pass) -> dict[str, int]:
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


def _result(p: _Pass, kind: str) -> Plan:
    p.status["conditions"] = p.conditions
    changed = p.status != p.old_status
    meta = p.cr.get("metadata") or {}
    status = p.status if changed else None
    final = p.final and FINISHED_LABEL not in (meta.get("labels") or {})
    idle = _idle_label(p) if not final else ""
    return {
        "job": {
            "apiVersion": p.cr.get("apiVersion", ""),
            "kind": kind,
            "name": meta.get("name", ""),
            "namespace": meta.get("namespace", ""),
            "uid": meta.get("uid", ""),
            "resourceVersion": meta.get("resourceVersion", ""),
            # What the plan started from: a conflict on the status write is harmless when the
            # job read again has the same generation and status (training_job_apply).
            "generation": meta.get("generation", ""),
            "statusDigest": status_digest(p.cr.get("status")),
            "framework": getattr(BY_KIND.get((p.cr.get("apiVersion", ""), kind)), "framework", ""),
        },
        "create": p.create,
        "patch": p.update,
        "delete": p.delete,
        "status": status,
        "events": p.events,
        "requeue_after": f"{math.ceil(min(p.requeue))}s" if p.requeue and not p.delete_job else "",
        "create_retry_after": f"{CREATE_RETRY_SECONDS}s" if p.create else "",
        "delete_job": p.delete_job,
        "final": final,
        "idle": idle,
        "state": cond.current_state(p.conditions),
        "metrics": _metric_counts(p),
        # Whether the apply step has anything to do; the role skips it otherwise.
        "apply": bool(
            p.create
            or p.update
            or p.delete
            or status is not None
            or p.events
            or p.delete_job
            or final
            or idle
        ),
    }


def _idle_label(p: _Pass) -> str:
    """The value of ``idle.IDLE_LABEL`` this pass leaves on the job (:func:`idle.idle_value`: its
    generation, annotations and the pods it planned with), or "".

    Only with the companion's wakes on (``config["wake"]``: they are what brings an idle job
    back) and without a poll, and only when nothing is pending: a job that asked for a later
    look, or that this pass creates, patches or deletes for, stays watched, and so does a job
    whose pods are still starting (:func:`_on_its_way`).
    """
    config = p.config
    wake = str(config.get("wake", "")).lower() in ("true", "1", "yes")  # templated: maybe a string
    if not wake or int(config.get("poll_seconds") or 0) > 0 or not p.may_idle:
        return ""
    if p.final or cond.is_finished(p.conditions) or p.requeue or p.delete_job:
        return ""
    if p.create or p.update or p.delete or p.recreating:
        return ""
    if idle.IDLE_LABEL in ((p.cr.get("metadata") or {}).get("labels") or {}):
        return ""
    if any(_on_its_way(pod) for pod in p.pods.values()):
        return ""
    return idle.idle_value(p.cr, pod_signature.signature_of_pods(list(p.pods.values())))


def _on_its_way(pod: dict[str, Any]) -> bool:
    """A pod still starting, with no problem to report: its next state (running, or a problem)
    changes the job's pod signature, and that wake brings the next pass anyway. Labelling the
    job idle before would be a write for nothing, once per batch of pods that start."""
    phase, _, problems = pod_signature.pod_state(pod)
    return phase == "Pending" and not problems
