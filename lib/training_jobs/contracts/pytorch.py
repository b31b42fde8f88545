"""PyTorch's env contract and init container, as training-operator v1.9 writes them.

Upstream sources (kubeflow/training-operator, tag v1.9.0): ``pkg/controller.v1/pytorch/
envvar.go`` (``setPodEnv``), ``master.go``, ``elastic.go``, ``initcontainer.go`` and
``pkg/apis/kubeflow.org/v1/pytorch_defaults.go`` (the in-memory defaults the env is computed
from: ``nprocPerNode`` "auto", elastic min/max replicas filled from each other or from the
workers). ``torchrun`` reads the ``PET_*`` variables as its flags, so their order and values
are what users' launch scripts depend on. Every function here is pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from training_jobs.contracts.ports import named_port

DEFAULT_CONTAINER = "pytorch"
DEFAULT_PORT_NAME = "pytorchjob-port"
DEFAULT_PORT = 23456
DEFAULT_NPROC_PER_NODE = "auto"
DEFAULT_RDZV_BACKEND = "c10d"
RDZV_BACKENDS = ("c10d", "etcd", "etcd-v2")
# training-operator's --pytorch-init-container-image and --pytorch-init-container-max-tries.
INIT_CONTAINER_IMAGE = "alpine:3.10"
INIT_CONTAINER_MAX_TRIES = 100
INIT_CONTAINER_NAME = "init-pytorch"


def port_of(template: Mapping[str, Any] | None) -> int:
    """``getPortFromPyTorchJob``: ``pytorchjob-port`` of the ``pytorch`` container (the
    defaulter adds it when missing, so 23456 then)."""
    return named_port(template, DEFAULT_CONTAINER, DEFAULT_PORT_NAME, DEFAULT_PORT)


def replica_name(job_name: str, type_label: str, index: int) -> str:
    return f"{job_name}-{type_label}-{index}".replace("/", "-")


def defaulted_elastic(elastic: Mapping[str, Any] | None, worker_replicas: int) -> dict[str, Any] | None:
    """``setElasticPolicy``: a missing min or max replicas takes the other's value, or the
    workers' count when both are missing."""
    if elastic is None:
        return None
    policy = dict(elastic)
    low, high = policy.get("minReplicas"), policy.get("maxReplicas")
    if low is None and high is None:
        low = high = worker_replicas
    policy["minReplicas"] = high if low is None else low
    policy["maxReplicas"] = low if high is None else high
    return policy


def defaulted_nproc_per_node(nproc_per_node: str | None, elastic: Mapping[str, Any] | None) -> str | None:
    """``setDefaultNprocPerNode``: "auto", unless the deprecated ``elasticPolicy.nProcPerNode``
    is set (the two are exclusive)."""
    if nproc_per_node is None and (elastic is None or elastic.get("nProcPerNode") is None):
        return DEFAULT_NPROC_PER_NODE
    return nproc_per_node


def _nproc_int(nproc_per_node: str | None) -> int:
    """``getNprocPerNodeInt``: a number counts, "auto", "cpu" and "gpu" count as 1."""
    text = str(nproc_per_node or "")
    return int(text) if text.lstrip("-").isdigit() else 1


def _var(name: str, value: Any) -> dict[str, str]:
    return {"name": name, "value": str(value)}


