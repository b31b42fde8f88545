"""A pass's gang: the job's PodGroup kept in step with its replicas (Volcano, scheduler-plugins),
and what Volcano says while it holds the pods (``training_jobs.gang`` computes the group). Pure."""

from __future__ import annotations

from training_jobs import gang
from training_jobs.model import Job
from training_jobs.passes import Pass
from training_jobs.profiles.base import Profile

# How often a job held for its gang looks at its PodGroup again: Volcano admitting the gang
# triggers no reconcile by itself.
GANG_POLL_SECONDS = 30


# Why the gang's pods are held (the last PodGroupPending event's message), while they are.
PENDING_MESSAGE = "podGroupPendingMessage"


PENDING_MESSAGE_MAX = 4096  # the CRD's maxLength; Volcano's fit errors can list every node


def delete_pod_group(job: Job, p: Pass) -> None:
    """Upstream deletes the PodGroup when the job finishes or is suspended."""
    clear_pending_message(p)
    if job.name in p.pod_groups:
        p.delete_obj(p.pod_groups[job.name])


def sync_pod_group(profile: Profile, job: Job, p: Pass, kind: str) -> bool:
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
        clear_pending_message(p)
    return ready


def clear_pending_message(p: Pass) -> None:
    """The hold is over. The status is written as a merge patch, where only a null removes a key."""
    if PENDING_MESSAGE in p.old_status:
        p.status[PENDING_MESSAGE] = None
    else:
        p.status.pop(PENDING_MESSAGE, None)
