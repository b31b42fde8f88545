"""Job lifecycle against the running operator: restart policies, backoff, deadline, TTL,
clean-pod policy, suspend/resume and events. Pods get their fate from KWOK annotations in the
job's pod templates, so every outcome is driven through real pod phases. The tests that take
`node` also run on the real node, where real containers exit, restart and are killed
(tests/cluster/conftest.py)."""

from __future__ import annotations

import json
import time
import uuid
from datetime import datetime

import kube
import pytest
from kube import (
    FINISHED,
    REAL,
    Program,
    get,
    kubectl,
    namespace_fixture,
    node_replica,
    replica,
    wait_for,
)

pytestmark = pytest.mark.cluster

NS = "ato-lifecycle"


namespace = namespace_fixture(NS)

# Fake nodes a test may lose: tainted, so only the pods of the test that made them run there.
LOSABLE = "test.ato.dev/losable"


@pytest.fixture
def losable_nodes():
    """Two fake nodes of the test's own: ``(tag, names)``. The upstream replay runs beside these
    tests (hack/test.sh), and deleting a shared node would make the control plane delete its pods
    too: its finished jobs would lose pods and its running ones get replacements it never asked
    for. A taint keeps every other pod off these nodes; :func:`on_losable_nodes` lets a replica on."""
    tag = uuid.uuid4().hex[:6]
    names = [f"kwok-losable-{tag}-{i}" for i in range(2)]
    capacity = {"cpu": "32", "memory": "128Gi", "ephemeral-storage": "200Gi", "pods": "110"}
    nodes = [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "annotations": {"kwok.x-k8s.io/node": "fake"},
                "labels": {"type": "kwok", "kubernetes.io/hostname": name, LOSABLE: tag},
            },
            "spec": {"taints": [{"key": LOSABLE, "value": tag, "effect": "NoSchedule"}]},
            "status": {
                "addresses": [{"address": f"127.0.2.{i + 1}", "type": "InternalIP"}],
                "allocatable": capacity,
                "capacity": capacity,
            },
        }
        for i, name in enumerate(names)
    ]
    kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": nodes}))
    kubectl("wait", "--for=condition=Ready", *(f"node/{n}" for n in names), "--timeout=120s")
    yield tag, names
    kubectl("delete", "node", *names, "--ignore-not-found", "--wait=false")


def on_losable_nodes(spec: dict, tag: str) -> dict:
    """``spec``'s pods run on the nodes of :func:`losable_nodes` ``tag``, and only there."""
    pod = spec["template"]["spec"]
    pod["nodeSelector"] = {LOSABLE: tag}
    pod["tolerations"] = [{"key": LOSABLE, "operator": "Equal", "value": tag, "effect": "NoSchedule"}]
    return spec


def tfjob(name, replica_specs, run_policy=None):
    return kube.tfjob(name, replica_specs, NS, run_policy)


def job(name):
    return get("tfjob", "-n", NS, name)


def state(name):
    conditions = job(name).get("status", {}).get("conditions") or []
    return conditions[-1]["type"] if conditions else ""


def condition(name, ctype):
    for c in job(name).get("status", {}).get("conditions") or []:
        if c["type"] == ctype:
            return c
    return None


def pod(name):
    result = kubectl("get", "pod", "-n", NS, name, "-o", "json", check=False)
    return json.loads(result.stdout) if result.returncode == 0 else None


def restarts(pod_name):
    p = pod(pod_name) or {}
    return sum(s.get("restartCount", 0) for s in p.get("status", {}).get("containerStatuses") or [])


def events(name):
    return get("events", "-n", NS, "--field-selector", f"involvedObject.name={name}")["items"]


def event_reasons(name):
    return {e["reason"] for e in events(name)}


def container_status(pod_name):
    return ((pod(pod_name) or {}).get("status", {}).get("containerStatuses") or [{}])[0]


def unique(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:5]}"


def ts(value):
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


