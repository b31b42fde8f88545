"""Events on a job, as the apply plugins of both engines post them.

Posted without the proxy's owner identity: with it, the proxy would start a dependent watch on
Events, caching every event of the cluster (``training_job_apply``'s docstring says more). Like
upstream's, they name the job in ``involvedObject`` and expire with the API server's event TTL.
"""

from __future__ import annotations

import secrets

REPORTING_COMPONENT = "ansible-training-operator"


def event_object(job: dict, event: dict, now: str, name: str = "") -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name or f"{job['name']}.{secrets.token_hex(8)}", "namespace": job["namespace"]},
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
