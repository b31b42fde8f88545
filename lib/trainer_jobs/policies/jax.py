"""The JAX policy: ``jax.distributed.initialize``'s env and the coordinator's port.

Upstream source: ``pkg/runtime/framework/plugins/jax/jax.go`` (kubeflow/trainer v2.3.0). On the
trainer's container ``node``, when the TrainJob has a ``trainer``: ``JAX_NUM_PROCESSES`` (the
trainer's pod count), ``JAX_PROCESS_ID`` (the pod's completion index),
``JAX_COORDINATOR_ADDRESS`` (``<name>-node-0-0.<name>:29500``), then port 29500. The TrainJob's
own env comes after them (the JobSet builder adds it). The v1 JAXJob's contract
(``training_jobs.contracts.jax``: ``COORDINATOR_ADDRESS``, ``NUM_PROCESSES``, ``PROCESS_ID``
without the prefix, port 6666) is another one: nothing is shared.
"""

from __future__ import annotations

from typing import Any

from trainer_jobs import api, upsert
from trainer_jobs.info import Info


def enforce(info: Info) -> None:
    if info.ml_policy is None or not isinstance(info.ml_policy.get("jax"), dict):
        return
    trainer_ps = info.trainer_pod_set()
    num_nodes = (info.trainer or {}).get("numNodes")
    if trainer_ps is not None and num_nodes is not None:
        trainer_ps.count = int(num_nodes)
    node = info.trainer_container() if info.trainer is not None else None
    if node is None:
        return
    env: list[dict[str, Any]] = [
        {"name": "JAX_NUM_PROCESSES", "value": str(trainer_ps.count if trainer_ps else 1)},
        {"name": "JAX_PROCESS_ID", "valueFrom": {"fieldRef": {"fieldPath": api.COMPLETION_INDEX_FIELD}}},
        {
            "name": "JAX_COORDINATOR_ADDRESS",
            "value": f"{info.name}-{api.NODE}-0-0.{info.name}:{api.TRAINER_PORT}",
        },
    ]
    upsert.upsert_env(node, env)
    upsert.upsert_ports(node, [{"containerPort": api.TRAINER_PORT}])