# The historic tf-operator restart matrix (replica_restart_policy_tests.py).
@pytest.mark.parametrize(
    ("policy", "code", "expect"),
    [
        ("Always", 0, "restarted"),
        ("Always", 1, "restarted"),
        ("OnFailure", 1, "restarted"),
        ("OnFailure", 0, "Succeeded"),
        ("Never", 0, "Succeeded"),
        ("Never", 1, "Failed"),
        ("ExitCode", 1, "Failed"),
        ("ExitCode", 130, "recreated"),
    ],
)
def test_restart_matrix(node, policy, code, expect):
    program = Program(exit_code=code)
    name = tfjob(unique(f"rm-{policy.lower()}-{code}"), {"Worker": node_replica(node, program, policy)})
    worker = f"{name}-worker-0"
    first = wait_for(lambda: (pod(worker) or {}).get("metadata", {}).get("uid"), what=worker)
    if expect in ("Succeeded", "Failed"):
        wait_for(lambda: state(name) == expect, what=f"{name} {expect}")
        assert restarts(worker) == 0
        assert pod(worker)["metadata"]["uid"] == first  # not recreated: the finished pod is still there
        terminated = container_status(worker)["state"]["terminated"]
        assert (terminated["exitCode"], terminated["reason"]) == (code, "Error" if code else "Completed")
        assert not condition(name, "Restarting")
    elif expect == "restarted":
        assert_restarted_in_place(node, name, worker, first, code)
    else:
        wait_for(
            lambda: (pod(worker) or {}).get("metadata", {}).get("uid") not in (None, first),
            what=f"{worker} recreated by the operator",
        )
        assert "TFJobRestarting" in event_reasons(name)
        # The operator read the container's own exit code (on the real node no annotation gave it).
        exited = [e["message"] for e in events(name) if e["reason"] == "ExitedWithCode"]
        assert f"Pod: {NS}.{worker} exited with code {code}" in exited


def assert_restarted_in_place(node, name, worker, uid, code):
    """The kubelet restarts the container in place (the real one after its back-off: 10 s, then
    20 s); the pod and the job keep running."""
    wait_for(lambda: restarts(worker) >= 2, what=f"{worker} restarted in place")
    wait_for(lambda: state(name) == "Running", what=f"{name} running")
    current = pod(worker)
    assert current["metadata"]["uid"] == uid, "restarted in place, not recreated"
    assert current["status"]["phase"] == "Running"
    last = container_status(worker)["lastState"]["terminated"]
    assert (last["exitCode"], last["reason"]) == (code, "Error" if code else "Completed")
    if node == REAL:
        # The kubelet keeps one dead container per container: --previous shows what it printed.
        wait_for(
            lambda: f"exits {code}" in kubectl("logs", "-n", NS, worker, "--previous", check=False).stdout,
            what=f"{worker}'s previous container's log",
        )
    assert not condition(name, "Failed")


def test_backoff_limit_counts_exit_code_recreations(node):
    name = tfjob(
        unique("backoff"),
        {"Worker": node_replica(node, Program(exit_code=137), "ExitCode")},
        run_policy={"backoffLimit": 2},
    )
    wait_for(lambda: state(name) == "Failed", what=f"{name} fails by backoff")
    assert "backoff limit" in condition(name, "Failed")["message"]
    # PastBackoffLimit: failed as the restarts reach the limit.
    assert job(name)["status"]["restartCount"] == 2


def test_active_deadline_fires_on_time_with_nothing_else_happening(node):
    # cleanPodPolicy None (the default) would leave the pod, and a real container, running.
    name = tfjob(
        unique("deadline"),
        {"Worker": node_replica(node, Program())},
        run_policy={"activeDeadlineSeconds": 5, "cleanPodPolicy": "Running"},
    )
    wait_for(lambda: state(name) == "Failed", what=f"{name} fails by deadline")
    # Its running pod is deleted: the kubelet stops the container (SIGTERM) and the pod goes.
    wait_for(lambda: pod(f"{name}-worker-0") is None, what=f"{name}'s running pod stopped and removed")
    status = job(name)["status"]
    late = (ts(status["completionTime"]) - ts(status["startTime"])).total_seconds()
    # Nothing wakes the job: its own requeue does, which waits its turn in the TFJob queue that
    # the upstream replay beside this test fills; never before the deadline. How late it may be
    # is the benchmark's business, not a test's.
    assert late >= 5, f"deadline fired after {late}s"
    assert "deadline" in condition(name, "Failed")["message"]


