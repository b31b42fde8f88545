"""Jobs on the real node (hack/real-node.sh): real containers under a real kubelet, beside the KWOK
nodes, against the running operator. The job's fate comes from the containers' real exit codes and
restarts, not from KWOK annotations. hack/test.sh starts the node before this module and stops it
after (`hack/test.sh real-node`)."""

from __future__ import annotations

import json
import re
import subprocess
import uuid
from datetime import datetime

import pytest
import yaml
from kube import (
    REAL_NODE,
    REAL_NODE_LABEL,
    ROOT,
    Watch,
    create_job,
    get,
    kubectl,
    namespace_fixture,
    real_replica,
    tfjob,
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


def test_a_real_exit_1_fails_a_never_job():
    name = tfjob(unique("real-fail"), {"Worker": real_replica("echo failing; exit 1", "Never")}, NS)
    wait_for(lambda: "Failed" in conditions("tfjob", name), what=f"{name} Failed")
    terminated = container_status(f"{name}-worker-0")["state"]["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (1, "Error")


def test_on_failure_restarts_the_real_container_in_place():
    name = tfjob(unique("real-onfail"), {"Worker": real_replica("echo attempt; exit 1", "OnFailure")}, NS)
    worker = f"{name}-worker-0"
    uid = wait_for(lambda: pod(worker).get("metadata", {}).get("uid"), what=worker)
    # The kubelet's back-off between restarts is real: 10 s, then 20 s. A job that ends instead
    # ends the wait.
    wait_for(
        lambda: container_status(worker).get("restartCount", 0) >= 2 or finished("tfjob", name),
        what=f"{worker} restarted twice",
    )
    assert not finished("tfjob", name)
    status = container_status(worker)
    assert status["lastState"]["terminated"]["exitCode"] == 1
    assert pod(worker)["metadata"]["uid"] == uid, "restarted in place, not recreated"
    assert pod(worker)["status"]["phase"] == "Running"
    # The kubelet keeps one dead container per container: while a restart is under way the pod's
    # lastState may still name the one it has just removed.
    wait_for(
        lambda: "attempt" in kubectl("logs", "-n", NS, worker, "--previous", check=False).stdout,
        what=f"{worker}'s previous container's log",
    )
    assert "Failed" not in conditions("tfjob", name)


def event_messages(name: str, reason: str) -> list[str]:
    events = get("events", "-n", NS, "--field-selector", f"involvedObject.name={name}")["items"]
    return [e["message"] for e in events if e["reason"] == reason]


def test_exit_code_policy_recreates_the_pod_after_a_real_retryable_exit():
    name = tfjob(unique("real-exitcode"), {"Worker": real_replica("exit 130", "ExitCode")}, NS)
    worker = f"{name}-worker-0"
    first = wait_for(lambda: pod(worker).get("metadata", {}).get("uid"), what=worker)
    wait_for(
        lambda: pod(worker).get("metadata", {}).get("uid") not in (None, first) or finished("tfjob", name),
        what=f"{worker} recreated by the operator",
    )
    assert not finished("tfjob", name)
    # The operator saw the container's own exit code, which no annotation gave.
    assert f"Pod: {NS}.{worker} exited with code 130" in event_messages(name, "ExitedWithCode")


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


# What a real kubelet does on `kubectl delete pod` with a grace period: SIGTERM at once, SIGKILL
# when the grace period is over. A program that handles SIGTERM ends at once with its own code; one
# that does not (PID 1 without a handler ignores it) is killed at the end: 137.
HANDLES_SIGTERM = "trap 'echo got SIGTERM; exit 143' TERM; while :; do sleep 1; done"
IGNORES_SIGTERM = "sleep 3600"


def bare_pod(name: str, script: str, grace: int) -> None:
    template = real_replica(script, container="main")["template"]
    template["spec"] |= {"restartPolicy": "OnFailure", "terminationGracePeriodSeconds": grace}
    manifest = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS}, **template}
    kubectl("apply", "-f", "-", stdin=json.dumps(manifest))
    wait_for(lambda: container_status(name).get("started"), what=f"{name} started")


