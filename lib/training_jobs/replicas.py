"""A pass's replicas: the framework's extra objects, each replica's pod and service created,
recreated or left, scale-down, and when to look at a terminating pod again. Pure."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from training_jobs import gang, tensorboard
from training_jobs import pod_problems as problems
from training_jobs import pods as podlib
from training_jobs.model import Job, ReplicaGroup
from training_jobs.passes import Pass, object_ref, parse_time
from training_jobs.profiles.base import Context, Profile

# Waiting for something that triggers no reconcile by itself: a deleted pod to be gone so its
# replacement can be created, a config map or a Volcano PodGroup before the pods.
WAIT_SECONDS = 2


# A pod still Terminating this long after its deletion deadline is on a lost node (#2072): it is
# force-deleted so its replica can be created again.
LOST_POD_GRACE_SECONDS = 30


def until_gone(pod: dict[str, Any], now: datetime) -> float:
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


def reconcile_extras(profile: Profile, job: Job, p: Pass, ctx: Context) -> bool:
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


def reconcile_replica(
    profile: Profile,
    job: Job,
    g: ReplicaGroup,
    i: int,
    p: Pass,
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
            p.requeue_in(until_gone(pod, p.now_dt))
    elif problems.evicted(pod):
        recreating.add(name)
        if p.count_once(pod):
            p.evictions += 1
            p.event("Warning", "Evicted", f"Pod {job.namespace}/{name} was evicted: recreating it")
        p.delete_obj(pod)
        p.recreating.append(object_ref(pod))
    elif podlib.should_recreate(g, pod, profile.default_container):
        recreating.add(name)
        if p.count_once(pod):
            code = podlib.exit_code(pod, profile.default_container)
            p.event("Normal", "ExitedWithCode", f"Pod: {job.namespace}.{name} exited with code {code}")
            p.restart_count += 1 + podlib.container_restarts(pod)
            p.restarted_pods += 1
        # The replacement is created on the pass the deletion triggers.
        p.delete_obj(pod)
        p.recreating.append(object_ref(pod))
    elif podlib.permanent_exit(g, pod, profile.default_container):
        p.permanent_failures.append(g.rtype)
    elif g.restart_policy != "Never":
        live_restarts = podlib.container_restarts(pod)
    if profile.wants_services(job) and profile.service_name(job, g, i) not in p.services:
        p.create_obj(podlib.desired_service(profile, job, g, i))
    return live_restarts


def scale_down(profile: Profile, job: Job, p: Pass) -> None:
    """Our pods and services beyond the current replica counts go."""
    wanted = {profile.pod_name(job, g, i) for g in job.groups for i in range(g.replicas)}
    for name, pod in sorted(p.pods.items()):
        if name not in wanted and profile.replica_index(pod) is not None and not podlib.terminating(pod):
            p.delete_obj(pod)
    wanted_services = {profile.service_name(job, g, i) for g in job.groups for i in range(g.replicas)}
    for name, svc in sorted(p.services.items()):
        if name not in wanted_services and profile.replica_index(svc) is not None:
            p.delete_obj(svc)


def reconcile_pods(
    profile: Profile, job: Job, p: Pass, ctx: Context, gang_ready: bool
) -> tuple[set[str], int]:
    """Create, scale down and recreate pods and services.

    Returns the pods being recreated and the job's restarts so far: recreations recorded in the
    status plus in-place container restarts of current pods under a restarting policy. Evicted
    pods are recreated whatever the restart policy and do not count as restarts (#1570).
    """
    extras_ready = reconcile_extras(profile, job, p, ctx)
    hold_pods = (profile.extra_objects_first(job, ctx) and not extras_ready) or not gang_ready
    if hold_pods:
        # What the pods wait for (the framework's config map, Volcano admitting the gang) changes
        # nothing that would reconcile the job: look again soon.
        p.requeue_in(WAIT_SECONDS)
    recreating: set[str] = set()
    live_restarts = sum(
        reconcile_replica(profile, job, g, i, p, ctx, hold_pods, recreating)
        for g in job.groups
        for i in range(g.replicas)
    )
    scale_down(profile, job, p)
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
