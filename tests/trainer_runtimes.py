"""Trainer v2.3.0's built-in runtimes (``manifests/base/runtimes/`` at kubeflow/trainer v2.3.0),
as the API server serves them (CRD defaults applied), and a TrainJob builder, for the engine's
unit tests (``tests/unit/test_trainer_*.py``)."""

from __future__ import annotations

import copy
from typing import Any

ANCESTOR = "trainer.kubeflow.org/trainjob-ancestor-step"
NOW = "2026-11-30T10:00:00Z"
CREATED = "2026-11-30T09:59:00Z"


def _rjob(name: str, container: dict[str, Any], ancestor: str | None = None, **extra: Any) -> dict[str, Any]:
    template: dict[str, Any] = {"spec": {"template": {"spec": {"containers": [container]}}}}
    if ancestor:
        template["metadata"] = {"labels": {ANCESTOR: ancestor}}
    return {"name": name, "template": template, **extra}


def runtime(
    name: str, framework: str, ml_policy: dict[str, Any], jobs: list[dict[str, Any]], **spec: Any
) -> dict[str, Any]:
    template_spec = {**spec.pop("template_spec", {}), "replicatedJobs": jobs}
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": name, "labels": {"trainer.kubeflow.org/framework": framework}},
        "spec": {"mlPolicy": ml_policy, "template": {"spec": template_spec}, **spec},
    }


def torch_distributed() -> dict[str, Any]:
    node = {"name": "node", "image": "pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime"}
    return runtime(
        "torch-distributed", "torch", {"numNodes": 1, "torch": {}}, [_rjob("node", node, "trainer")]
    )


def jax_distributed() -> dict[str, Any]:
    node = {"name": "node", "image": "nvcr.io/nvidia/jax:25.10-py3"}
    return runtime("jax-distributed", "jax", {"numNodes": 1, "jax": {}}, [_rjob("node", node, "trainer")])


def xgboost_distributed() -> dict[str, Any]:
    node = {"name": "node", "image": "ghcr.io/kubeflow/trainer/xgboost-runtime"}
    return runtime(
        "xgboost-distributed", "xgboost", {"numNodes": 1, "xgboost": {}}, [_rjob("node", node, "trainer")]
    )


def _mpi_runtime(name: str, framework: str, image: str) -> dict[str, Any]:
    sshd = {
        "name": "node",
        "image": image,
        "securityContext": {"runAsUser": 1000},
        "command": ["/usr/sbin/sshd"],
        "args": ["-De", "-f", "/home/mpiuser/.sshd_config"],
        "readinessProbe": {"tcpSocket": {"port": 2222}, "initialDelaySeconds": 5},
    }
    launcher = {"name": "node", "image": image, "securityContext": {"runAsUser": 1000}}
    jobs = [
        _rjob("node", sshd),
        _rjob("launcher", launcher, "trainer", dependsOn=[{"name": "node", "status": "Ready"}]),
    ]
    for job in jobs:
        job["template"]["spec"]["template"]["spec"]["securityContext"] = {"fsGroup": 1000}
    policy = {
        "numNodes": 1,
        "mpi": {
            "numProcPerNode": 1,
            "mpiImplementation": "OpenMPI",
            "sshAuthMountPath": "/home/mpiuser/.ssh",
            "runLauncherAsNode": True,
        },
    }
    template_spec = {
        "network": {"publishNotReadyAddresses": True},
        "successPolicy": {"operator": "All", "targetReplicatedJobs": ["launcher"]},
    }
    return runtime(name, framework, policy, jobs, template_spec=template_spec)


def deepspeed_distributed() -> dict[str, Any]:
    return _mpi_runtime("deepspeed-distributed", "deepspeed", "ghcr.io/kubeflow/trainer/deepspeed-runtime")


def mlx_distributed() -> dict[str, Any]:
    return _mpi_runtime("mlx-distributed", "mlx", "ghcr.io/kubeflow/trainer/mlx-runtime")


def torchtune_llama3_2_1b() -> dict[str, Any]:
    mount = [{"mountPath": "/workspace", "name": "initializer"}]
    dataset = {
        "name": "dataset-initializer",
        "image": "ghcr.io/kubeflow/trainer/dataset-initializer",
        "env": [{"name": "STORAGE_URI", "value": "hf://tatsu-lab/alpaca"}],
        "volumeMounts": mount,
    }
    model = {
        "name": "model-initializer",
        "image": "ghcr.io/kubeflow/trainer/model-initializer",
        "env": [{"name": "STORAGE_URI", "value": "hf://meta-llama/Llama-3.2-1B-Instruct"}],
        "volumeMounts": [{"name": "initializer", "mountPath": "/workspace"}],
    }
    node = {
        "name": "node",
        "image": "ghcr.io/kubeflow/trainer/torchtune-trainer",
        "command": TORCHTUNE_COMMAND,
        "resources": {"limits": {"nvidia.com/gpu": 2}},
        "volumeMounts": mount,
    }
    depends = [
        {"name": "dataset-initializer", "status": "Complete"},
        {"name": "model-initializer", "status": "Complete"},
    ]
    jobs = [
        _rjob("dataset-initializer", dataset, "dataset-initializer"),
        _rjob("model-initializer", model, "model-initializer"),
        _rjob("node", node, "trainer", dependsOn=depends),
    ]
    claim = {
        "metadata": {"name": "initializer"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "20Gi"}}},
    }
    return runtime(
        "torchtune-llama3.2-1b",
        "torchtune",
        {"numNodes": 1, "torch": {}},
        jobs,
        template_spec={"volumeClaimPolicies": [{"templates": [claim]}]},
    )


TORCHTUNE_COMMAND = [
    "tune",
    "run",
    "--rdzv_endpoint=localhost:29500",
    "full_finetune_distributed",
    "--config",
    "llama3_2/1B_full",
    "dataset=torchtune.datasets.instruct_dataset",
    "dataset.source=parquet",
    "dataset.data_dir=/workspace/dataset/data",
    "output_dir=/workspace/output",
    "tokenizer.path=/workspace/model/original/tokenizer.model",
    "checkpointer.checkpoint_dir=/workspace/model",
]


def trainjob(runtime_name: str = "torch-distributed", name: str = "job", **spec: Any) -> dict[str, Any]:
    """A TrainJob as the API server serves it (CRD defaults applied)."""
    status = spec.pop("status", None)
    kind = spec.pop("kind", "ClusterTrainingRuntime")
    body: dict[str, Any] = {
        "runtimeRef": {"name": runtime_name, "apiGroup": "trainer.kubeflow.org", "kind": kind},
        "suspend": False,
        "managedBy": "trainer.kubeflow.org/trainjob-controller",
        **spec,
    }
    job = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": "uid-1",
            "resourceVersion": "10",
            "generation": 1,
            "creationTimestamp": CREATED,
        },
        "spec": body,
    }
    if status is not None:
        job["status"] = copy.deepcopy(status)
    return job


def node_job(jobset: dict[str, Any], name: str = "node") -> dict[str, Any]:
    return next(rj for rj in jobset["spec"]["replicatedJobs"] if rj["name"] == name)


def pod(jobset: dict[str, Any], name: str = "node") -> dict[str, Any]:
    return node_job(jobset, name)["template"]["spec"]["template"]["spec"]


def container(jobset: dict[str, Any], job: str = "node", name: str = "node") -> dict[str, Any]:
    return next(c for c in pod(jobset, job)["containers"] if c["name"] == name)


def env_names(c: dict[str, Any]) -> list[str]:
    return [e["name"] for e in c.get("env") or []]
