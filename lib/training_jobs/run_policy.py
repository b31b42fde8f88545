"""A pass's run policy: clean-pod policy, TTL after finishing, suspend, active deadline and
backoff limit (training-operator's ``runPolicy``). Pure."""

from __future__ import annotations

from datetime import timedelta

from training_jobs import conditions as cond
from training_jobs import pods as podlib
from training_jobs.job_status import finish, replica_statuses
from training_jobs.model import Job
from training_jobs.passes import Pass, parse_time
from training_jobs.pod_groups import delete_pod_group
from training_jobs.profiles.base import Counts, Profile

CLEAN_NONE, CLEAN_RUNNING, CLEAN_ALL = "None", "Running", "All"


# Without a backoffLimit, a job whose pods are evicted this often fails instead of looping: the
# default backoffLimit of a Kubernetes Job, which counts evictions too.
DEFAULT_EVICTION_LIMIT = 6


def clean_up_finished(profile: Profile, job: Job, p: Pass, succeeded: bool) -> None:
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


def delete_everything(profile: Profile, p: Pass) -> None:
    """Suspend: every pod of the job and every replica's service go (TensorBoard stays)."""
    for pod in sorted(p.pods.values(), key=lambda o: o["metadata"]["name"]):
        if not podlib.terminating(pod):
            p.delete_obj(pod)
    for svc in sorted(p.services.values(), key=lambda o: o["metadata"]["name"]):
        if profile.replica_index(svc) is not None:
            p.delete_obj(svc)


def apply_ttl(job: Job, p: Pass) -> None:
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


def mark_final(job: Job, p: Pass) -> None:
    """A finished job with no TTL has nothing left once this pass's clean-up is written."""
    if job.run_policy.get("ttlSecondsAfterFinished") is None and not p.delete_job:
        p.final = True


def close_finished(profile: Profile, job: Job, p: Pass, succeeded: bool) -> None:
    """What a finished job still gets: the clean-pod policy, its PodGroup gone, the TTL, and the
    label that takes it out of the runtime's watch."""
    clean_up_finished(profile, job, p, succeeded)
    delete_pod_group(job, p)
    apply_ttl(job, p)
    mark_final(job, p)


def suspend(profile: Profile, job: Job, p: Pass, kind: str, name: str) -> None:
    """A suspended job has no pods, Services or PodGroup, nor what would act on it (an
    autoscaler), and says so in its conditions."""
    delete_everything(profile, p)
    delete_pod_group(job, p)
    for (extra_kind, _), obj in sorted(p.extras.items()):
        if extra_kind in profile.extras_removed_while_suspended:
            p.delete_obj(obj)
    if cond.is_true(p.conditions, cond.RUNNING):
        p.set_condition(kind, cond.RUNNING, cond.FALSE, "Suspended", f"{kind} {name} is suspended.")
    p.set_condition(kind, cond.SUSPENDED, cond.TRUE, "Suspended", f"{kind} {name} is suspended.")
    counts = {g.rtype: Counts(replicas=g.replicas) for g in job.groups}
    p.status["replicaStatuses"] = replica_statuses(profile, job, counts, False)


def apply_limits(job: Job, p: Pass, kind: str, restarts: int) -> None:
    deadline = job.run_policy.get("activeDeadlineSeconds")
    start = parse_time(p.status.get("startTime"))
    if deadline is not None and start is not None:
        left = (start + timedelta(seconds=int(deadline)) - p.now_dt).total_seconds()
        if left <= 0:
            finish(
                job,
                p,
                cond.FAILED,
                "Failed",
                f"Job {job.name} has failed because it was active longer than specified deadline",
            )
            return
        p.requeue_in(left)
    limit = job.run_policy.get("backoffLimit")
    if limit is not None and past_backoff_limit(restarts + p.evictions, int(limit)):
        finish(
            job,
            p,
            cond.FAILED,
            "Failed",
            f"Job {job.name} has failed because it has reached the specified backoff limit",
        )
    elif limit is None and p.evictions >= DEFAULT_EVICTION_LIMIT:
        finish(
            job,
            p,
            cond.FAILED,
            "Failed",
            f"Job {job.name} has failed because its pods were evicted {p.evictions} times "
            "(set runPolicy.backoffLimit to allow more)",
        )


def past_backoff_limit(restarts: int, limit: int) -> bool:
    """training-operator's ``PastBackoffLimit``: failed once the restarts reach the limit; a
    limit of 0 fails on the first restart."""
    return restarts > 0 if limit == 0 else restarts >= limit
