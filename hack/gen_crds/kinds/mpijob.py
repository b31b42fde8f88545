"""An MPI job (launcher and workers): training-operator v1.9's MPIJob v1."""

from __future__ import annotations

from ..common import replica_spec
from ..kind import Kind
from ..schema import integer, rule, string
from .kubeflow import kubeflow_kind


def mpijob() -> Kind:
    replica = replica_spec(
        "MPIJob",
        "Never",
        "Defaults to Never.",
        replicas_default=" Defaults to 1 for the Launcher and 0 for the Worker.",
    )
    return kubeflow_kind(
        "MPIJob",
        "mpiReplicaSpecs",
        ["Launcher", "Worker"],
        "",
        "A distributed MPI job (training-operator v1.9 compatible): a launcher runs mpirun, which "
        "starts the ranks on the workers with kubectl exec. The launcher gets OMPI_MCA_* and "
        "I_MPI_HYDRA_* variables and /etc/mpi/hostfile.",
        [
            rule(
                "'Launcher' in self",
                "spec.mpiReplicaSpecs must have a Launcher: an MPIJob has one launcher (<job>-launcher)",
            ),
            rule(
                "!('Launcher' in self) || !has(self['Launcher'].replicas) || self['Launcher'].replicas == 1",
                "spec.mpiReplicaSpecs.Launcher.replicas must be 1: an MPIJob has one launcher",
            ),
        ],
        extra={
            "slotsPerWorker": integer(
                "MPI slots (processes) per worker, written into the hostfile. Defaults to 1.", minimum=1
            ),
            "cleanPodPolicy": string(
                "Deprecated: use runPolicy.cleanPodPolicy, which wins when both are set. Unset means None.",
                enum=["None", "Running", "All"],
            ),
            "mainContainer": string(
                "The workers' container kubexec.sh runs commands in (kubectl exec --container); "
                "unset: each worker's first container."
            ),
        },
        replica=replica,
    )
