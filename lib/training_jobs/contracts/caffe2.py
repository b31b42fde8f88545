"""Caffe2's env contract as the final kubeflow/caffe2-operator (master 3773f5b) writes it.

Upstream sources: ``pkg/controller/controller_pod.go`` (``createNewPod``), ``pkg/controller/
config.go`` (``genCaffe2ConfigJSONStr``, ``genClusterSpec``, ``genGeneralName``) and
``pkg/apis/caffe2/v1alpha1/{types,defaults}.go`` (``Caffe2BackendSpec``, ``Caffe2Port``,
the ``RuntimeID`` default). There is a single ``worker`` group; every container of every pod
gets the same seven variables.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from training_jobs.contracts.tensorflow import go_marshal
from training_jobs.model import InvalidJob

CAFFE2_PORT = 2222
REPLICA_TYPE = "worker"


def host_names(namespace: str, job_name: str, replicas: int) -> list[str]:
    """``genClusterSpec``'s host names, ``<ns>-<job>-worker-<i>``, without the port.

    Upstream builds them from the informer key ``<ns>/<name>`` (``/`` becomes ``-``; the key is
    just the name when the namespace is empty). It creates no Services, so these names only
    resolve if the user arranges it; the example relies on ``hostNetwork`` and Redis instead.
    """
    key = f"{namespace}/{job_name}" if namespace else job_name
    return [f"{key}-{REPLICA_TYPE}-{i}".replace("/", "-") for i in range(int(replicas))]


def caffe2_config(namespace: str, job_name: str, replicas: int, index: int) -> str:
    """``genCaffe2ConfigJSONStr``: ``{"cluster":{"worker":[...]},"task":{"type":"worker","index":i}}``."""
    hosts = [f"{h}:{CAFFE2_PORT}" for h in host_names(namespace, job_name, replicas)]
    return go_marshal({"cluster": {REPLICA_TYPE: hosts}, "task": {"type": REPLICA_TYPE, "index": int(index)}})


def caffe2_env(
    namespace: str,
    job_name: str,
    replicas: int,
    index: int,
    run_id: str,
    backend: Mapping[str, Any] | None,
) -> list[dict[str, str]]:
    """``createNewPod``'s env, in upstream's order: REDIS_HOST, REDIS_PORT, NFS_PATH, SHARD_ID,
    NUM_SHARDS, RUN_ID, CAFFE2_CONFIG.

    ``backend`` is ``spec.backendSpecs`` (``backendType``, ``redisHost``, ``redisPort``,
    ``nfsPath``). Upstream copies the fields whatever the backend type, and ``redisPort`` is a
    Go ``uint`` formatted with ``strconv.Itoa``, so an unset port is ``"0"``, not ``""``.
    Without ``backendSpecs`` upstream dereferences nil and crashes; we write the zero values.
    """
    backend = backend or {}
    return [
        {"name": "REDIS_HOST", "value": str(backend.get("redisHost") or "")},
        {"name": "REDIS_PORT", "value": str(int(backend.get("redisPort") or 0))},
        {"name": "NFS_PATH", "value": str(backend.get("nfsPath") or "")},
        {"name": "SHARD_ID", "value": str(int(index))},
        {"name": "NUM_SHARDS", "value": str(int(replicas))},
        {"name": "RUN_ID", "value": run_id},
        {"name": "CAFFE2_CONFIG", "value": caffe2_config(namespace, job_name, replicas, index)},
    ]


def run_id_for(job: Mapping[str, Any]) -> str:
    """The job's ``RUN_ID``: ``spec.RuntimeID`` if set, else its creation time in Unix seconds.

    Upstream's defaulter fills an empty ``RuntimeID`` with ``time.Now().Unix()`` when it first
    sees the job - a clock read we cannot repeat on every reconcile. ``creationTimestamp`` is
    the same kind of value (the second the job appeared), fixed for the job's life, so all pods
    of a job, including replacements, share one Redis/NFS rendezvous namespace.

    The Go field has no JSON tag, so its key is ``RuntimeID`` matched case-insensitively
    (``runtimeID``, ``runtimeId`` ... all work upstream); we accept the same.
    """
    spec = job.get("spec") or {}
    for key, value in spec.items():
        if key.lower() == "runtimeid" and value not in (None, ""):
            return str(value)
    created = (job.get("metadata") or {}).get("creationTimestamp")
    if not created:
        raise InvalidJob("Caffe2Job has no metadata.creationTimestamp and no spec.RuntimeID to use as RUN_ID")
    moment = datetime.fromisoformat(str(created).replace("Z", "+00:00"))
    if moment.tzinfo is None:
        # A naive time would be read in the operator's local zone; Kubernetes times are UTC.
        moment = moment.replace(tzinfo=UTC)
    return str(int(moment.timestamp()))
