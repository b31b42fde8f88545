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

This module holds the order; each concern is a module of its own: the pass's state
(:mod:`~training_jobs.passes`), replicas (:mod:`~training_jobs.replicas`), status
(:mod:`~training_jobs.job_status`), run policy (:mod:`~training_jobs.run_policy`), the gang's
PodGroup (:mod:`~training_jobs.pod_groups`) and the idle label (:mod:`~training_jobs.idle_pass`).
"""

from __future__ import annotations

import math
from typing import Any, TypedDict

from training_jobs import conditions as cond
from training_jobs import gang, pod_signature, tensorboard
from training_jobs.idle_pass import idle_label
from training_jobs.job_status import (
    count_pods,
    finish,
    metric_counts,
    replica_statuses,
    report_pod_problems,
    set_state,
    status_digest,
)
from training_jobs.model import InvalidJob, Job, ObjectRef, PlanEvent
from training_jobs.passes import Pass, object_ref
from training_jobs.pod_groups import sync_pod_group
from training_jobs.profiles.base import Context, Outcome, Profile
from training_jobs.registry import BY_KIND, profile_of
from training_jobs.replicas import reconcile_pods
from training_jobs.run_policy import apply_limits, close_finished, suspend

# The API server could not be read or written: try again soon, as a planned requeue rather than
# a failed task, whose backoff controller-runtime doubles up to minutes during an outage.
UNAVAILABLE_RETRY_SECONDS = 5
# The observe step's key for "the API server could not be read" (its message).
UNAVAILABLE = "unavailable"
# Written on a job that is final and has nothing pending (clean-pod policy applied, no TTL):
# watches.yaml's selector leaves such jobs to nobody, so they cost nothing, even at a restart.
FINISHED_LABEL = "training.ato.dev/finished"
# A recreated object the API server refused for now (quota, webhook, throttling): try again.
CREATE_RETRY_SECONDS = 10
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


def plan(cr: dict[str, Any], observed: dict[str, Any], config: dict[str, Any], now: str) -> Plan:
    """Decide one reconcile pass. See the module docstring for the order of rules."""
    profile = profile_of(cr)
    kind = cr.get("kind") or profile.kind
    name = (cr.get("metadata") or {}).get("name", "")
    if (observed or {}).get(UNAVAILABLE):
        # The job's objects could not be read: decide nothing from a partial view.
        p = Pass(cr, {}, config, now)
        p.status = p.old_status
        p.requeue_in(UNAVAILABLE_RETRY_SECONDS)
        return _result(p, kind)
    p = Pass(cr, observed, config, now)
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
        p = Pass(cr, observed, config, now)
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


def _plan_valid(profile: Profile, job: Job, p: Pass, kind: str, name: str) -> Plan:
    if cond.is_finished(p.conditions):
        # The status of a finished job is final: its counts are never recomputed from the pods
        # the clean-pod policy left, so an operator restart changes nothing.
        p.status.setdefault("completionTime", p.now)
        close_finished(profile, job, p, cond.is_true(p.conditions, cond.SUCCEEDED))
        return _result(p, kind)
    if job.run_policy.get("suspend"):
        suspend(profile, job, p, kind, name)
        return _result(p, kind)
    if cond.is_true(p.conditions, cond.SUSPENDED):
        p.set_condition(kind, cond.SUSPENDED, cond.FALSE, "Resumed", f"{kind} {name} is resumed.")
        p.event("Normal", cond.reason(kind, "Resumed"), f"{kind} {name} is resumed.")
        p.status["startTime"] = p.now

    ctx = Context(config=p.config, pods=p.pods, now=p.now)
    gang_ready = sync_pod_group(profile, job, p, kind)
    recreating, restarts = reconcile_pods(profile, job, p, ctx, gang_ready)
    report_pod_problems(profile, p)
    counts = count_pods(profile, job, p, recreating)
    if p.permanent_failures:
        # ReconcilePods' verdict, before the framework's status rules (upstream's pod_test.go
        # "Test Unretryable Exit Code" asserts this message verbatim, Go's %q quoting included).
        rtype = p.permanent_failures[-1]
        finish(job, p, cond.FAILED, "Failed", f'job "{name}" is failing because "{rtype}" replica(s) failed.')
    outcome: Outcome = profile.outcome(job, counts, ctx)
    if gang_ready:
        # The deadline's clock starts when the pods may start, not while the gang is held.
        p.status.setdefault("startTime", p.now)
    set_state(job, p, kind, name, outcome, counts)
    if not cond.is_finished(p.conditions):
        apply_limits(job, p, kind, restarts)
    ok = cond.is_true(p.conditions, cond.SUCCEEDED)
    p.status["replicaStatuses"] = replica_statuses(profile, job, counts, ok)
    p.status.update(profile.status_extras(job, counts, ctx, p.conditions))
    if cond.is_finished(p.conditions):
        _drop_starts(p)
        close_finished(profile, job, p, ok)
    elif float(p.config.get("poll_seconds") or 0) > 0:
        # Opt-in (JOB_POLL_SECONDS): pod changes wake the job through the companion's watcher
        # (lib/training_wake), whose periodic re-list is the cheap safety net.
        p.requeue_in(float(p.config["poll_seconds"]))
    return _result(p, kind)


def _drop_starts(p: Pass) -> None:
    """A job that finished in this pass starts and restarts nothing: its pods are left to the
    clean-pod policy."""
    p.create = []
    p.delete = [r for r in p.delete if r not in p.recreating]
    p.events = [e for e in p.events if not e["reason"].startswith(("SuccessfulDelete", "SuccessfulCreate"))]
    p.update = []
    p.requeue = []
    p.restarted_pods = 0


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
    p = Pass(cr, {}, {}, now)
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
    p.delete = [object_ref(o) for o in previous.get("create") or []]
    result = _result(p, kind)
    result["requeue_after"] = ""
    return result


def refused_status_plan(cr: dict[str, Any], previous: dict[str, Any], message: str, now: str) -> Plan:
    """The API server refused the planned status as invalid (it grew past a schema limit).

    Writing it again would fail again on every pass, leaving the job's status frozen: instead
    the job fails with the API's reason, in a status that carries only what is needed.
    """
    p = Pass(cr, {}, {}, now)
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


def _result(p: Pass, kind: str) -> Plan:
    p.status["conditions"] = p.conditions
    changed = p.status != p.old_status
    meta = p.cr.get("metadata") or {}
    status = p.status if changed else None
    final = p.final and FINISHED_LABEL not in (meta.get("labels") or {})
    idle = idle_label(p) if not final else ""
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
        "metrics": metric_counts(p),
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
