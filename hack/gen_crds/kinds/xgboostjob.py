"""A distributed XGBoost job: training-operator v1.9's XGBoostJob."""

from __future__ import annotations

from ..kind import Kind
from ..schema import rule
from .kubeflow import kubeflow_kind


def xgboostjob() -> Kind:
    return kubeflow_kind(
        "XGBoostJob",
        "xgbReplicaSpecs",
        ["Master", "Worker"],
        "xgboost",
        "A distributed XGBoost training job (training-operator v1.9 compatible). Every container gets "
        "MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK, WORKER_PORT and WORKER_ADDRS.",
        [
            rule(
                "'Master' in self && self['Master'].replicas == 1",
                "spec.xgbReplicaSpecs.Master must have exactly 1 replica: an XGBoostJob has one master "
                "(<job>-master-0, MASTER_ADDR)",
            ),
        ],
    )