def elastic_env(
    job_name: str, elastic: Mapping[str, Any], worker_replicas: int, worker_port: int
) -> list[dict[str, str]]:
    """``ElasticEnvVarGenerator.Generate``, for a defaulted elastic policy."""
    host = elastic.get("rdzvHost") or f"{job_name}-worker-0"
    port = elastic.get("rdzvPort") or worker_port
    env = [
        _var("PET_RDZV_ENDPOINT", f"{host}:{port}"),
        _var("PET_RDZV_BACKEND", elastic.get("rdzvBackend") or DEFAULT_RDZV_BACKEND),
    ]
    low, high = elastic.get("minReplicas"), elastic.get("maxReplicas")
    env.append(_var("PET_NNODES", worker_replicas if low is None and high is None else f"{low}:{high}"))
    if elastic.get("maxRestarts") is not None:
        env.append(_var("PET_MAX_RESTARTS", elastic["maxRestarts"]))
    if elastic.get("nProcPerNode") is not None:
        env.append(_var("PET_NPROC_PER_NODE", elastic["nProcPerNode"]))
    if elastic.get("rdzvId") is not None:
        env.append(_var("PET_RDZV_ID", elastic["rdzvId"]))
    conf = elastic.get("rdzvConf") or []
    if conf:
        env.append(_var("PET_RDZV_CONF", ",".join(f"{c.get('key', '')}={c.get('value', '')}" for c in conf)))
    if elastic.get("standalone"):
        env.append({"name": "PET_STANDALONE", "value": ""})
    return env


def pytorch_env(
    job_name: str,
    replicas: Mapping[str, int],
    type_label: str,
    index: int,
    *,
    master_port: int | None,
    worker_port: int,
    nproc_per_node: str | None,
    elastic: Mapping[str, Any] | None,
) -> list[dict[str, str]]:
    """The variables every container of one pod gets, in upstream's order.

    ``replicas`` maps each type label (``master``, ``worker``) to its replicas; ``master_port``
    is None without a Master; ``nproc_per_node`` and ``elastic`` are the defaulted values
    (:func:`defaulted_nproc_per_node`, :func:`defaulted_elastic`).
    """
    total = sum(replicas.values())
    env = [_var("PYTHONUNBUFFERED", 1)]
    if master_port is not None:
        master = replica_name(job_name, "master", 0)
        rank = index + 1 if type_label == "worker" else index
        env += [
            _var("MASTER_PORT", master_port),
            _var("PET_MASTER_PORT", master_port),
            _var("MASTER_ADDR", master),
            _var("PET_MASTER_ADDR", master),
            _var("WORLD_SIZE", total * _nproc_int(nproc_per_node)),
            _var("RANK", rank),
            _var("PET_NODE_RANK", rank),
        ]
    if nproc_per_node is not None:
        env.append(_var("PET_NPROC_PER_NODE", nproc_per_node))
    if elastic is not None:
        env += elastic_env(job_name, elastic, replicas.get("worker", 0), worker_port)
    else:
        env.append(_var("PET_NNODES", total))
    return env


def autoscaler(
    job_name: str,
    namespace: str,
    labels: Mapping[str, str],
    owner: Mapping[str, Any],
    elastic: Mapping[str, Any],
) -> dict[str, Any]:
    """``desiredHPA``: the HorizontalPodAutoscaler of an elastic job with ``metrics``, named after
    the job and scaling its Workers (the CRD's scale subresource) between the defaulted min and
    max replicas. It carries the job's labels so the engine finds it with the job's objects."""
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {
            "name": job_name,
            "namespace": namespace,
            "labels": dict(labels),
            "ownerReferences": [owner],
        },
        "spec": {
            "scaleTargetRef": {"kind": "PyTorchJob", "name": job_name, "apiVersion": "kubeflow.org/v1"},
            "minReplicas": elastic["minReplicas"],
            "maxReplicas": elastic["maxReplicas"],
            "metrics": list(elastic.get("metrics") or []),
        },
    }


def init_container(job_name: str, image: str, max_tries: int) -> dict[str, Any]:
    """The container upstream adds to every Worker pod of a job with a Master: it waits until
    the Master's name resolves, so ``init_process_group`` does not time out on a cold start."""
    master = replica_name(job_name, "master", 0)
    script = (
        f"err=1;for i in $(seq {max_tries}); do if nslookup {master}; then err=0 && break; fi;"
        "echo waiting for master; sleep 2; done; exit $err"
    )
    return {
        "name": INIT_CONTAINER_NAME,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "resources": {
            "limits": {"cpu": "100m", "memory": "20Mi"},
            "requests": {"cpu": "50m", "memory": "10Mi"},
        },
        "command": ["sh", "-c", script],
    }
