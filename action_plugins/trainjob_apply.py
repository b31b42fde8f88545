"""Action plugin: carry out a TrainJob's plan (the ``trainjob_plan`` filter's result) in one task.

The TrainJob's counterpart of ``training_job_apply``; nothing is decided here. In order:

1. ``create`` and ``patch``: each object server-side applied with field manager ``trainer``
   (``trainer_jobs.api.FIELD_MANAGER``) and ``force``, as upstream applies them, without the
   proxy's owner identity (the objects carry the TrainJob's controller reference). MPI's SSH
   Secret (named in ``ssh_keys``) is the exception: it is created (POST) with a fresh key pair
   (:func:`ssh_key_pair`, ``trainer_jobs.policies.mpi.ssh_auth_data``), once - the operator may
   not read or patch Secrets, and one that exists answers 409.
2. ``delete``: in the background; one already gone is fine.
3. ``status``: a merge patch of the status subresource (nulls remove keys) under the TrainJob's
   resourceVersion; if the TrainJob changed since it was read (409), nothing more is written
   and the pass runs again a second later from a fresh read.
4. ``events`` on the TrainJob; one ``about`` an object only if this task created or deleted it.
5. ``final``: the label ``training.ato.dev/finished``, once everything else is written, so the
   runtime's watch selector leaves the TrainJob alone from then on.
6. ``idle``: the label ``training.ato.dev/idle`` with this value (``trainer_jobs.idle``), under the
   resourceVersion the status write left (or the one the pass read), and only when the pass
   created, deleted and was refused nothing: a TrainJob changed since is not left idle (409), its
   change has queued the next pass.
7. ``metrics``: ``created`` once the JobSet was created here, ``successful`` and ``failed``
   once the status recording them was written.

An object the API server refuses (anything but 409 for the Secret) is not the TrainJob's
failure, as upstream's controller, which logs the error and tries again with backoff: a
``FailedCreate<Kind>`` Warning is recorded once per TrainJob, kind and HTTP status, the rest of
the plan is applied, and the pass runs again after :data:`REFUSED_RETRY`. When the API server
cannot be reached (or answers 429/5xx) the task asks for the pass again after
``UNAVAILABLE_RETRY_SECONDS`` instead of failing into the runtime's doubling backoff.

Returns ``created``, ``deleted`` (``Kind/name``), ``refused``, ``status_written`` and
``requeue_after``.
"""

from __future__ import annotations

import os
import sys
from datetime import UTC, datetime

from ansible.plugins.action import ActionBase

# The shared client lives in lib/ beside this directory (see filter_plugins/training_job.py).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
from trainer_jobs.api import FIELD_MANAGER
from trainer_jobs.observe import UNAVAILABLE_RETRY_SECONDS
from trainer_jobs.plan import FINISHED_LABEL
from trainer_jobs.policies.mpi import ssh_auth_data
from training_jobs.idle import IDLE_LABEL
from training_kube.client import ApiError, Client, resource_path, unavailable
from training_kube.events import event_object
from training_kube.plain import plain
from training_metrics.report import report

# The TrainJob changed since it was read: plan again from a fresh read.
CONFLICT_RETRY = "1s"
# An object the API server refused: try again, as upstream's controller does.
REFUSED_RETRY = "10s"


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
            done = apply(client, plan)
        except (ApiError, OSError) as err:
            if unavailable(err):
                return {
                    **result,
                    "changed": False,
                    "warnings": [f"the API server is unavailable, trying again: {err}"],
                    "requeue_after": f"{UNAVAILABLE_RETRY_SECONDS}s",
                }
            return {**result, "failed": True, "msg": f"applying the TrainJob's plan failed: {err}"}
        finally:
            client.close()
        warning = done.pop("metrics_warning")
        if warning:
            result["warnings"] = [warning]
        return {
            **result,
            **done,
            "changed": bool(done["created"] or done["deleted"] or done["status_written"]),
        }


def ssh_key_pair() -> tuple[bytes, bytes]:
    """A new ECDSA P-521 key pair, as upstream's MPI plugin makes it: the private key as SEC 1
    PEM (``EC PRIVATE KEY``), the public key as an ``authorized_keys`` line."""
    # Imported here: only an MPI TrainJob's first pass needs it.
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP521R1())
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    return private, public + b"\n"


def _write(client: Client, obj: dict, ssh_keys: list[str]) -> bool:
    """Apply one object (see the module's docstring); whether it was created."""
    meta = obj["metadata"]
    if obj["kind"] != "Secret" or meta["name"] not in ssh_keys:
        return client.apply(obj, FIELD_MANAGER)
    secret = {**obj, "data": ssh_auth_data(*ssh_key_pair())}
    try:
        client.request("POST", resource_path("v1", "Secret", meta.get("namespace")), secret, owner=False)
    except ApiError as err:
        if err.status == 409:
            return False
        raise
    return True


