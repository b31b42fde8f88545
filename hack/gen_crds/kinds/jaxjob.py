"""A distributed JAX job: training-operator v1.9's JAXJob."""

from __future__ import annotations

from ..kind import Kind
from .kubeflow import kubeflow_kind


def jaxjob() -> Kind:
    return kubeflow_kind(
        "JAXJob",
        "jaxReplicaSpecs",
        ["Worker"],
        "jax",
        "A distributed JAX training job (training-operator v1.9 compatible). Every container gets "
        "COORDINATOR_ADDRESS, COORDINATOR_PORT, NUM_PROCESSES and PROCESS_ID.",
        [],
    )