def test_ttl_deletes_the_finished_job():
    name = tfjob(unique("ttl"), {"Worker": replica(0)}, run_policy={"ttlSecondsAfterFinished": 3})
    wait_for(lambda: state(name) == "Succeeded", what=f"{name} succeeds")
    done = ts(job(name)["status"]["completionTime"])
    wait_for(
        lambda: kubectl("get", "tfjob", "-n", NS, name, check=False).returncode != 0,
        what=f"{name} deleted by TTL",
    )
    # The TTL's requeue waits its turn in the TFJob queue, which the upstream replay beside this
    # test fills with dozens of jobs: never before the TTL (how soon after is the benchmark's).
    assert (datetime.now(done.tzinfo) - done).total_seconds() >= 3


@pytest.mark.parametrize(
    ("policy", "chief_left", "worker_left"),
    [("None", True, True), ("Running", True, False), ("All", False, False)],
)
def test_clean_pod_policy(policy, chief_left, worker_left):
    name = tfjob(
        unique(f"clean-{policy.lower()}"),
        {"Chief": replica(0), "Worker": replica()},
        run_policy={"cleanPodPolicy": policy},
    )
    wait_for(lambda: state(name) == "Succeeded", what=f"{name} succeeds")
    # Labelled finished by the pass that has applied the policy: nothing more is deleted after.
    wait_for(lambda: job(name)["metadata"].get("labels", {}).get(FINISHED), what=f"{name} labelled finished")
    for replica_pod, left in ((f"{name}-chief-0", chief_left), (f"{name}-worker-0", worker_left)):
        if left:
            assert not pod(replica_pod)["metadata"].get("deletionTimestamp"), f"{replica_pod} left"
        else:
            wait_for(lambda p=replica_pod: pod(p) is None, what=f"{replica_pod} removed")


def test_suspend_and_resume():
    name = tfjob(unique("suspend"), {"PS": replica(), "Worker": replica()})
    wait_for(lambda: state(name) == "Running", what=f"{name} running")
    started = job(name)["status"]["startTime"]
    kubectl("patch", "tfjob", "-n", NS, name, "--type=merge", "-p", '{"spec":{"runPolicy":{"suspend":true}}}')
    wait_for(lambda: state(name) == "Suspended", what=f"{name} suspended")
    wait_for(lambda: pod(f"{name}-worker-0") is None and pod(f"{name}-ps-0") is None, what="pods removed")
    assert condition(name, "Running")["status"] == "False"
    time.sleep(1.5)
    kubectl(
        "patch", "tfjob", "-n", NS, name, "--type=merge", "-p", '{"spec":{"runPolicy":{"suspend":false}}}'
    )
    wait_for(lambda: state(name) == "Running", what=f"{name} running again")
    assert condition(name, "Suspended")["status"] == "False"
    assert job(name)["status"]["startTime"] != started
    assert {"TFJobSuspended", "TFJobResumed"} <= event_reasons(name)


def test_events_on_the_job_are_visible_in_describe():
    name = tfjob(unique("events"), {"Worker": replica(0)})
    wait_for(lambda: state(name) == "Succeeded", what=f"{name} succeeds")
    wait_for(
        lambda: {"SuccessfulCreatePod", "SuccessfulCreateService", "TFJobSucceeded"} <= event_reasons(name),
        what="events",
    )
    described = kubectl("describe", "tfjob", "-n", NS, name).stdout
    assert "SuccessfulCreatePod" in described and "TFJobSucceeded" in described


