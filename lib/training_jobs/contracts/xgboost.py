"""XGBoost's env contract: the Rabit tracker / LightGBM variables of XGBoostJob.

Upstream sources (kubeflow/training-operator, tag v1.9.0): ``pkg/controller.v1/xgboost/
xgboost.go`` (``SetPodEnv``, ``replicaName``, ``getPortFromXGBoostJob``,
``computeTotalReplicas``), which ``xgboostjob_controller.go``'s ``SetClusterSpec`` calls for
every pod, and ``pkg/apis/kubeflow.org/v1/xgboost_types.go`` / ``xgboost_defaults.go`` (the
container, port and defaults). The same variables go on every container of the pod, appended
in upstream's order. Every function here is pure: plain data in, plain data out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from training_jobs.contracts.ports import named_port
from training_jobs.contracts.tensorflow import general_name

DEFAULT_CONTAINER = "xgboost"
DEFAULT_PORT_NAME = "xgboostjob-port"
DEFAULT_PORT = 9999
MASTER, WORKER = "master", "worker"


def port_of(template: Mapping[str, Any] | None) -> int:
    """``getPortFromXGBoostJob``: ``xgboostjob-port`` of the ``xgboost`` container, else 9999.

    Upstream errors when the port is missing, but its defaulter adds ``xgboostjob-port: 9999``
    to that container first, so falling back to 9999 is the same observable result.
    """
    return named_port(template, DEFAULT_CONTAINER, DEFAULT_PORT_NAME, DEFAULT_PORT)


def rank(replica_type: str, index: int, master_replicas: int) -> int:
    """``RANK``: the master keeps its index; workers come after every master replica."""
    if replica_type.lower() == WORKER:
        return int(index) + int(master_replicas)
    return int(index)


def worker_addrs(job_name: str, world_size: int) -> list[str]:
    """``WORKER_ADDRS`` entries: ``<job>-worker-0`` … ``<job>-worker-<world_size - 2>``.

    Upstream sizes the list by the job's total replicas minus one rather than by the worker
    count; with the single master the webhook enforces, the two are the same.
    """
    return [general_name(job_name, WORKER, i) for i in range(max(int(world_size) - 1, 0))]


def pod_env(
    job_name: str,
    replica_type: str,
    index: int,
    *,
    master_replicas: int,
    worker_replicas: int,
    master_port: int,
    worker_port: int | None,
) -> list[dict[str, str]]:
    """``SetPodEnv``'s variables for one pod, in upstream's order.

    ``MASTER_PORT``, ``MASTER_ADDR`` (``<job>-master-0``), ``WORLD_SIZE`` (all replicas),
    ``RANK`` and ``PYTHONUNBUFFERED=1`` always; ``WORKER_PORT`` and ``WORKER_ADDRS``
    (comma-separated, no spaces; LightGBM builds its machine list from them) only when the job
    has more than one replica. ``worker_replicas`` is 0 and ``worker_port`` ``None`` for a job
    without a Worker spec. ``master_port`` is the master's ``xgboostjob-port``, ``worker_port``
    the workers'.
    """
    world_size = int(master_replicas) + int(worker_replicas)
    env = [
        {"name": "MASTER_PORT", "value": str(int(master_port))},
        {"name": "MASTER_ADDR", "value": general_name(job_name, MASTER, 0)},
        {"name": "WORLD_SIZE", "value": str(world_size)},
        {"name": "RANK", "value": str(rank(replica_type, index, master_replicas))},
        {"name": "PYTHONUNBUFFERED", "value": "1"},
    ]
    if world_size > 1:
        if worker_port is None:
            # Upstream dereferences the Worker spec here and would crash; say what is wrong.
            raise ValueError(
                f"an XGBoostJob of {world_size} replicas needs a Worker spec: WORKER_PORT is its port"
            )
        env += [
            {"name": "WORKER_PORT", "value": str(int(worker_port))},
            {"name": "WORKER_ADDRS", "value": ",".join(worker_addrs(job_name, world_size))},
        ]
    return env
