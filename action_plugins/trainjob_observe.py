"""Action plugin: read what a TrainJob's pass plans from, in one task.

The TrainJob's counterpart of ``training_job_observe``: single-object reads by name through the
operator's proxy (answered from its informer cache), as ``trainer_jobs.observe`` lists them.
Nothing is decided here.

Argument ``reads``, the ``trainjob_observe_args`` filter's result (``trainer_jobs.observe.reads``):
``runtime`` (or null), ``snapshot``, ``objects``, each ``{key, apiVersion, kind, name,
namespace}``, and ``wake`` (the TrainJob's last JobSet signature). In order: the runtime and the
runtime snapshot; what the runtimes add (``trainer_jobs.observe.runtime_reads``: MPI's hostfile,
the PodGroup); the objects. An object that does not exist (404, also for a kind the cluster does
not serve) is left out. A JobSet whose signature is not the last wake's (the cache lags the
companion's watch) is read once more from the API server itself (``Client.past_proxy``).

Returns ``objects``: ``runtime`` (the runtime or null), ``runtime_snapshot`` (the snapshot's
runtime when it is YAML, which the engine does not parse) and a list per ``key`` (``jobsets``,
``configmaps``, ``podgroups``), as ``trainer_jobs.plan.plan`` takes them; when the API server
cannot be reached or answers 429/5xx, ``{"unavailable": <reason>}`` instead, and the plan is a
retry in a few seconds rather than a failed task.
"""

from __future__ import annotations

import json
import os
import sys

import yaml
from ansible.plugins.action import ActionBase

# The shared client lives in lib/ beside this directory (see filter_plugins/training_job.py).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
from trainer_jobs.observe import UNAVAILABLE, behind_wake, runtime_reads
from trainer_jobs.snapshot import DATA_KEY
from training_kube.client import ApiError, Client, resource_path, unavailable


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        reads = self._task.args.get("reads") or {}
        client = Client()
        try:
            objects = observe(client, reads)
        except (ApiError, OSError) as err:
            if unavailable(err):
                return {**result, "changed": False, "objects": {UNAVAILABLE: str(err)}}
            return {**result, "failed": True, "msg": f"reading the TrainJob's objects failed: {err}"}
        finally:
            client.close()
        return {**result, "changed": False, "objects": objects}


def get(client: Client, spec: dict | None) -> dict | None:
    """The object ``spec`` names, or None when there is none."""
    if not spec:
        return None
    path = resource_path(spec["apiVersion"], spec["kind"], spec.get("namespace"), spec["name"])
    try:
        obj = client.request("GET", path)
    except ApiError as err:
        if err.status == 404:
            return None
        raise
    if isinstance(obj, dict):
        obj.setdefault("apiVersion", spec["apiVersion"])
        obj.setdefault("kind", spec["kind"])
        (obj.get("metadata") or {}).pop("managedFields", None)
    return obj


def snapshot_runtime(cm: dict | None) -> tuple[dict | None, dict | None]:
    """The runtime of a snapshot ConfigMap: (what the engine must be handed, the runtime
    whatever its form). The engine parses our snapshots (JSON) itself, not upstream's (YAML);
    a snapshot that is neither is the engine's to report."""
    data = ((cm or {}).get("data") or {}).get(DATA_KEY)
    if not isinstance(data, str):
        return None, None
    try:
        parsed = json.loads(data)
        return None, parsed if isinstance(parsed, dict) else None
    except ValueError:
        pass
    try:
        parsed = yaml.safe_load(data)
    except yaml.YAMLError:
        return None, None
    return (parsed, parsed) if isinstance(parsed, dict) else (None, None)


def observe(client: Client, reads: dict) -> dict:
    runtime = get(client, reads.get("runtime"))
    cm = get(client, reads.get("snapshot"))
    handed, snapshotted = snapshot_runtime(cm)
    objects: dict = {"runtime": runtime, "runtime_snapshot": handed, "jobsets": [], "podgroups": []}
    objects["configmaps"] = [cm] if cm is not None else []
    for spec in [*runtime_reads(reads, [runtime, snapshotted]), *(reads.get("objects") or [])]:
        obj = get(client, spec)
        if spec["kind"] == "JobSet" and behind_wake(reads, obj):
            obj = _past_cache(spec, obj)
        if obj is not None:
            objects.setdefault(spec["key"], []).append(obj)
    return objects


def _past_cache(spec: dict, cached: dict | None) -> dict | None:
    """The JobSet from the API server itself; the cached one when it cannot say."""
    direct = Client.past_proxy()
    if direct is None:
        return cached
    try:
        return get(direct, spec)
    except (ApiError, OSError):
        return cached
    finally:
        direct.close()