def test_job_recovers_when_a_node_is_lost(losable_nodes):
    """Upstream #2072: a lost node must not leave the job hanging. The node's pods are
    garbage-collected by the control plane (or force-deleted by the operator when stuck
    Terminating) and the operator creates the replicas again on the remaining nodes."""
    tag, _ = losable_nodes
    specs = {"Chief": on_losable_nodes(replica(), tag), "Worker": on_losable_nodes(replica(), tag)}
    name = tfjob(unique("lostnode"), specs)
    wait_for(lambda: state(name) == "Running", what=f"{name} running")
    worker = f"{name}-worker-0"
    before = pod(worker)
    node = before["spec"]["nodeName"]
    kubectl("delete", "node", node)
    wait_for(
        lambda: (
            (p := pod(worker))
            and p["metadata"]["uid"] != before["metadata"]["uid"]
            and p["status"].get("phase") == "Running"
        ),
        interval=2,
        what=f"{worker} recreated after node {node} was lost",
    )
    assert pod(worker)["spec"]["nodeName"] != node
    assert state(name) in ("Running", "Restarting")


def test_tensorboard_on_request_reads_the_jobs_log_volume():
    name = unique("tb")
    spec = replica()
    spec["template"]["spec"]["volumes"] = [{"name": "logs", "emptyDir": {}}]
    spec["template"]["spec"]["containers"][0]["volumeMounts"] = [{"name": "logs", "mountPath": "/logs"}]
    job = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {
            "name": name,
            "namespace": NS,
            "annotations": {"training.ato.dev/tensorboard-log-dir": "/logs/tb"},
        },
        "spec": {"tfReplicaSpecs": {"Worker": spec}},
    }
    kubectl("apply", "-f", "-", stdin=json.dumps(job))
    deployment = wait_for(
        lambda: (
            (
                r := kubectl("get", "deployment", "-n", NS, f"{name}-tensorboard", "-o", "json", check=False)
            ).returncode
            == 0
            and json.loads(r.stdout)
        ),
        what="the TensorBoard deployment",
    )
    assert deployment["metadata"]["ownerReferences"][0]["name"] == name
    wait_for(
        lambda: (
            get("deployment", "-n", NS, f"{name}-tensorboard").get("status", {}).get("availableReplicas") == 1
        ),
        what="TensorBoard available",
    )
    assert kubectl("get", "service", "-n", NS, f"{name}-tensorboard", check=False).returncode == 0
    kubectl("delete", "tfjob", "-n", NS, name)
    wait_for(
        lambda: kubectl("get", "deployment", "-n", NS, f"{name}-tensorboard", check=False).returncode != 0,
        what="TensorBoard garbage-collected with the job",
    )


@pytest.mark.parametrize(
    ("policy", "exit_code", "cleaned"),
    [
        ("OnCompletion", 0, True),
        ("OnCompletion", 1, False),
        ("OnFailure", 1, True),
        ("OnFailure", 0, False),
        ("Always", 0, True),
        ("Never", 1, False),
    ],
)
def test_paddle_clean_pod_policy(policy, exit_code, cleaned):
    """paddle-operator's cleanPodPolicy values, applied when the job finishes either way."""
    name = unique(f"pd-{policy.lower()}-{exit_code}")
    worker = replica(exit_code, policy="Never")
    worker["template"]["spec"]["containers"][0]["name"] = "paddle"
    job = {
        "apiVersion": "batch.paddlepaddle.org/v1",
        "kind": "PaddleJob",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"cleanPodPolicy": policy, "intranet": "Service", "worker": {**worker, "replicas": 1}},
    }
    kubectl("apply", "-f", "-", stdin=json.dumps(job))
    expected = "Succeeded" if exit_code == 0 else "Failed"
    wait_for(
        lambda: (
            (get("paddlejob", "-n", NS, name).get("status", {}).get("conditions") or [{}])[-1].get("type")
            == expected
        ),
        what=f"{name} {expected}",
    )
    if cleaned:
        wait_for(lambda: pod(f"{name}-worker-0") is None, what="finished pod cleaned")
    else:
        time.sleep(4)
        assert pod(f"{name}-worker-0") is not None


