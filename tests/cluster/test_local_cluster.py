"""The local cluster behaves as the tests need: Ready fake nodes, KWOK lifecycles, garbage collection."""

from __future__ import annotations

import uuid

import pytest
from kube import get, kubectl, namespace_fixture, wait_for

pytestmark = pytest.mark.cluster

NS = "ato-harness"


namespace = namespace_fixture(NS)


def pod_manifest(name: str, annotations: dict[str, str], containers=("main",), owner=None) -> str:
    meta = {"name": name, "namespace": NS, "annotations": annotations}
    if owner:
        meta["ownerReferences"] = [owner]
    import json

    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": meta,
            "spec": {
                "restartPolicy": "Never",
                "containers": [{"name": c, "image": "docker.io/library/busybox:1.36"} for c in containers],
            },
        }
    )


def phase(name: str) -> str:
    return get("pod", "-n", NS, name).get("status", {}).get("phase", "")


def test_nodes_are_ready_and_some_have_gpus():
    nodes = get("nodes")["items"]
    assert len(nodes) >= 4
    for node in nodes:
        ready = [c for c in node["status"]["conditions"] if c["type"] == "Ready"]
        assert ready and ready[0]["status"] == "True", node["metadata"]["name"]
        for addr in node["status"]["addresses"]:
            if addr["type"] == "InternalIP":
                assert addr["address"].startswith("127."), addr
    gpus = [n for n in nodes if n["status"]["allocatable"].get("nvidia.com/gpu")]
    assert gpus, "some fake nodes advertise nvidia.com/gpu"


@pytest.mark.parametrize(
    ("annotations", "expected_phase", "expected_codes"),
    [
        (
            {"sim.training.ato.dev/exit-code": "3", "sim.training.ato.dev/run-for": "2s"},
            "Failed",
            {"main": 3},
        ),
        (
            {"sim.training.ato.dev/exit-code": "0", "sim.training.ato.dev/run-for": "1s"},
            "Succeeded",
            {"main": 0},
        ),
        # Per-container codes: one failing container fails the pod.
        (
            {"sim.training.ato.dev/exit-code": "0", "sim.training.ato.dev/exit-code.side": "137"},
            "Failed",
            {"main": 0, "side": 137},
        ),
    ],
)
def test_pod_lifecycle_follows_annotations(annotations, expected_phase, expected_codes):
    name = f"life-{uuid.uuid4().hex[:8]}"
    kubectl("apply", "-f", "-", stdin=pod_manifest(name, annotations, containers=tuple(expected_codes)))
    wait_for(lambda: phase(name) == "Running" or phase(name) == expected_phase, what=f"{name} running")
    wait_for(lambda: phase(name) == expected_phase, what=f"{name} {expected_phase}")
    statuses = get("pod", "-n", NS, name)["status"]["containerStatuses"]
    codes = {s["name"]: s["state"]["terminated"]["exitCode"] for s in statuses}
    assert codes == expected_codes
    pod_ip = get("pod", "-n", NS, name)["status"]["podIP"]
    assert pod_ip.startswith("127."), pod_ip


def test_pod_without_exit_annotation_keeps_running():
    name = f"forever-{uuid.uuid4().hex[:8]}"
    kubectl("apply", "-f", "-", stdin=pod_manifest(name, {}))
    wait_for(lambda: phase(name) == "Running", what=f"{name} running")
    import time

    time.sleep(3)
    assert phase(name) == "Running"


def test_deleting_an_owner_garbage_collects_what_it_owns():
    owner = f"owner-{uuid.uuid4().hex[:8]}"
    kubectl("create", "configmap", owner, "-n", NS)
    uid = get("configmap", "-n", NS, owner)["metadata"]["uid"]
    ref = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": owner,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }
    pods = [f"{owner}-p{i}" for i in range(2)]
    for p in pods:
        kubectl("apply", "-f", "-", stdin=pod_manifest(p, {}, owner=ref))
    wait_for(lambda: all(phase(p) == "Running" for p in pods), what="owned pods running")
    kubectl("delete", "configmap", owner, "-n", NS)
    left = lambda: [p for p in pods if kubectl("get", "pod", "-n", NS, p, check=False).returncode == 0]  # noqa: E731
    wait_for(lambda: not left(), what="garbage collection of owned pods")
