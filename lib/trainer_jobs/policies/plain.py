"""Plain ML: no framework env, only ``numNodes`` and the TrainJob's env (TensorFlow's path: users
set ``TF_CONFIG`` themselves).

Upstream source: ``pkg/runtime/framework/plugins/plainml/plainml.go`` (kubeflow/trainer v2.3.0):
it runs unless the runtime's policy is torch, MPI or JAX (so beside XGBoost's, with the same
effect as XGBoost's own first step).
"""

from __future__ import annotations

from trainer_jobs import upsert
from trainer_jobs.info import Info

OTHERS = ("torch", "mpi", "jax")


def enforce(info: Info) -> None:
    if info.ml_policy is not None and any(isinstance(info.ml_policy.get(k), dict) for k in OTHERS):
        return
    trainer_ps = info.trainer_pod_set()
    num_nodes = (info.trainer or {}).get("numNodes")
    if num_nodes is not None and trainer_ps is not None:
        trainer_ps.count = int(num_nodes)
    node = info.trainer_container() if info.trainer is not None else None
    if node is not None:
        upsert.upsert_env(node, upsert.env_vars((info.trainer or {}).get("env")))
