"""The local cluster's kubelet simulation (hack/kwok/cluster.yaml) where a real kubelet (>= 1.27)
matters to a controller: graceful deletion through a terminal phase, node-pressure eviction and OOM
kills. Bare pods only: no operator needed. The tests that take `node` also run on the real node
(tests/cluster/conftest.py), which checks the stages against a real kubelet."""

from __future__ import annotations

import json
import time
import uuid
from datetime import UTC, datetime

import kube
import pytest
from kube import Program, kubectl, namespace_fixture, node_template, wait_for

pytestmark = pytest.mark.cluster

NS = "ato-kubelet-sim"
SIM = "sim.training.ato.dev/"


def namespace_not_terminating() -> None:
    # A run right after another finds the namespace still Terminating: creating pods in it fails.
    def settled():
        result = kubectl("get", "namespace", NS, "-o", "jsonpath={.status.phase}", check=False)
        return result.returncode != 0 or result.stdout == "Active"

    wait_for(settled, what=f"namespace {NS} deleted by an earlier run")


namespace = namespace_fixture(NS, before=namespace_not_terminating)


@pytest.fixture(scope="module", autouse=True)
def service_account(namespace):
    # The ServiceAccount admission plugin refuses pods until the namespace's default account exists.
    wait_for(
        lambda: kubectl("get", "serviceaccount", "default", "-n", NS, check=False).returncode == 0,
        what="default ServiceAccount",
    )


def create_pod(
    annotations: dict[str, str], restart_policy: str = "Never", containers=("main",), prefix: str = "sim"
) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    manifest = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NS,
            "annotations": {SIM + k: v for k, v in annotations.items()},
        },
        "spec": {
            "restartPolicy": restart_policy,
            "containers": [{"name": c, "image": "docker.io/library/busybox:1.36"} for c in containers],
        },
    }
    kubectl("apply", "-f", "-", stdin=json.dumps(manifest))
    return name


def create_node_pod(node: str, program: Program, restart_policy: str = "Never", containers=("main",)) -> str:
    """A pod whose containers do what ``program`` says on ``node`` (kube.node_template)."""
    name = f"{node}-{uuid.uuid4().hex[:8]}"
    template = node_template(node, program, containers)
    template["metadata"] |= {"name": name, "namespace": NS}
    template["spec"]["restartPolicy"] = restart_policy
    kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "Pod", **template}))
    return name


def pod(name: str) -> dict | None:
    result = kubectl("get", "pod", "-n", NS, name, "-o", "json", check=False)
    if result.returncode != 0:
        if "NotFound" in result.stderr:
            return None
        raise AssertionError(result.stderr)
    return json.loads(result.stdout)


def phase(name: str) -> str:
    return ((pod(name) or {}).get("status") or {}).get("phase", "")


def wait_running(name: str) -> dict:
    return wait_for(lambda: phase(name) == "Running" and pod(name), what=f"{name} Running")


def wait_gone(name: str) -> None:
    wait_for(lambda: pod(name) is None, interval=0.2, what=f"{name} gone")


def delete(name: str, grace: int) -> datetime:
    kubectl("delete", "pod", "-n", NS, name, f"--grace-period={grace}", "--wait=false")
    return datetime.now(UTC)


def force_delete(name: str) -> None:
    kubectl("delete", "pod", "-n", NS, name, "--grace-period=0", "--force", "--wait=false", check=False)


