"""Caffe2's env contract as the final kubeflow/caffe2-operator (master 3773f5b) writes it.

Upstream sources: ``pkg/controller/controller_pod.go`` (``createNewPod``), ``pkg/controller/
config.go`` (``genCaffe2ConfigJSONStr``, ``genClusterSpec``, ``genGeneralName``),
``pkg/controller/controller.go`` (``genLabels``, ``addCaffe2Job``) and
``pkg/apis/caffe2/v1alpha1/{types,defaults}.go`` (``Caffe2BackendSpec``, ``Caffe2Port``, the
``RuntimeID`` and ``Backend`` defaults). There is a single ``worker`` group; every container of
every pod gets the same seven variables.

One deliberate difference: upstream's host names are kept only where they are valid Service
names (see :func:`dns_label`); this operator creates a Service per host, so they must be.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from training_jobs.contracts.tensorflow import go_marshal
from training_jobs.model import InvalidJob

CAFFE2_PORT = 2222
REPLICA_TYPE = "worker"

MAX_NAME = 63
HASH_CHARS = 8
_DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def dns_label(base: str, suffix: str = "") -> str:
    """``base + suffix`` if that is a DNS-1035 label (a Service name), else a stable one that is.

    The fallback is ``<head>-<hash><suffix>``: ``head`` is ``base`` from its first letter on,
    cut so the whole has at most 63 characters; ``hash`` is the first 8 hex digits of the
    SHA-256 of ``base``. The suffix (``-worker-<i>``, ``-tensorboard``, ``-redis``) is kept
    whole, so the names of one job still differ only by it and still say what they are, and the
    hash keeps two jobs apart whose names differ only past the cut.
    """
    name = base + suffix
    if len(name) <= MAX_NAME and _DNS_1035.match(name):
        return name
    digest = hashlib.sha256(base.encode("utf-8")).hexdigest()[:HASH_CHARS]
    room = MAX_NAME - len(suffix) - 1 - HASH_CHARS
    if room < 1:
        raise ValueError(f"name suffix {suffix!r} leaves no room for a name")
    head = re.sub(r"[^-a-z0-9]", "-", base.lower())
    head = re.sub(r"^[^a-z]+", "", head)[:room].rstrip("-")
    # Only a base without any letter leaves nothing; a Service name must still start with one.
    return f"{head or 'x'}-{digest}{suffix}"


def label_value(value: str) -> str:
    """``value`` if it is a valid label value, else :func:`dns_label`'s fallback for it.

    Label values may start with a digit (``caffe2_job_key`` of namespace ``1team`` is kept), but
    are limited to 63 characters too.
    """
    if len(value) <= MAX_NAME and _LABEL_VALUE.match(value):
        return value
    return dns_label(value)


def job_key(namespace: str, job_name: str) -> str:
    """``genLabels``' ``caffe2_job_key``: the informer key ``<ns>/<name>`` with ``/`` as ``-``
    (just the name when the namespace is empty)."""
    return f"{namespace}-{job_name}" if namespace else job_name


def host_name(namespace: str, job_name: str, index: int) -> str:
    """The Service name of worker ``index``: ``genGeneralName``'s ``<ns>-<job>-worker-<i>`` if it
    is a valid Service name, else :func:`dns_label`'s fallback.

    Upstream created no Services, so its names only resolved if the user arranged it (its
    example relies on ``hostNetwork`` and Redis). Here each name gets a headless Service, and a
    Service name longer than 63 characters or starting with a digit (namespace ``1team``) would
    be refused.
    """
    return dns_label(job_key(namespace, job_name), f"-{REPLICA_TYPE}-{int(index)}")


def host_names(namespace: str, job_name: str, replicas: int) -> list[str]:
    """``genClusterSpec``'s host names, without the port: one :func:`host_name` per worker."""
    return [host_name(namespace, job_name, i) for i in range(int(replicas))]


def caffe2_config(namespace: str, job_name: str, replicas: int, index: int) -> str:
    """``genCaffe2ConfigJSONStr``: ``{"cluster":{"worker":[...]},"task":{"type":"worker","index":i}}``,
    the hosts being the workers' Service names (:func:`host_name`) so that they resolve."""
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
    ``nfsPath``). Upstream copies the fields whatever the backend type, so every pod gets all
    seven, empty or not; ``redisPort`` is a Go ``uint`` formatted with ``strconv.Itoa``, so an
    unset port is ``"0"``, not ``""``. Without ``backendSpecs`` upstream's defaulter (run on the
    job when its informer first sees it) sets ``{backendType: none|redis}``, so the same zero
    values.
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
