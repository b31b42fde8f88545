"""Kubeflow's Python SDK (`kubeflow-training` 1.9.x, training-operator v1.9's client) drives this
operator: ``TrainingClient`` creates a job of each kind it knows (all of training-operator v1.9's),
waits for its conditions, finds the master pod with ``get_job_pods(is_master=True)``
and deletes the job. The jobs' pods finish through the local cluster's KWOK annotations."""

from __future__ import annotations

import os

import pytest
from kube import HANG_S, get, namespace_fixture, wait_for
from kubeflow.training import TrainingClient, models
from kubernetes.client import V1Container, V1ObjectMeta, V1PodSpec, V1PodTemplateSpec

pytestmark = pytest.mark.cluster

NS = "ato-sdk"
namespace = namespace_fixture(NS)
IMAGE = "docker.io/library/busybox:1.36"


def replica(container: str, replicas: int = 1, finish: bool = False) -> models.KubeflowOrgV1ReplicaSpec:
    annotations = (
        {"sim.training.ato.dev/exit-code": "0", "sim.training.ato.dev/run-for": "3s"} if finish else {}
    )
    return models.KubeflowOrgV1ReplicaSpec(
        replicas=replicas,
        restart_policy="Never",
        template=V1PodTemplateSpec(
            metadata=V1ObjectMeta(annotations=annotations),
            spec=V1PodSpec(containers=[V1Container(name=container, image=IMAGE)]),
        ),
    )


# The SDK's models require a run policy; the operator defaults it the same way.
RUN_POLICY = models.KubeflowOrgV1RunPolicy(clean_pod_policy="None")


def metadata(name: str) -> V1ObjectMeta:
    return V1ObjectMeta(name=name, namespace=NS)


# kind -> (job, the pod get_job_pods(is_master=True) must find)
JOBS = {
    "TFJob": (
        lambda: models.KubeflowOrgV1TFJob(
            api_version="kubeflow.org/v1",
            kind="TFJob",
            metadata=metadata("sdk-tf"),
            spec=models.KubeflowOrgV1TFJobSpec(
                run_policy=RUN_POLICY,
                tf_replica_specs={
                    "Chief": replica("tensorflow", finish=True),
                    "Worker": replica("tensorflow"),
                },
            ),
        ),
        "sdk-tf-chief-0",
    ),
    "PyTorchJob": (
        lambda: models.KubeflowOrgV1PyTorchJob(
            api_version="kubeflow.org/v1",
            kind="PyTorchJob",
            metadata=metadata("sdk-pt"),
            spec=models.KubeflowOrgV1PyTorchJobSpec(
                run_policy=RUN_POLICY,
                pytorch_replica_specs={
                    "Master": replica("pytorch", finish=True),
                    "Worker": replica("pytorch", 2),
                },
            ),
        ),
        "sdk-pt-master-0",
    ),
    "XGBoostJob": (
        lambda: models.KubeflowOrgV1XGBoostJob(
            api_version="kubeflow.org/v1",
            kind="XGBoostJob",
            metadata=metadata("sdk-xgb"),
            spec=models.KubeflowOrgV1XGBoostJobSpec(
                run_policy=RUN_POLICY,
                xgb_replica_specs={"Master": replica("xgboost", finish=True), "Worker": replica("xgboost")},
            ),
        ),
        "sdk-xgb-master-0",
    ),
    # training-operator's PaddleJob; in collective mode no pod is labelled master, as upstream.
    "PaddleJob": (
        lambda: models.KubeflowOrgV1PaddleJob(
            api_version="kubeflow.org/v1",
            kind="PaddleJob",
            metadata=metadata("sdk-paddle"),
            spec=models.KubeflowOrgV1PaddleJobSpec(
                run_policy=RUN_POLICY,
                paddle_replica_specs={"Master": replica("paddle", finish=True), "Worker": replica("paddle")},
            ),
        ),
        "sdk-paddle-master-0",
    ),
    # The launcher decides, and is the pod labelled master; the workers idle.
    "MPIJob": (
        lambda: models.KubeflowOrgV1MPIJob(
            api_version="kubeflow.org/v1",
            kind="MPIJob",
            metadata=metadata("sdk-mpi"),
            spec=models.KubeflowOrgV1MPIJobSpec(
                run_policy=RUN_POLICY,
                slots_per_worker=1,
                mpi_replica_specs={"Launcher": replica("mpi", finish=True), "Worker": replica("mpi")},
            ),
        ),
        "sdk-mpi-launcher",
    ),
    "JAXJob": (
        lambda: models.KubeflowOrgV1JAXJob(
            api_version="kubeflow.org/v1",
            kind="JAXJob",
            metadata=metadata("sdk-jax"),
            spec=models.KubeflowOrgV1JAXJobSpec(
                run_policy=RUN_POLICY, jax_replica_specs={"Worker": replica("jax", 2, finish=True)}
            ),
        ),
        "sdk-jax-worker-0",
    ),
}


@pytest.fixture(scope="module")
def client():
    return TrainingClient(config_file=os.environ["KUBECONFIG"], namespace=NS)


@pytest.mark.parametrize("kind", list(JOBS))
def test_training_client_runs_a_job(client, kind):
    build, master_pod = JOBS[kind]
    job = build()
    name = job.metadata.name
    client.create_job(job)
    client.wait_for_job_conditions(
        name,
        job_kind=kind,
        expected_conditions={"Running", "Succeeded"},
        wait_timeout=HANG_S,
        polling_interval=1,
    )
    assert [p.metadata.name for p in client.get_job_pods(name, is_master=True)] == [master_pod]
    finished = client.wait_for_job_conditions(name, job_kind=kind, wait_timeout=HANG_S, polling_interval=1)
    assert client.is_job_succeeded(name, job_kind=kind, job=finished)
    client.delete_job(name, job_kind=kind)
    wait_for(
        lambda: not get(f"{kind.lower()}s", "-n", NS)["items"],
        what=f"the {kind} deleted through the SDK",
    )