def parse_time(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def terminated(status: dict) -> dict:
    return status["state"]["terminated"]


def watch_pod(name: str) -> kube.Watch:
    return kube.Watch("pod", name, NS)


def test_plain_delete_removes_the_pod_at_once():
    name = create_pod({})
    wait_running(name)
    start = time.monotonic()
    delete(name, grace=30)
    wait_gone(name)
    # Gone before its 30 s grace period could have passed, however busy the machine.
    assert time.monotonic() - start < 30, "a pod without graceful-delete ignores its grace period"


def test_graceful_delete_goes_through_failed_with_sigterm_exit(node):
    """As the real kubelet: SIGTERM at once, so a program that handles it is gone long before its
    grace period is over."""
    name = create_node_pod(
        node, Program(graceful=True), restart_policy="OnFailure", containers=("main", "side")
    )
    wait_running(name)
    watch = watch_pod(name)
    deleted_at = delete(name, grace=30)
    wait_gone(name)
    gone_after = (datetime.now(UTC) - deleted_at).total_seconds()
    events = watch.events()

    assert any(
        p["metadata"].get("deletionTimestamp") and p["status"]["phase"] == "Running" for _, p in events
    ), "observed Terminating"
    final = [p for t, p in events if t == "MODIFIED" and p["status"]["phase"] == "Failed"]
    assert final, f"phase Failed before removal; saw {[(t, p['status']['phase']) for t, p in events]}"
    failed = final[0]
    deletion = parse_time(failed["metadata"]["deletionTimestamp"])
    assert failed["metadata"]["deletionGracePeriodSeconds"] == 30
    statuses = failed["status"]["containerStatuses"]
    assert {s["name"] for s in statuses} == {"main", "side"}
    for status in statuses:
        assert terminated(status)["exitCode"] == 143
        assert terminated(status)["reason"] == "Error"
        assert "running" not in status["state"]
        assert status["ready"] is False
        # Stopped by SIGTERM, not at the end of the grace period.
        assert parse_time(terminated(status)["finishedAt"]) < deletion.replace(microsecond=0)
    ready = {c["type"]: c for c in failed["status"]["conditions"]}["Ready"]
    assert ready["status"] == "False"
    assert events[-1][0] == "DELETED"
    assert gone_after < 30, gone_after


def test_graceful_delete_of_a_container_ignoring_sigterm_kills_it_when_the_grace_period_ends(node):
    """As the real kubelet: a container that ignores SIGTERM runs out its grace period, then is
    killed (137)."""
    name = create_node_pod(node, Program(on_sigterm="ignore"), restart_policy="OnFailure")
    wait_running(name)
    watch = watch_pod(name)
    deleted_at = delete(name, grace=3)
    wait_gone(name)
    gone_after = (datetime.now(UTC) - deleted_at).total_seconds()
    events = watch.events()
    failed = [p for t, p in events if t == "MODIFIED" and p["status"]["phase"] == "Failed"]
    assert failed, f"phase Failed before removal; saw {[(t, p['status']['phase']) for t, p in events]}"
    status = failed[0]["status"]["containerStatuses"][0]
    assert (terminated(status)["exitCode"], terminated(status)["reason"]) == (137, "Error")
    deletion = parse_time(failed[0]["metadata"]["deletionTimestamp"])
    assert parse_time(terminated(status)["finishedAt"]) >= deletion.replace(microsecond=0)
    # Not before its 3 s grace period is over (how much later depends on the machine).
    assert gone_after >= 2.5, gone_after


def test_graceful_delete_of_a_container_exiting_zero_succeeds(node):
    # run-for keeps the container (pod-finish on KWOK) from ending before the deletion.
    name = create_node_pod(node, Program(exit_code=0, run_for="10m", graceful=True))
    wait_running(name)
    watch = watch_pod(name)
    delete(name, grace=2)
    wait_gone(name)
    events = watch.events()
    done = [p for _, p in events if p["status"]["phase"] in ("Succeeded", "Failed")]
    assert done, "a terminal phase before removal"
    assert done[0]["status"]["phase"] == "Succeeded"
    assert done[0]["metadata"].get("deletionTimestamp")
    status = done[0]["status"]["containerStatuses"][0]
    assert terminated(status)["exitCode"] == 0
    assert terminated(status)["reason"] == "Completed"


def test_graceful_delete_of_a_finished_pod_just_removes_it(node):
    name = create_node_pod(node, Program(exit_code=3, run_for="1s", graceful=True))
    wait_for(lambda: phase(name) == "Failed", what=f"{name} Failed")
    watch = watch_pod(name)
    start = time.monotonic()
    delete(name, grace=30)
    wait_gone(name)
    assert time.monotonic() - start < 30, "nothing left to stop: no grace period"
    for _, p in watch.events():
        assert p["status"]["phase"] == "Failed"
        assert terminated(p["status"]["containerStatuses"][0])["exitCode"] == 3


def test_graceful_delete_of_a_pending_pod_removes_it_at_once():
    name = create_pod({"graceful-delete": "true", "start-after": "10m"})
    time.sleep(1)
    assert phase(name) == "Pending"
    delete(name, grace=30)
    wait_gone(name)


def test_stuck_terminating_wins_over_graceful_delete():
    name = create_pod({"graceful-delete": "true", "stuck-terminating": "true"})
    wait_running(name)
    delete(name, grace=1)
    time.sleep(3)
    try:
        stuck = pod(name)
        assert stuck is not None, "a pod on a lost node stays Terminating"
        assert stuck["status"]["phase"] == "Running"
    finally:
        force_delete(name)


def test_eviction_fails_the_pod_and_keeps_it():
    # exit-code 1 with OnFailure alone would restart the container each run-for (pod-restart):
    # evict-after takes precedence, so no restart may happen first.
    name = create_pod(
        {"evict-after": "2s", "exit-code": "1", "run-for": "1s"},
        restart_policy="OnFailure",
        containers=("main", "side"),
    )
    # Evicted 2 s after it runs: a wait for Running could miss that window on a busy machine.
    wait_for(lambda: phase(name) == "Failed", what=f"{name} evicted")
    evicted = pod(name)
    status = evicted["status"]
    assert status["reason"] == "Evicted"
    assert status["message"].startswith("The node was low on resource: memory. ")
    conditions = {c["type"]: c for c in status["conditions"]}
    target = conditions["DisruptionTarget"]
    assert (target["status"], target["reason"]) == ("True", "TerminationByKubelet")
    assert target["message"] == status["message"]
    assert conditions["Ready"]["status"] == "False"
    assert {s["name"] for s in status["containerStatuses"]} == {"main", "side"}
    for container in status["containerStatuses"]:
        assert terminated(container)["exitCode"] == 137
        assert "running" not in container["state"]
        assert container["restartCount"] == 0
    assert not evicted["metadata"].get("deletionTimestamp")
    time.sleep(2)
    assert phase(name) == "Failed", "the evicted pod object stays"


def test_oom_kill_with_restart_policy_never_fails_the_pod(node):
    name = create_node_pod(node, Program(oom_after="1s"), containers=("main", "side"))
    wait_for(lambda: phase(name) == "Failed", what=f"{name} OOM-killed")
    status = pod(name)["status"]
    assert "reason" not in status, "an OOM kill is no eviction"
    assert {s["name"] for s in status["containerStatuses"]} == {"main", "side"}
    for container in status["containerStatuses"]:
        assert terminated(container)["exitCode"] == 137
        assert terminated(container)["reason"] == "OOMKilled"
        assert "running" not in container["state"]


def test_oom_kill_with_restart_policy_on_failure_restarts_in_place(node):
    # 5 s between kills: a real container restarted after its first kill is seen running (the
    # kubelet's back-off holds it between the later ones).
    name = create_node_pod(
        node, Program(oom_after="5s"), restart_policy="OnFailure", containers=("main", "side")
    )
    wait_running(name)
    restarted = wait_for(
        lambda: (
            (p := pod(name))
            and all(
                s["restartCount"] >= 1 and "running" in s["state"] for s in p["status"]["containerStatuses"]
            )
            and p
        ),
        what=f"{name} restarted after OOM and running again",
    )
    assert restarted["status"]["phase"] == "Running"
    assert {s["name"] for s in restarted["status"]["containerStatuses"]} == {"main", "side"}
    for container in restarted["status"]["containerStatuses"]:
        last = container["lastState"]["terminated"]
        assert (last["exitCode"], last["reason"]) == (137, "OOMKilled")
        assert "running" in container["state"] and "terminated" not in container["state"]
        assert container["ready"] is True