def _objects(client: Client, plan: dict) -> tuple[list[str], list[dict]]:
    """Write ``create`` and ``patch``: (what was created, what the API server refused for good)."""
    created, refused = [], []
    for obj in [*(plan.get("create") or []), *(plan.get("patch") or [])]:
        name = f"{obj['kind']}/{obj['metadata']['name']}"
        try:
            if _write(client, obj, plan.get("ssh_keys") or []):
                created.append(name)
        except ApiError as err:
            if unavailable(err):
                raise
            refused.append({"kind": obj["kind"], "name": name, "status": err.status, "message": err.message})
    return created, refused


def _delete(client: Client, ref: dict) -> bool:
    path = resource_path(ref["apiVersion"], ref["kind"], ref.get("namespace"), ref["name"])
    try:
        client.request("DELETE", path, {"propagationPolicy": "Background"})
        return True
    except ApiError as err:
        if err.status != 404:
            raise
        return False


def _job_path(job: dict) -> str:
    return resource_path(job["apiVersion"], job["kind"], job["namespace"], job["name"])


def _write_status(client: Client, job: dict, status: dict) -> tuple[bool, bool, str]:
    """(written, conflict, the TrainJob's resourceVersion after the write); a TrainJob that is
    gone is neither."""
    patch: dict = {"status": status}
    if job.get("resourceVersion"):
        patch["metadata"] = {"resourceVersion": job["resourceVersion"]}
    try:
        written = client.request(
            "PATCH", _job_path(job) + "/status", patch, content_type="application/merge-patch+json"
        )
        return True, False, ((written or {}).get("metadata") or {}).get("resourceVersion") or ""
    except ApiError as err:
        if err.status == 409:
            return False, True, ""
        if err.status == 404:
            return False, False, ""
        raise


def _post_event(client: Client, job: dict, event: dict, now: str, name: str = "") -> None:
    """Best effort, as everywhere in Kubernetes; a 409 says an event of that name exists."""
    try:
        path = resource_path("v1", "Event", job["namespace"])
        client.request("POST", path, event_object(job, event, now, name=name), owner=False)
    except ApiError as err:
        if err.status in (500, 503):
            raise


def _record(client: Client, job: dict, plan: dict, done: set[str], refused: list[dict]) -> None:
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    for event in plan.get("events") or []:
        about = event.get("about", "")
        if about and about not in done:
            continue
        _post_event(client, job, {k: v for k, v in event.items() if k != "about"}, now)
    for refusal in refused:
        # Named by its cause, so the API server's 409 keeps it to one event per cause.
        reason = f"FailedCreate{refusal['kind']}"
        name = f"{job['name']}.{reason.lower()}.{refusal['status']}.{job.get('uid', '')[:8]}".rstrip(".")
        message = f"Error applying {refusal['name']}: {refusal['message']} (will retry)"
        _post_event(client, job, {"type": "Warning", "reason": reason, "message": message}, now, name)


def _label(client: Client, job: dict, labels: dict, version: str = "") -> bool:
    """Merge ``labels`` into the TrainJob's (under ``version`` if given); False if it changed
    since (409) or is gone."""
    patch: dict = {"metadata": {"labels": labels}}
    if version:
        patch["metadata"]["resourceVersion"] = version
    try:
        client.request(
            "PATCH", _job_path(job), patch, content_type="application/merge-patch+json", owner=False
        )
        return True
    except ApiError as err:
        if err.status == 404 or (version and err.status == 409):
            return False
        raise


def apply(client: Client, plan: dict) -> dict:
    """Write one plan; see the module's docstring. Raises ApiError when the API server is
    unavailable."""
    job = plan["job"]
    created, refused = _objects(client, plan)
    deleted = [f"{r['kind']}/{r['name']}" for r in plan.get("delete") or [] if _delete(client, r)]
    written, conflict, version = False, False, job.get("resourceVersion") or ""
    if isinstance(plan.get("status"), dict) and plan["status"]:
        written, conflict, version = _write_status(client, job, plan["status"])
    _record(client, job, plan, set(created) | set(deleted), refused)
    if plan.get("final") and not (refused or conflict):
        _label(client, job, {FINISHED_LABEL: "true"})
    if plan.get("idle") and version and not (created or deleted or refused or conflict):
        _label(client, job, {IDLE_LABEL: plan["idle"]}, version)
    counts = plan.get("metrics") if isinstance(plan.get("metrics"), dict) else {}
    counted = {
        k: v for k, v in counts.items() if (f"JobSet/{job['name']}" in created if k == "created" else written)
    }
    requeue = plan.get("requeue_after") or ""
    if conflict:
        requeue = CONFLICT_RETRY
    elif refused:
        requeue = REFUSED_RETRY
    return {
        "created": created,
        "deleted": deleted,
        "refused": refused,
        "status_written": written,
        "requeue_after": requeue,
        "metrics_warning": report(job, counted),
    }
