"""JAX's env contract: the ``jax.distributed.initialize`` variables of JAXJob.

Upstream sources (kubeflow/training-operator, tag v1.9.0): ``pkg/controller.v1/jax/envvar.go``
(``setPodEnv``, ``getTotalReplicas``, ``replicaName``, ``getPortFromJAXJob``), which
``jaxjob_controller.go``'s ``SetClusterSpec`` calls for every pod, and
``pkg/apis/kubeflow.org/v1/jax_types.go`` / ``jax_defaults.go`` (the container, port and
defaults). Worker 0 is the coordinator. The same variables go on every container of the pod,
appended in upstream's order. Every function here is pure: plain data in, plain data out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from training_jobs.contracts.ports import named_port
from training_jobs.contracts.tensorflow import general_name

DEFAULT_CONTAINER = "jax"
DEFAULT_PORT_NAME = "jaxjob-port"
DEFAULT_PORT = 6666
WORKER = "worker"


def port_of(template: Mapping[str, Any] | None) -> int:
    """``getPortFromJAXJob``: ``jaxjob-port`` of the ``jax`` container, else 6666.

    Upstream errors when the port is missing ("default container port is not exposed"), but
    its defaulter adds ``jaxjob-port: 6666`` to that container first, so falling back to 6666
    is the same observable result.
    """
    return named_port(template, DEFAULT_CONTAINER, DEFAULT_PORT_NAME, DEFAULT_PORT)


def coordinator_address(job_name: str) -> str:
    """``COORDINATOR_ADDRESS``: worker 0's name, which its headless Service makes resolvable."""
    return general_name(job_name, WORKER, 0)


def pod_env(job_name: str, index: int, *, total_replicas: int, coordinator_port: int) -> list[dict[str, str]]:
    """``setPodEnv``'s variables for one pod, in upstream's order.

    ``PYTHONUNBUFFERED=1``, ``COORDINATOR_PORT`` (worker 0's ``jaxjob-port``),
    ``COORDINATOR_ADDRESS``, ``NUM_PROCESSES`` (all replicas of the job) and ``PROCESS_ID``
    (the pod's index).
    """
    return [
        {"name": "PYTHONUNBUFFERED", "value": "1"},
        {"name": "COORDINATOR_PORT", "value": str(int(coordinator_port))},
        {"name": "COORDINATOR_ADDRESS", "value": coordinator_address(job_name)},
        {"name": "NUM_PROCESSES", "value": str(int(total_replicas))},
        {"name": "PROCESS_ID", "value": str(int(index))},
    ]
