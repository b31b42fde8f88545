"""Action plugin: carry out a reconcile plan (the ``training_job_plan`` filter's result) in one task.

In order: create the planned objects, delete the planned ones, write the job's status
subresource (only when the plan has a new status), record the plan's events on the job, delete
the job itself when its TTL has run out, and count the plan's metrics. Nothing is decided here.

Objects are created with ``fieldValidation=Strict``. If the API server refuses some of the
job's objects as invalid (400, 422: they can never be created as written; an unknown field, such
as a typo in a pod template, is one), the engine's ``rejected_plan`` (pure, like the filter) turns the pass into a
failure of the job, and that plan is applied at once: the job fails with the API's reason and
what this pass created is deleted, so no half-created job is left behind. Any other refusal (a
ResourceQuota's 403, an admission webhook, 429, 5xx) is transient: what was created stays, a
``FailedCreate<Kind>`` Warning is recorded once per job and cause, and the pass asks to be run
again after the plan's ``create_retry_after``, which creates what is still missing.

The status patch carries the job's ``resourceVersion``: if the job changed since it was read (a
stale cache), the API server answers 409, nothing is counted, and the job is planned again from a
fresh read a second later. A status the API server refuses as invalid is replaced by the engine's
``refused_status_plan`` (a Failed condition with the reason) instead of being retried unchanged.
When the API server cannot be reached (or answers 429/5xx) the task does not fail: it asks for
the pass again after ``UNAVAILABLE_RETRY_SECONDS``, a planned requeue that controller-runtime
does not back off exponentially, so jobs move again within seconds of an outage's end.

Argument ``plan``, the filter's result (typed as ``training_jobs.plan.Plan``):
  ``job``: ``{apiVersion, kind, name, namespace, uid, resourceVersion, framework}`` of the job;
  ``apply``: whether there is anything to write at all (nothing is sent otherwise);
  ``create``: objects to create (already-existing ones are left alone);
  ``patch``: objects whose content besides ``metadata`` is merged into the existing object (a
  PodGroup's gang size, an MPIJob's hostfile and launcher Role);
  ``delete``: ``{apiVersion, kind, name, namespace[, force]}`` of objects to delete (missing ones
  are fine; ``force`` deletes at once, for pods stuck on a lost node);
  ``status``: the new status, or null to leave it;
  ``events``: ``{type, reason, message[, about]}`` to record on the job; one with ``about``
  (``Kind/name``) only when that object was really created or deleted by this task;
  ``delete_job``: delete the job (its TTL after finishing has passed);
  ``final``: label the job ``training.ato.dev/finished`` once everything else is written, so the
  runtime's watch selector leaves it alone from then on;
  ``idle``: label the job ``training.ato.dev/idle`` with this value (its generation) once
  everything else is written, under the job's resourceVersion as this pass leaves it: a wake or
  an edit that came meanwhile (409) leaves the job watched. The runtime's watch selector then
  leaves it to the companion (``training_jobs.idle``);
  ``metrics``: ``{counter: n}`` for the job counters (``training_metrics``): counted once the
  status that records them is written (``deleted``: once the job is deleted);
  ``requeue_after``: passed through for the requeue task;
  ``create_retry_after``: the requeue instead, when a create was refused for now.

Returns ``created``, ``deleted`` (names), ``rejected`` (objects the API server refused as
invalid: ``{kind, name, status, message}``), ``deferred`` (those refused for now), ``status_written``,
``requeue_after`` and ``changed``. Events, like creates, are posted without the proxy's owner
identity: with it, the proxy would start a dependent watch on Events, caching every event of the
cluster and needing ``list``/``watch`` on them, which the operator's role does not grant. Like
upstream's, they carry ``involvedObject`` and expire with the API server's event TTL. Other API errors (the API server unreachable, a 5xx on a delete)
fail the task, so ansible-operator retries the reconcile with backoff.
"""

from __future__ import annotations

import os
import sys
from datetime import UTC, datetime

from ansible.plugins.action import ActionBase

# The shared client lives in lib/ beside this directory (see filter_plugins/training_job.py).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
from training_jobs.idle import IDLE_LABEL
from training_jobs.plan import (
    FINISHED_LABEL,
    UNAVAILABLE_RETRY_SECONDS,
    refused_status_plan,
    rejected_plan,
    status_digest,
)
from training_kube.client import ApiError, Client, resource_path, unavailable
from training_kube.events import event_object
from training_kube.plain import plain
from training_metrics.report import report