def parse_time(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


@pytest.mark.parametrize(
    ("script", "exit_code", "at_once"),
    [(HANDLES_SIGTERM, 143, True), (IGNORES_SIGTERM, 137, False)],
    ids=["handles-sigterm", "ignores-sigterm"],
)
def test_graceful_delete_of_a_running_pod_goes_through_failed(script, exit_code, at_once):
    name = unique("real-graceful")
    bare_pod(name, script, grace=6)
    watch = Watch("pod", name, NS)
    kubectl("delete", "pod", "-n", NS, name, "--wait=false")
    wait_for(lambda: not pod(name), what=f"{name} removed")
    events = watch.events()
    assert any(
        p["metadata"].get("deletionTimestamp") and p["status"]["phase"] == "Running" for _, p in events
    )
    failed = [p for t, p in events if t == "MODIFIED" and p["status"]["phase"] == "Failed"]
    assert failed, f"phase Failed before removal; saw {[(t, p['status']['phase']) for t, p in events]}"
    terminated = failed[0]["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (exit_code, "Error")
    # The first deletionTimestamp is the deletion time plus the grace period.
    grace_end = parse_time(
        next(p for _, p in events if p["metadata"].get("deletionTimestamp"))["metadata"]["deletionTimestamp"]
    )
    finished_before_grace_end = (grace_end - parse_time(terminated["finishedAt"])).total_seconds()
    if at_once:
        assert finished_before_grace_end >= 3, "stopped by SIGTERM, long before the grace period ended"
    else:
        assert finished_before_grace_end <= 1, "killed only when the grace period ended"
    assert events[-1][0] == "DELETED"


def test_deleting_a_running_worker_does_not_fail_its_job():
    name = tfjob(unique("real-delete"), {"Worker": real_replica(HANDLES_SIGTERM, "OnFailure")}, NS)
    worker = f"{name}-worker-0"
    first = wait_for(
        lambda: container_status(worker).get("started") and pod(worker)["metadata"]["uid"], what=worker
    )
    kubectl("delete", "pod", "-n", NS, worker, "--wait=false")
    wait_for(
        lambda: (
            (
                pod(worker).get("metadata", {}).get("uid") not in (None, first)
                and container_status(worker).get("started")
            )
            or finished("tfjob", name)
        ),
        what=f"{worker} recreated and running",
    )
    assert not finished("tfjob", name)


# Allocates 200 MiB, past its 50 MiB limit: cgroup v1 here enforces it, the kernel kills it.
ALLOCATES_200_MI = ["python3", "-c", "x = [bytearray(1 << 20) for _ in range(200)]; print('survived')"]


def test_a_memory_limit_oom_kills_the_real_container_and_fails_a_never_job():
    worker = real_replica("", "Never")
    container = worker["template"]["spec"]["containers"][0]
    container |= {
        "image": "ato.local/python:local",
        "command": ALLOCATES_200_MI,
        "resources": {"limits": {"memory": "50Mi"}},
    }
    name = tfjob(unique("real-oom"), {"Worker": worker}, NS)
    wait_for(lambda: finished("tfjob", name), what=f"{name} finished")
    assert "Failed" in conditions("tfjob", name)
    terminated = container_status(f"{name}-worker-0")["state"]["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (137, "OOMKilled")


def test_active_deadline_stops_the_real_containers():
    name = tfjob(
        unique("real-deadline"),
        {"Worker": real_replica(HANDLES_SIGTERM, "Never")},
        NS,
        # cleanPodPolicy None (the default) would keep the pod, and its container, running.
        run_policy={"activeDeadlineSeconds": 5, "cleanPodPolicy": "Running"},
    )
    worker = f"{name}-worker-0"
    wait_for(lambda: container_status(worker).get("started"), what=f"{worker} started")
    wait_for(lambda: finished("tfjob", name), what=f"{name} past its deadline")
    assert "deadline" in conditions("tfjob", name)["Failed"]["message"]
    # The running pod is deleted: the kubelet stops its container (SIGTERM, 143) and removes it.
    wait_for(lambda: not pod(worker), what=f"{worker} stopped and removed")


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
