"""Kubeflow job conditions, with training-operator's ordering rules and without its known bugs.

Rules (training-operator ``pkg/util/status.go``), applied by :func:`set_condition`:

1. once the job has ``Failed=True`` or ``Succeeded=True`` nothing changes any more (upstream only
   froze after Failed, so one pass could end with both Succeeded and Failed True; we never do);
2. a condition equal in type, status and reason to the current one is a no-op;
3. with the same status, ``lastTransitionTime`` is kept;
4. the condition is removed and appended at the end: the last entry is the current state, which the
   CRDs' ``State`` printer column shows;
5. ``Running`` and ``Restarting`` exclude each other;
6. ``Succeeded`` or ``Failed`` turn an existing ``Running`` to ``False``.

Only these six types are Kubeflow's (:data:`KUBEFLOW_TYPES`); :func:`kubeflow_only` takes out
what the Ansible runtime writes onto a job's status when a run of it fails (see there).
"""

from __future__ import annotations

from typing import Any

CREATED = "Created"
RUNNING = "Running"
RESTARTING = "Restarting"
SUCCEEDED = "Succeeded"
FAILED = "Failed"
SUSPENDED = "Suspended"
# training-operator's JobConditionType values: the only condition types a job's status holds.
KUBEFLOW_TYPES = (CREATED, RUNNING, RESTARTING, SUCCEEDED, FAILED, SUSPENDED)

TRUE = "True"
FALSE = "False"


def reason(kind: str, what: str) -> str:
    """Upstream's reason format, e.g. ``TFJobRunning``."""
    return f"{kind}{what}"


def find(conditions: list[dict[str, Any]], ctype: str) -> dict[str, Any] | None:
    for c in conditions or []:
        if c.get("type") == ctype:
            return c
    return None


def is_true(conditions: list[dict[str, Any]], ctype: str) -> bool:
    c = find(conditions, ctype)
    return c is not None and c.get("status") == TRUE


def is_finished(conditions: list[dict[str, Any]]) -> bool:
    return is_true(conditions, SUCCEEDED) or is_true(conditions, FAILED)


def current_state(conditions: list[dict[str, Any]]) -> str:
    """What the ``State`` column shows: the type of the last condition."""
    return conditions[-1]["type"] if conditions else ""


def set_condition(
    conditions: list[dict[str, Any]],
    ctype: str,
    status: str,
    why: str,
    message: str,
    now: str,
) -> list[dict[str, Any]]:
    """Return a new condition list with ``ctype`` set; the input is not modified."""
    conditions = [dict(c) for c in conditions or []]
    if is_finished(conditions):
        return conditions
    current = find(conditions, ctype)
    if current and current.get("status") == status and current.get("reason") == why:
        return conditions
    transition = now
    if current and current.get("status") == status:
        transition = current.get("lastTransitionTime", now)
    new = {
        "type": ctype,
        "status": status,
        "reason": why,
        "message": message,
        "lastUpdateTime": now,
        "lastTransitionTime": transition,
    }
    kept = []
    for c in conditions:
        if c["type"] == ctype:
            continue
        if {ctype, c["type"]} == {RUNNING, RESTARTING}:
            continue
        if ctype in (SUCCEEDED, FAILED) and c["type"] == RUNNING and c.get("status") != FALSE:
            c = {**c, "status": FALSE, "lastUpdateTime": now, "lastTransitionTime": now}
        kept.append(c)
    kept.append(new)
    return kept


def foreign_types(conditions: list[dict[str, Any]]) -> list[str]:
    """The condition types in ``conditions`` that are not Kubeflow's, sorted."""
    return sorted({str(c.get("type")) for c in conditions or [] if c.get("type") not in KUBEFLOW_TYPES})


def kubeflow_only(conditions: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    """``conditions`` as they were before the Ansible runtime wrote onto them.

    ansible-operator marks a run that failed (``markError`` in its ``controller/reconcile.go``,
    even with ``manageStatus: false``): it appends ``Failure`` (True, reason ``Failed``), turns an
    existing ``Running`` to ``False`` (and moves it last), and rewrites every condition without
    ``lastUpdateTime``. Kubeflow clients read the conditions as the job's history and the last
    one as its state, so each pass undoes that: types that are not Kubeflow's go; a ``Running``
    that is ``False`` with the running reason on a job neither finished nor suspended is ``True``
    again (upstream turns ``Running`` off only when the job finishes, with the reason kept, or is
    suspended, with reason ``Suspended``; a restart replaces it), its transition time kept; a
    missing ``lastUpdateTime`` is the transition time. The input is not modified.
    """
    kept = [dict(c) for c in conditions or [] if c.get("type") in KUBEFLOW_TYPES]
    for c in kept:
        if "lastUpdateTime" not in c and c.get("lastTransitionTime"):
            c["lastUpdateTime"] = c["lastTransitionTime"]
    running = find(kept, RUNNING)
    if (
        running is not None
        and running.get("status") == FALSE
        and running.get("reason") == reason(kind, "Running")
        and not is_finished(kept)
        and not is_true(kept, SUSPENDED)
    ):
        running["status"] = TRUE
    return kept