# API answers that retrying will not change: the object itself is invalid.
PERMANENT = {400, 422}
# The job changed since it was read: plan again from a fresh read.
CONFLICT_RETRY = "1s"


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        plan = plain(self._task.args.get("plan") or {})
        if not plan.get("apply"):
            return {**result, "changed": False, "requeue_after": plan.get("requeue_after") or ""}
        client = Client()
        try:
            done = _apply(client, plan)
            if done["rejected"] or done["status_refused"]:
                now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
                job = plan["job"]
                path = resource_path(job["apiVersion"], job["kind"], job["namespace"], job["name"])
                cr = client.request("GET", path)
                if done["rejected"]:
                    failure = rejected_plan(cr, plan, done["rejected"], now)
                else:
                    failure = refused_status_plan(cr, plan, done["status_refused"], now)
                undone = _apply(client, failure)
                done = {
                    **undone,
                    "created": done["created"],
                    "deleted": done["deleted"] + undone["deleted"],
                    "rejected": done["rejected"],
                    "deferred": done["deferred"],
                }
                plan = failure
        except (ApiError, OSError) as err:
            if unavailable(err):
                return {
                    **result,
                    "changed": False,
                    "warnings": [f"the API server is unavailable, trying again: {err}"],
                    "requeue_after": f"{UNAVAILABLE_RETRY_SECONDS}s",
                }
            return {**result, "failed": True, "msg": f"applying the plan failed: {err}"}
        finally:
            client.close()
        warning = done.pop("metrics_warning")
        if warning:
            result["warnings"] = [*result.get("warnings", []), warning]
        requeue = plan.get("requeue_after") or ""
        if done.pop("conflict"):
            requeue = CONFLICT_RETRY
        elif done["deferred"] and plan.get("create_retry_after"):
            requeue = plan["create_retry_after"]
        return {
            **result,
            **done,
            "changed": bool(done["created"] or done["deleted"] or done["status_written"]),
            "requeue_after": requeue,
        }


def _apply(client: Client, plan: dict) -> dict:
    """Write one plan; see the module docstring. Raises ApiError on transient errors."""
    job = plan["job"]
    created, rejected, deferred = _create(client, plan.get("create") or [])
    for obj in plan.get("patch") or []:
        meta = obj["metadata"]
        path = resource_path(obj["apiVersion"], obj["kind"], meta.get("namespace"), meta["name"])
        body = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata")}
        client.request("PATCH", path, body, content_type="application/merge-patch+json")
    deleted = [
        f"{ref['kind']}/{ref['name']}"
        for ref in plan.get("delete") or []
        if _delete(
            client, resource_path(ref["apiVersion"], ref["kind"], ref.get("namespace"), ref["name"]), ref
        )
    ]
    job_path = resource_path(job["apiVersion"], job["kind"], job["namespace"], job["name"])
    status_written, conflict, status_refused = False, False, ""
    version = job.get("resourceVersion") or ""  # the job's, as this pass leaves it
    # A plan without a new status carries null; only a mapping is a status to write.
    if isinstance(plan.get("status"), dict) and plan["status"] and not rejected:
        status_written, conflict, status_refused, version = _write_status(
            client, job_path, plan["status"], job
        )
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    for refusal in deferred:
        _record_once(client, job, refusal, now)
    _record_events(client, job, plan.get("events") or [], set(created) | set(deleted), now)
    job_deleted = bool(plan.get("delete_job")) and _delete(client, job_path, {})
    if job_deleted:
        deleted.append(f"{job['kind']}/{job['name']}")
    if plan.get("final") and not (rejected or deferred or conflict or status_refused or job_deleted):
        try:
            client.request(
                "PATCH",
                job_path,
                {"metadata": {"labels": {FINISHED_LABEL: "true"}}},
                content_type="application/merge-patch+json",
                owner=False,
            )
        except ApiError as err:
            if err.status != 404:
                raise
    quiet = not (created or deleted or rejected or deferred or conflict or status_refused or job_deleted)
    if plan.get("idle") and version and quiet:
        _leave_idle(client, job_path, plan["idle"], version)
    counts = plan.get("metrics") if isinstance(plan.get("metrics"), dict) else {}
    counted = {k: v for k, v in counts.items() if (job_deleted if k == "deleted" else status_written)}
    return {
        "created": created,
        "deleted": deleted,
        "rejected": rejected,
        "deferred": deferred,
        "status_written": status_written,
        "status_refused": status_refused,
        "conflict": conflict,
        "metrics_warning": report(job, counted),
    }


def _create(client: Client, objects: list[dict]) -> tuple[list[str], list[dict], list[dict]]:
    """POST each object; returns what was created and the refusals, invalid ones apart from
    those refused for now. An object that already exists (409) is neither."""
    created, rejected, deferred = [], [], []
    for obj in objects:
        meta = obj["metadata"]
        path = resource_path(obj["apiVersion"], obj["kind"], meta.get("namespace"))
        try:
            # Strict: a field the API server does not know (a typo in a pod template) refuses
            # the object, and so fails the job with its path, instead of being dropped.
            client.request("POST", path, obj, owner=False, query={"fieldValidation": "Strict"})
            created.append(f"{obj['kind']}/{meta['name']}")
        except ApiError as err:
            if err.status == 409:
                continue
            refusal = {
                "kind": obj["kind"],
                "name": meta["name"],
                "status": err.status,
                "message": err.message,
            }
            (rejected if err.status in PERMANENT else deferred).append(refusal)
    return created, rejected, deferred


