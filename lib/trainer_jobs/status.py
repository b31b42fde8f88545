"""``status``: a TrainJob's status as Trainer v2.3's controller writes it.

Upstream sources (kubeflow/trainer v2.3.0): ``pkg/controller/trainjob_controller.go``
(``setSuspendedCondition``, ``setTrainJobStatus``) and the JobSet plugin's ``Status``. Conditions
follow ``meta.SetStatusCondition``: a new type is appended, an existing one is updated in place
(its ``lastTransitionTime`` moves only when its status does), so the list keeps the order in
which types first appeared and the ``State`` column (the last type) is upstream's too.

- ``Suspended``: True (``Suspended``) while ``spec.suspend``; False (``Resumed``) once resumed;
  absent for a TrainJob never suspended.
- ``Complete`` / ``Failed``: the JobSet's ``Completed`` / ``Failed`` condition when True, copied
  whole (reason, message, transition time) under the TrainJob's type name.
- A ``Failed`` with reason ``DeadlineExceeded`` stays as it is, whatever the JobSet says.
- ``jobsStatus``: one entry per entry of the JobSet's ``replicatedJobsStatus``, in its order, with
  all six fields (Kueue reads ``active``, ``ready`` and ``succeeded``); absent when the JobSet has
  none. Without a JobSet the last ``jobsStatus`` stays.

There is no ``Running`` condition: the SDK reports ``Running`` only for a TrainJob with no
condition at all.
"""

from __future__ import annotations

import copy
from typing import Any

from trainer_jobs import api

JOB_STATUS_FIELDS = ("ready", "succeeded", "failed", "active", "suspended")


def set_condition(conditions: list[dict[str, Any]], new: dict[str, Any], now: str) -> list[dict[str, Any]]:
    """``meta.SetStatusCondition`` on a copy of ``conditions``."""
    result = [dict(c) for c in conditions or []]
    existing = next((c for c in result if c.get("type") == new["type"]), None)
    if existing is None:
        result.append({**new, "lastTransitionTime": new.get("lastTransitionTime") or now})
        return result
    if existing.get("status") != new.get("status"):
        existing["status"] = new.get("status")
        existing["lastTransitionTime"] = new.get("lastTransitionTime") or now
    for field in ("reason", "message"):
        existing[field] = new.get(field, "")
    if new.get("observedGeneration"):
        existing["observedGeneration"] = new["observedGeneration"]
    else:
        existing.pop("observedGeneration", None)
    return result


def condition(ctype: str, status: str, reason: str, message: str) -> dict[str, Any]:
    return {"type": ctype, "status": status, "reason": reason, "message": message}


def suspended_condition(
    trainjob: dict[str, Any], conditions: list[dict[str, Any]], now: str
) -> list[dict[str, Any]]:
    """``setSuspendedCondition``."""
    if api.suspended(trainjob):
        new = condition(api.SUSPENDED, api.TRUE, api.REASON_SUSPENDED, api.MESSAGE_SUSPENDED)
    elif api.is_true(conditions, api.SUSPENDED):
        new = condition(api.SUSPENDED, api.FALSE, api.REASON_RESUMED, api.MESSAGE_RESUMED)
    else:
        return conditions
    return set_condition(conditions, new, now)


def jobs_status(jobset: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"name": rj.get("name", ""), **{f: int(rj.get(f) or 0) for f in JOB_STATUS_FIELDS}}
        for rj in (jobset.get("status") or {}).get("replicatedJobsStatus") or []
    ]


def from_jobset(status: dict[str, Any], jobset: dict[str, Any], now: str) -> dict[str, Any]:
    """``setTrainJobStatus`` with the JobSet plugin's ``Status``."""
    conditions = status.get("conditions") or []
    deadline = api.condition(conditions, api.FAILED)
    if deadline is not None and deadline.get("reason") != api.REASON_DEADLINE_EXCEEDED:
        deadline = None
    jobset_conditions = (jobset.get("status") or {}).get("conditions") or []
    for source, target in ((api.JOBSET_COMPLETED, api.COMPLETE), (api.JOBSET_FAILED, api.FAILED)):
        found = api.condition(jobset_conditions, source)
        if found is not None and found.get("status") == api.TRUE:
            conditions = set_condition(conditions, {**found, "type": target}, now)
    if deadline is not None:
        conditions = set_condition(conditions, deadline, now)
    result = {**status, "conditions": conditions}
    entries = jobs_status(jobset)
    if entries:
        result["jobsStatus"] = entries
    else:
        result.pop("jobsStatus", None)
    return result


def status(trainjob: dict[str, Any], jobset: dict[str, Any] | None, now: str) -> dict[str, Any]:
    """The TrainJob's new status from its current one and its JobSet (None: none observed)."""
    result = copy.deepcopy(trainjob.get("status") or {})
    result["conditions"] = suspended_condition(trainjob, result.get("conditions") or [], now)
    if jobset is not None:
        result = from_jobset(result, jobset, now)
    if not result["conditions"]:
        del result["conditions"]
    return result
