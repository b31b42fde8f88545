"""The XGBoost policy: the collective's ``DMLC_*`` env and the tracker's port.

Upstream source: ``pkg/runtime/framework/plugins/xgboost/xgboost.go`` (kubeflow/trainer v2.3.0).
On the trainer's container ``node``, when the TrainJob has a ``trainer``: ``DMLC_TRACKER_URI``
(``<name>-node-0-0.<name>``), ``DMLC_TRACKER_PORT`` (29500), ``DMLC_TASK_ID`` (the pod's
completion index), ``DMLC_NUM_WORKER`` (pods times GPUs per node, at least one per pod), then
port 29500. The v1 XGBoostJob's contract (``training_jobs.contracts.xgboost``: ``MASTER_ADDR``,
``WORKER_ADDRS``...) is another one: nothing is shared.

Upstream runs its plugins in Go's map order, so whether the TrainJob's env comes before or
after these four varies between runs there (the plain ML plugin adds it too). Here it always
comes first, as torch's does.
"""

from __future__ import annotations

from typing import Any

from trainer_jobs import api, upsert
from trainer_jobs.info import Info
from trainer_jobs.resources import gpus_per_node

RESERVED = ("DMLC_TRACKER_URI", "DMLC_TRACKER_PORT", "DMLC_TASK_ID", "DMLC_NUM_WORKER")


def enforce(info: Info) -> None:
    if info.ml_policy is None or not isinstance(info.ml_policy.get("xgboost"), dict):
        return
    trainer_ps = info.trainer_pod_set()
    if trainer_ps is None:
        return
    num_nodes = (info.trainer or {}).get("numNodes")
    if num_nodes is not None:
        trainer_ps.count = int(num_nodes)
    node = info.trainer_container() if info.trainer is not None else None
    if node is None:
        return
    workers = trainer_ps.count * (gpus_per_node(info.resources_per_node()) or 1)
    env: list[dict[str, Any]] = [
        {"name": "DMLC_TRACKER_URI", "value": f"{info.name}-{api.NODE}-0-0.{info.name}"},
        {"name": "DMLC_TRACKER_PORT", "value": str(api.TRAINER_PORT)},
        {"name": "DMLC_TASK_ID", "valueFrom": {"fieldRef": {"fieldPath": api.COMPLETION_INDEX_FIELD}}},
        {"name": "DMLC_NUM_WORKER", "value": str(workers)},
    ]
    upsert.upsert_env(node, upsert.env_vars((info.trainer or {}).get("env")))
    upsert.upsert_env(node, env)
    upsert.upsert_ports(node, [{"containerPort": api.TRAINER_PORT}])
