"""Action plugin: carry out a reconcile plan in one task.

In order: create the planned objects, delete the planned ones, write the job's status
subresource (only when the plan has a new status), record the plan's events on the job, and
delete the job itself when its TTL has run out. Nothing is decided here; the plan comes from the
``training_job_plan`` filter.

Arguments:
  ``job``: ``{apiVersion, kind, name, namespace, uid}`` of the job;
  ``create``: objects to create (already-existing ones are left alone);
  ``patch``: objects whose ``spec`` is merged into the existing object (a PodGroup's gang size);
  ``delete``: ``{apiVersion, kind, name, namespace[, force]}`` of objects to delete (missing ones
  are fine; ``force`` deletes at once, for pods stuck on a lost node);
  ``status``: the new status, or null to leave it;
  ``events``: ``{type, reason, message[, about]}`` to record on the job; one with ``about``
  (``Kind/name``) only when that object was really created or deleted by this task;
  ``delete_job``: delete the job (its TTL after finishing has passed);
  ``metrics``: ``{counter: n}`` for the job counters (``training_metrics``): counted once the
  status that records them is written (``deleted``: once the job is deleted).

Returns ``created``, ``deleted`` (names), ``rejected`` (objects the API server refused as
invalid or forbidden: ``{kind, name, status, message}``) and ``changed``. Transient API errors
fail the task, so ansible-operator retries the reconcile with backoff.
"""

from __future__ import annotations

import os
import secrets
import sys
from datetime import UTC, datetime

from ansible.plugins.action import ActionBase

# The shared client lives in lib/ beside this directory (see filter_plugins/training_job.py).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
from training_kube.client import ApiError, Client, resource_path
from training_metrics.report import report

REPORTING_COMPONENT = "ansible-training-operator"
# API answers that retrying will not change: the object itself is refused.
PERMANENT = {400, 403, 422}


def _plain(value):
    """Ansible's unsafe and tagged types → plain JSON-able data."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    return str(value)


def event_object(job: dict, event: dict, now: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{job['name']}.{secrets.token_hex(8)}", "namespace": job["namespace"]},
        "involvedObject": {
            "apiVersion": job["apiVersion"],
            "kind": job["kind"],
            "name": job["name"],
            "namespace": job["namespace"],
            "uid": job.get("uid", ""),
        },
        "type": event.get("type", "Normal"),
        "reason": event["reason"],
        "message": event.get("message", ""),
        "source": {"component": REPORTING_COMPONENT},
        "reportingComponent": REPORTING_COMPONENT,
        "reportingInstance": REPORTING_COMPONENT,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = _plain(dict(self._task.args))
        job = args["job"]
        created, deleted, rejected = [], [], []
        job_deleted = False
        client = Client()
        try:
            for obj in args.get("create") or []:
                meta = obj["metadata"]
                path = resource_path(obj["apiVersion"], obj["kind"], meta.get("namespace"))
                try:
                    client.request("POST", path, obj, owner=False)
                    created.append(f"{obj['kind']}/{meta['name']}")
                except ApiError as err:
                    if err.status == 409:
                        continue
                    if err.status in PERMANENT:
                        rejected.append(
                            {
                                "kind": obj["kind"],
                                "name": meta["name"],
                                "status": err.status,
                                "message": err.message,
                            }
                        )
                        continue
                    raise
            for obj in args.get("patch") or []:
                meta = obj["metadata"]
                path = resource_path(obj["apiVersion"], obj["kind"], meta.get("namespace"), meta["name"])
                client.request(
                    "PATCH", path, {"spec": obj["spec"]}, content_type="application/merge-patch+json"
                )
            for ref in args.get("delete") or []:
                path = resource_path(ref["apiVersion"], ref["kind"], ref.get("namespace"), ref["name"])
                options = {"propagationPolicy": "Background"}
                if ref.get("force"):
                    options["gracePeriodSeconds"] = 0
                try:
                    client.request("DELETE", path, options)
                    deleted.append(f"{ref['kind']}/{ref['name']}")
                except ApiError as err:
                    if err.status != 404:
                        raise
            job_path = resource_path(job["apiVersion"], job["kind"], job["namespace"], job["name"])
            status_written = False
            # Ansible renders a null plan status as a string; only a mapping is a status to write.
            if isinstance(args.get("status"), dict) and args["status"] and not rejected:
                try:
                    client.request(
                        "PATCH",
                        job_path + "/status",
                        {"status": args["status"]},
                        content_type="application/merge-patch+json",
                    )
                    status_written = True
                except ApiError as err:
                    if err.status != 404:
                        raise
            now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            done = set(created) | set(deleted)
            for event in args.get("events") or []:
                # An event about a create or delete is only true if that write happened here
                # (the object may already have existed: the proxy's cache can lag).
                about = event.pop("about", "")
                if about and about not in done:
                    continue
                try:
                    client.request(
                        "POST", resource_path("v1", "Event", job["namespace"]), event_object(job, event, now)
                    )
                except ApiError as err:
                    # Events are best effort, as everywhere in Kubernetes.
                    if err.status in (500, 503):
                        raise
            if args.get("delete_job"):
                try:
                    client.request("DELETE", job_path, {"propagationPolicy": "Background"})
                    deleted.append(f"{job['kind']}/{job['name']}")
                    job_deleted = True
                except ApiError as err:
                    if err.status != 404:
                        raise
        except (ApiError, OSError) as err:
            return {
                **result,
                "failed": True,
                "msg": f"applying the plan failed: {err}",
                "created": created,
                "deleted": deleted,
            }
        finally:
            client.close()
        counts = args.get("metrics") if isinstance(args.get("metrics"), dict) else {}
        counted = {k: v for k, v in counts.items() if (job_deleted if k == "deleted" else status_written)}
        metrics_warning = report(job, counted)
        if metrics_warning:
            result["warnings"] = [*result.get("warnings", []), metrics_warning]
        return {
            **result,
            "changed": bool(created or deleted or status_written),
            "created": created,
            "deleted": deleted,
            "rejected": rejected,
            "status_written": status_written,
        }