def test_unschedulable_pod_is_surfaced_on_the_job():
    """Upstream #1131: why a job does not start is visible on the job itself."""
    worker = replica()
    worker["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1000"}}
    name = tfjob(unique("unsched"), {"Worker": worker})
    wait_for(lambda: "Unschedulable" in event_reasons(name), what="Unschedulable event")
    described = kubectl("describe", "tfjob", "-n", NS, name).stdout
    assert "Insufficient cpu" in described


def test_evicted_pod_is_recreated_and_is_not_a_failure():
    """Upstream #1570: an evicted pod is recreated whatever the restart policy (here Never) and
    neither fails the job nor counts as a restart; it counts as an eviction, which backoffLimit
    bounds so that an eviction loop ends (tests/cluster/test_real_cluster.py)."""
    name = tfjob(unique("evict"), {"Worker": replica(policy="Never")}, {"backoffLimit": 3})
    wait_for(lambda: state(name) == "Running", what=f"{name} running")
    worker = f"{name}-worker-0"
    before = pod(worker)
    evict = {
        "status": {"phase": "Failed", "reason": "Evicted", "message": "The node was low on resource: memory."}
    }
    kubectl("patch", "pod", worker, "-n", NS, "--subresource=status", "--type=merge", "-p", json.dumps(evict))
    wait_for(
        lambda: (p := pod(worker)) and p["metadata"]["uid"] != before["metadata"]["uid"],
        what="the evicted replica recreated",
    )
    wait_for(lambda: state(name) == "Running", what=f"{name} running again")
    assert not job(name)["status"].get("restartCount")
    assert job(name)["status"]["evictionCount"] == 1
    assert "Evicted" in event_reasons(name)


def test_a_finished_pod_wakes_its_job_without_waiting_for_the_poll():
    """Nothing polls an active job: a pod that finishes wakes its job through the companion's
    pod-signature annotation. (How soon is the benchmark's measurement.)"""
    name = tfjob(unique("wake"), {"Worker": replica(0, run_for="3s", policy="Never")})
    worker = f"{name}-worker-0"
    wait_for(lambda: (pod(worker) or {}).get("status", {}).get("phase") == "Succeeded", what="pod done")
    wait_for(lambda: state(name) == "Succeeded", what=f"{name} Succeeded after its pod")
    # A pass already under way may see the pod finished before the watcher's next flush (1 s).
    wait_for(
        lambda: (
            (job(name)["metadata"].get("annotations") or {})
            .get("training.ato.dev/pod-signature", "")
            .startswith("Succeeded=1;")
        ),
        what="the pod signature on the job",
    )


def test_pod_stuck_terminating_is_force_deleted_only_when_its_node_is_lost(losable_nodes):
    """Upstream #2072: a pod that never finishes terminating (its kubelet is gone) would keep
    its replica from coming back. On a Ready node it is left to its kubelet however long it
    takes (a force delete would run the replacement beside it); once its node is gone the
    operator force-deletes it and creates the replica again."""
    tag, _ = losable_nodes
    worker = on_losable_nodes(replica(), tag)
    worker["template"]["metadata"]["annotations"]["sim.training.ato.dev/stuck-terminating"] = "true"
    worker["template"]["spec"]["terminationGracePeriodSeconds"] = 1
    name = tfjob(unique("stuck"), {"Worker": worker})
    wait_for(lambda: state(name) == "Running", what=f"{name} running")
    pod_name = f"{name}-worker-0"
    before = pod(pod_name)
    node = before["spec"]["nodeName"]
    kubectl("delete", "pod", "-n", NS, pod_name, "--wait=false")
    # Past its grace period plus the operator's 30 s of patience: its node is Ready, so it stays.
    time.sleep(36)
    assert pod(pod_name)["metadata"]["uid"] == before["metadata"]["uid"], "not force-deleted on time alone"
    assert "ForceDeletePod" not in event_reasons(name)
    kubectl("delete", "node", node)
    wait_for(
        lambda: (p := pod(pod_name)) and p["metadata"]["uid"] != before["metadata"]["uid"],
        interval=1,
        what=f"{pod_name} force-deleted and recreated",
    )
    assert "ForceDeletePod" in event_reasons(name)
