"""The jobs the benchmark submits: five replicas per job, every pod running ``run_for`` and then
exiting 0, through the local cluster's KWOK stages (hack/kwok/cluster.yaml annotations).

Each kind uses its framework's usual replica layout, so the operator does for every kind what it
does for real jobs of that kind (env contracts, services, config maps).
"""

from __future__ import annotations

from typing import Any

IMAGE = "docker.io/library/busybox:1.36"
KINDS = ("TFJob", "MXJob", "PyTorchJob", "PaddleJob", "Caffe2Job")

API = {
    "TFJob": ("kubeflow.org", "v1", "tfjobs"),
    "MXJob": ("kubeflow.org", "v1", "mxjobs"),
    "PyTorchJob": ("kubeflow.org", "v1", "pytorchjobs"),
    "PaddleJob": ("batch.paddlepaddle.org", "v1", "paddlejobs"),
    "Caffe2Job": ("kubeflow.org", "v1alpha1", "caffe2jobs"),
}


def _template(container: str, run_for: str) -> dict[str, Any]:
    return {
        "metadata": {
            "annotations": {
                "sim.training.ato.dev/exit-code": "0",
                "sim.training.ato.dev/run-for": run_for,
            }
        },
        "spec": {"containers": [{"name": container, "image": IMAGE}]},
    }


def _replicas(container: str, layout: list[tuple[str, int]], run_for: str, policy: str = "Never"):
    return {
        rtype: {"replicas": n, "restartPolicy": policy, "template": _template(container, run_for)}
        for rtype, n in layout
    }


def job(kind: str, name: str, namespace: str, replicas: int = 5, run_for: str = "5s") -> dict[str, Any]:
    """One job of ``kind`` with ``replicas`` pods in all."""
    group, version, _ = API[kind]
    if kind == "TFJob":
        spec = {"tfReplicaSpecs": _replicas("tensorflow", [("PS", 1), ("Worker", replicas - 1)], run_for)}
    elif kind == "MXJob":
        layout = [("Scheduler", 1), ("Server", 1), ("Worker", replicas - 2)]
        spec = {"jobMode": "MXTrain", "mxReplicaSpecs": _replicas("mxnet", layout, run_for)}
    elif kind == "PyTorchJob":
        # Workers also get the init container that waits for the master's name.
        spec = {
            "pytorchReplicaSpecs": _replicas("pytorch", [("Master", 1), ("Worker", replicas - 1)], run_for)
        }
    elif kind == "PaddleJob":
        spec = {
            "intranet": "Service",
            "ps": {"replicas": 1, "template": _template("paddle", run_for)},
            "worker": {"replicas": replicas - 1, "template": _template("paddle", run_for)},
        }
    elif kind == "Caffe2Job":
        spec = {
            "backendSpecs": {"backendType": "nfs", "nfsPath": "/share/bench"},
            "replicaSpecs": {"replicas": replicas, "template": _template("caffe2", run_for)},
        }
    else:
        raise ValueError(f"unknown kind {kind}")
    return {
        "apiVersion": f"{group}/{version}",
        "kind": kind,
        "metadata": {"name": name, "namespace": namespace, "labels": {"bench.training.ato.dev/run": "1"}},
        "spec": spec,
    }
