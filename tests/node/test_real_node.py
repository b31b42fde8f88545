"""Jobs on the real node (hack/real-node.sh): real containers under a real kubelet, beside the KWOK
nodes, against the running operator: the node itself, and real programs that train and log. The
kubelet's semantics (exit codes, restarts, graceful deletion, OOM kills, deadlines) are checked by
the cluster tests' real variants (tests/cluster, `node` parameter). hack/test.sh starts the node
before these and stops it after (`hack/test.sh real-node`)."""

from __future__ import annotations

import json
import re
import subprocess
import uuid

import pytest
import yaml
from kube import (
    REAL_NODE,
    REAL_NODE_LABEL,
    ROOT,
    create_job,
    get,
    kubectl,
    namespace_fixture,
    real_replica,
    wait_for,
)

pytestmark = pytest.mark.real_node

NS = "ato-real-node"

namespace = namespace_fixture(NS)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:5]}"


def conditions(kind: str, name: str) -> dict[str, dict]:
    found = get(kind, "-n", NS, name).get("status", {}).get("conditions") or []
    return {c["type"]: c for c in found if c.get("status") == "True"}


def finished(kind: str, name: str) -> bool:
    return bool({"Succeeded", "Failed"} & set(conditions(kind, name)))


def pod(name: str) -> dict:
    result = kubectl("get", "pod", "-n", NS, name, "-o", "json", check=False)
    return json.loads(result.stdout) if result.returncode == 0 else {}


def container_status(name: str) -> dict:
    statuses = pod(name).get("status", {}).get("containerStatuses") or [{}]
    return statuses[0]


def kubernetes_version() -> str:
    for line in (ROOT / "versions.env").read_text().splitlines():
        if line.startswith("KUBERNETES_VERSION="):
            return line.split("=", 1)[1]
    raise AssertionError("KUBERNETES_VERSION not in versions.env")


def test_the_node_is_a_real_kubelet_tainted_and_not_kwoks():
    node = get("node", REAL_NODE)
    info = node["status"]["nodeInfo"]
    assert info["kubeletVersion"] == kubernetes_version()
    assert info["containerRuntimeVersion"].startswith("containerd://")
    assert {"key": REAL_NODE_LABEL, "value": "true", "effect": "NoSchedule"} in node["spec"]["taints"]
    # KWOK manages only the nodes annotated so (hack/kwok/cluster.yaml).
    assert "kwok.x-k8s.io/node" not in (node["metadata"].get("annotations") or {})
    ready = [c for c in node["status"]["conditions"] if c["type"] == "Ready"]
    assert ready[0]["status"] == "True"
    assert ready[0]["reason"] == "KubeletReady"


def test_the_nodes_daemons_listen_on_its_loopback_address_only():
    listeners = subprocess.run(["ss", "-Hltnup"], capture_output=True, text=True, check=True).stdout
    ours = [line for line in listeners.splitlines() if '"kubelet"' in line or '"containerd"' in line]
    assert ours, "the kubelet's and containerd's listeners are visible"
    for line in ours:
        assert line.split()[4].startswith(f"{REAL_NODE}:"), f"listens beyond the node's address: {line}"


def test_xgboostjob_succeeds_from_real_exit_codes_and_logs_show_the_env():
    script = 'echo "rank=$RANK world=$WORLD_SIZE master=$MASTER_ADDR:$MASTER_PORT"; exit 0'
    name = create_job(
        "XGBoostJob",
        unique("real-xgb"),
        NS,
        {
            "xgbReplicaSpecs": {
                "Master": real_replica(script, "Never", container="xgboost"),
                "Worker": real_replica(script, "Never", container="xgboost"),
            }
        },
    )
    wait_for(lambda: "Succeeded" in conditions("xgboostjob", name), what=f"{name} Succeeded")
    for replica, rank in (("master", 0), ("worker", 1)):
        pod_name = f"{name}-{replica}-0"
        assert pod(pod_name)["spec"]["nodeName"] == REAL_NODE
        status = container_status(pod_name)
        assert status["containerID"].startswith("containerd://")
        assert status["state"]["terminated"]["exitCode"] == 0
        assert status["state"]["terminated"]["reason"] == "Completed"
        logs = kubectl("logs", "-n", NS, pod_name).stdout
        assert f"rank={rank} world=2 master={name}-master-0:" in logs


def test_the_real_node_sample_trains_through_the_operators_env_services_and_dns():
    """config/samples/real-node/xgboostjob_average.yaml as a user applies it: three processes
    rendezvous at MASTER_ADDR (the master's per-replica Service, resolved by the node's CoreDNS),
    average their gradients, and succeed only if the shared model converged."""
    sample = yaml.safe_load((ROOT / "config/samples/real-node/xgboostjob_average.yaml").read_text())
    name = unique("real-average")
    sample["metadata"] = {"name": name, "namespace": NS}
    kubectl("apply", "-f", "-", stdin=json.dumps(sample))
    wait_for(lambda: finished("xgboostjob", name), what=f"{name} finished")
    assert "Succeeded" in conditions("xgboostjob", name)
    for pod_name, rank in ((f"{name}-master-0", 0), (f"{name}-worker-0", 1), (f"{name}-worker-1", 2)):
        logs = kubectl("logs", "-n", NS, pod_name).stdout
        fit = re.search(rf"rank {rank}/3 on {pod_name}: w=(\S+) b=(\S+)", logs)
        assert fit, logs
        assert abs(float(fit[1]) - 3) < 0.1 and abs(float(fit[2]) - 1) < 0.1, logs


def test_the_real_node_jax_sample_trains_two_processes_through_jax_distributed():
    """config/samples/real-node/jaxjob_regression.yaml as a user applies it: JAX's coordinator at
    COORDINATOR_ADDRESS (worker 0's Service, resolved by CoreDNS), Gloo all-gathers between the
    two real processes, Succeeded only if the shared model converged."""
    sample = yaml.safe_load((ROOT / "config/samples/real-node/jaxjob_regression.yaml").read_text())
    name = unique("real-jax")
    sample["metadata"] = {"name": name, "namespace": NS}
    kubectl("apply", "-f", "-", stdin=json.dumps(sample))
    wait_for(lambda: finished("jaxjob", name), what=f"{name} finished")
    assert "Succeeded" in conditions("jaxjob", name)
    for rank in (0, 1):
        logs = kubectl("logs", "-n", NS, f"{name}-worker-{rank}").stdout
        fit = re.search(rf"process {rank}/2: w=(\S+) b=(\S+)", logs)
        assert fit, logs
        assert abs(float(fit[1]) - 3) < 0.1 and abs(float(fit[2]) - 1) < 0.1, logs
