"""Send one reconcile's counts to the job-metrics server (used by the apply action plugin).

Best effort, as events are: counters must never fail a reconcile, so a server that is not
running (the dev loop, molecule without the operator) costs one refused connection and a
warning in the task result.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request

DEFAULT_URL = "http://127.0.0.1:8686/observe"


def observation(job: dict, counts: dict[str, int]) -> dict:
    return {
        "namespace": job["namespace"],
        "framework": job.get("framework") or job["kind"].lower(),
        "kind": job["kind"],
        "group": job["apiVersion"].rpartition("/")[0],
        "counts": counts,
    }


def report(job: dict, counts: dict[str, int], url: str | None = None, timeout: float = 1.0) -> str:
    """POST the counts; returns "" or why they were not recorded."""
    if not counts:
        return ""
    url = url or os.environ.get("JOB_METRICS_URL") or DEFAULT_URL
    request = urllib.request.Request(
        url,
        data=json.dumps(observation(job, counts)).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    # The server is on loopback: never through an HTTP proxy from the environment.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=timeout):
            return ""
    except (urllib.error.URLError, OSError) as err:
        return f"job metrics not recorded at {url}: {err}"