def _delete(client: Client, path: str, ref: dict) -> bool:
    """DELETE in the background (at once with ``force``); False when it was already gone."""
    options = {"propagationPolicy": "Background"}
    if ref.get("force"):
        options["gracePeriodSeconds"] = 0
    try:
        client.request("DELETE", path, options)
        return True
    except ApiError as err:
        if err.status != 404:
            raise
        return False


def _write_status(client: Client, job_path: str, status: dict, job: dict) -> tuple[bool, bool, str, str]:
    """(written, conflict, the API server's reason if it refused the status as invalid, the
    job's resourceVersion after the write or "" when the job may not be labelled idle under
    it); a job that is gone is none of them."""
    patch: dict = {"status": status}
    if job.get("resourceVersion"):
        patch["metadata"] = {"resourceVersion": job["resourceVersion"]}
    try:
        written, version = _patch_status(client, job_path, patch, job)
        return written, not written, "", version
    except ApiError as err:
        if err.status in PERMANENT:
            return False, False, err.message, ""
        if err.status != 404:
            raise
        return False, False, "", ""


def _leave_idle(client: Client, job_path: str, value: str, version: str) -> bool:
    """Label the job IDLE_LABEL under ``version``; False if it changed since (409) or is gone."""
    patch = {"metadata": {"resourceVersion": version, "labels": {IDLE_LABEL: value}}}
    try:
        client.request("PATCH", job_path, patch, content_type="application/merge-patch+json", owner=False)
        return True
    except ApiError as err:
        if err.status in (404, 409):
            return False
        raise


def _record_events(client: Client, job: dict, events: list[dict], done: set[str], now: str) -> None:
    for event in events:
        # An event about a create or delete is only true if that write happened here
        # (the object may already have existed: the proxy's cache can lag).
        about = event.pop("about", "")
        if about and about not in done:
            continue
        try:
            client.request(
                "POST",
                resource_path("v1", "Event", job["namespace"]),
                event_object(job, event, now),
                owner=False,
            )
        except ApiError as err:
            # Events are best effort, as everywhere in Kubernetes.
            if err.status in (500, 503):
                raise


def _patch_status(client: Client, job_path: str, patch: dict, job: dict) -> tuple[bool, str]:
    """Write the status under the job's resourceVersion: (written, the job's resourceVersion
    after the write); not written on a conflict that needs a new plan.

    The companion's wake annotation changes the job's resourceVersion too, often between the
    read and this write. When the job read again has the generation and the status the plan
    started from, only its metadata moved and the plan still holds: the write is retried once
    under the new resourceVersion instead of planning again.
    """
    for attempt in range(2):
        try:
            written = client.request(
                "PATCH", job_path + "/status", patch, content_type="application/merge-patch+json"
            )
            # The version is what the job may be labelled idle under: none after a conflict, as
            # the change that caused it (a wake) may have queued a pass the label would drop.
            version = ((written or {}).get("metadata") or {}).get("resourceVersion") or ""
            return True, "" if attempt else version
        except ApiError as err:
            if err.status != 409 or attempt:
                if err.status == 409:
                    return False, ""
                raise
        fresh = client.request("GET", job_path, owner=False)
        meta = fresh.get("metadata") or {}
        same_spec = str(meta.get("generation", "")) == str(job.get("generation", ""))
        if not same_spec or status_digest(fresh.get("status")) != job.get("statusDigest"):
            return False, ""
        patch["metadata"] = {"resourceVersion": meta.get("resourceVersion", "")}
    return False, ""


def _record_once(client: Client, job: dict, refusal: dict, now: str) -> None:
    """A ``FailedCreate<Kind>`` Warning, once per job, kind and HTTP status: the event's name is
    derived from them, so the API server's 409 says it was already recorded."""
    reason = f"FailedCreate{refusal['kind']}"
    name = f"{job['name']}.{reason.lower()}.{refusal['status']}.{job.get('uid', '')[:8]}".rstrip(".")
    message = f"Error creating: {refusal['message']} (will retry)"
    event = event_object(job, {"type": "Warning", "reason": reason, "message": message}, now, name=name)
    try:
        client.request("POST", resource_path("v1", "Event", job["namespace"]), event, owner=False)
    except ApiError as err:
        if err.status in (500, 503):
            raise
