"""Action plugin: read what exists of a job, in one task.

Lists the objects of the given kinds that carry the job's selector labels, through the
operator's proxy (answered from its informer cache). Runs inside the Ansible worker: no module
process and no kubernetes client import, which is most of a task's cost.

Arguments: ``reads``, the map ``training_job_observe_args`` returns (one argument, so Ansible
templates it once), with these fields: ``namespace``, ``selector`` (label map), ``kinds`` (list of
``{apiVersion, kind, key[, cluster]}``; ``key`` names the list in the result; ``cluster: true``
lists a cluster-scoped kind whole, without the selector). A kind the cluster does not serve (a
PodGroup CRD that is not installed) reads as empty. ``nodes_of_terminating_pods``: also read the
node of every listed pod that is being deleted, into ``nodes`` (a node that does not exist is left
out), so the engine can tell a lost node from a slow kubelet; no pod is terminating on most
passes, and then nothing is read. ``wake``: the job's last wake
(``training_jobs.pod_signature.wake_of``); when the pods the cache gave disagree with a recent one
(``disagrees_with_wake``: the cache lags the companion's watch, as after an API outage), the pods
are listed again from the API server itself (``Client.past_proxy``), once. ``config``: the
operator's settings, templated once for the pass and handed on in the result. Without ``reads``,
the task's own arguments are these fields.
Returns: ``objects`` - a map from each ``key`` to the objects found; when the API server cannot be
reached or answers 429/5xx, ``{"unavailable": <reason>}`` instead, and the engine plans a short
retry rather than the task failing into the runtime's exponential backoff. ``pods_read_past_cache``
says whether the pods came from the API server itself. ``config``: as given, for the apply task.
"""

from __future__ import annotations

import os
import sys
from datetime import UTC, datetime

from ansible.plugins.action import ActionBase

# The shared client lives in lib/ beside this directory (see filter_plugins/training_job.py).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
from training_jobs.plan import UNAVAILABLE
from training_jobs.pod_signature import disagrees_with_wake
from training_kube.client import ApiError, Client, resource_path, unavailable


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = self._task.args.get("reads") or self._task.args
        client = Client()
        objects = {}
        try:
            for spec in args.get("kinds") or []:
                cluster = bool(spec.get("cluster"))
                try:
                    objects[spec["key"]] = client.list(
                        spec["apiVersion"],
                        spec["kind"],
                        None if cluster else args["namespace"],
                        {} if cluster else dict(args.get("selector") or {}),
                    )
                except ApiError as err:
                    if err.status != 404:
                        raise
                    objects[spec["key"]] = []
            fresh = _pods_past_cache(args, objects.get("pods"))
            if fresh is not None:
                objects["pods"] = fresh
            if args.get("nodes_of_terminating_pods"):
                objects["nodes"] = _nodes_of_terminating(client, objects.get("pods") or [])
        except (ApiError, OSError) as err:
            if unavailable(err):
                return {
                    **result,
                    "changed": False,
                    "objects": {UNAVAILABLE: str(err)},
                    "config": args.get("config"),
                }
            return {**result, "failed": True, "msg": f"reading the job's objects failed: {err}"}
        finally:
            client.close()
        return {
            **result,
            "changed": False,
            "objects": objects,
            "pods_read_past_cache": fresh is not None,
            "config": args.get("config"),
        }


def _pods_past_cache(args: dict, cached: list[dict] | None) -> list[dict] | None:
    """The job's pods from the API server itself, when those from the cache disagree with the
    job's recent wake; None when they do not, or when the API server cannot say (the plan's own
    fence then looks again soon)."""
    wake = args.get("wake")
    if cached is None or not isinstance(wake, dict):
        return None
    if not disagrees_with_wake(wake, cached, datetime.now(UTC)):
        return None
    direct = Client.past_proxy()
    if direct is None:
        return None
    pods = next(k for k in args.get("kinds") or [] if k.get("key") == "pods")
    try:
        return direct.list(
            pods["apiVersion"], pods["kind"], args["namespace"], dict(args.get("selector") or {})
        )
    except (ApiError, OSError):
        return None
    finally:
        direct.close()


def _nodes_of_terminating(client: Client, pods: list[dict]) -> list[dict]:
    names = {
        (pod.get("spec") or {}).get("nodeName")
        for pod in pods
        if (pod.get("metadata") or {}).get("deletionTimestamp")
    }
    nodes = []
    for name in sorted(n for n in names if n):
        try:
            nodes.append(client.request("GET", resource_path("v1", "Node", None, name), owner=False))
        except ApiError as err:
            if err.status != 404:
                raise
    return nodes
