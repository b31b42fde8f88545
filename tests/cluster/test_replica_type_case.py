"""Replica-type keys in another case against the running operator (issue 28): training-operator
v1.9 admits a TFJob written with ``ps`` and ``worker`` keys and its defaulter camel-cases them in
memory (``setTensorflowTypeNamesToCamelCase``), so such a job must run here as there, and stay
editable, while the stored job keeps the user's keys."""

from __future__ import annotations

import json

import kube
import pytest
from kube import get, job_pods, kubectl, namespace_fixture, replica, wait_for

pytestmark = pytest.mark.cluster

NS = "ato-replica-keys"
namespace = namespace_fixture(NS)


def pod_names(job: str) -> set[str]:
    return {p["metadata"]["name"] for p in job_pods(NS, job)}


def tf_config(pod_name: str) -> dict:
    (c,) = [c for c in get("pod", "-n", NS, pod_name)["spec"]["containers"] if c["name"] == "tensorflow"]
    return json.loads(next(e["value"] for e in c["env"] if e["name"] == "TF_CONFIG"))


def succeeded(job: str) -> dict | None:
    """The job's last condition if it is Succeeded."""
    last = ((get("tfjob", "-n", NS, job).get("status") or {}).get("conditions") or [{}])[-1]
    return last if last.get("type") == "Succeeded" else None


def test_tfjob_with_lowercase_keys_runs_and_scales_as_upstream() -> None:
    name = kube.tfjob("lower-keys", {"ps": replica(), "worker": replica(count=1)}, NS)
    wait_for(lambda: pod_names(name) == {f"{name}-ps-0", f"{name}-worker-0"}, what="the ps and worker pods")
    for rtype in ("ps", "worker"):
        labels = get("pod", "-n", NS, f"{name}-{rtype}-0")["metadata"]["labels"]
        assert labels["training.kubeflow.org/replica-type"] == rtype
    config = tf_config(f"{name}-worker-0")
    assert sorted(config["cluster"]) == ["ps", "worker"]
    assert config["task"] == {"type": "worker", "index": 0}
    # The status is keyed by the camel-cased types, as upstream writes it; the spec keeps the keys.
    wait_for(
        lambda: (
            sorted((get("tfjob", "-n", NS, name).get("status") or {}).get("replicaStatuses") or {})
            == ["PS", "Worker"]
        ),
        what="replicaStatuses PS and Worker",
    )
    assert sorted(get("tfjob", "-n", NS, name)["spec"]["tfReplicaSpecs"]) == ["ps", "worker"]

    # An update of the stored job through its own key: the scale that issue 28 could not make.
    scale = {"spec": {"tfReplicaSpecs": {"worker": {"replicas": 2}}}}
    patched = kubectl("patch", "tfjob", "-n", NS, name, "--type=merge", "-p", json.dumps(scale), check=False)
    assert patched.returncode == 0, patched.stderr
    wait_for(lambda: f"{name}-worker-1" in pod_names(name), what="the second worker")
    assert len(tf_config(f"{name}-worker-1")["cluster"]["worker"]) == 2

    # Without a chief, worker 0 succeeding is the job's success, as for Worker keys.
    kube.finish_pod(NS, f"{name}-worker-0", 0)
    done = wait_for(lambda: succeeded(name), what=f"{name} Succeeded")
    assert done["reason"] == "TFJobSucceeded"


def test_worker_and_Worker_in_one_tfjob_are_refused() -> None:
    manifest = kube.manifest(
        "TFJob", "twin-keys", NS, {"tfReplicaSpecs": {"worker": replica(), "Worker": replica()}}
    )
    result = kubectl("apply", "-f", "-", stdin=json.dumps(manifest), check=False)
    assert result.returncode != 0, result.stdout
    assert "both name the replica type Worker; keep one of them" in result.stderr
    assert "twin-keys" not in kubectl("get", "tfjobs", "-n", NS, "-o", "name", check=False).stdout
