"""Gang scheduling with scheduler-plugins' coscheduling, against an operator started with
GANG_SCHEDULER_NAME=scheduler-plugins-scheduler and scheduler-plugins' real scheduler (a profile of
that name with Coscheduling) and controller, v0.33.5, built from their module and run on the host
by hack/gang-schedulers.sh with their own CRDs: hack/test.sh e2e runs this stage with them. Unlike
Volcano, coscheduling admits a gang in the scheduler: the operator creates the pods at once, and
the scheduler holds them at its Permit step until minMember of them fit."""

from __future__ import annotations

import json

import pytest
from kube import IMAGE, get, job_pods, kubectl, namespace_fixture, wait_for

pytestmark = pytest.mark.gang_plugins

NS = "ato-gang-plugins"
SCHEDULER = "scheduler-plugins-scheduler"
PG = "podgroup.scheduling.x-k8s.io"
# A scheduling gate on the Workers' template: a gated pod never reaches the scheduler, so the
# gang's other pods wait at Coscheduling's Permit for it until the test opens the gate.
GATE = "ato.test/gang-gate"


def scheduler_runs() -> None:
    if kubectl("get", "crd", "podgroups.scheduling.x-k8s.io", check=False).returncode != 0:
        raise RuntimeError("scheduler-plugins is not installed: hack/gang-schedulers.sh plugins up starts it")


namespace = namespace_fixture(NS, before=scheduler_runs)


def tfjob(name: str, policy: dict, gated_workers: bool = False) -> str:
    def template(rtype: str) -> dict:
        container = {
            "name": "tensorflow",
            "image": IMAGE,
            "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}},
        }
        spec: dict = {"containers": [container]}
        if gated_workers and rtype == "Worker":
            spec["schedulingGates"] = [{"name": GATE}]
        return {"spec": spec}

    job = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "runPolicy": {"schedulingPolicy": policy},
            "tfReplicaSpecs": {
                r: {"replicas": n, "template": template(r)} for r, n in (("PS", 1), ("Worker", 2))
            },
        },
    }
    kubectl("apply", "-f", "-", stdin=json.dumps(job))
    return name


def pod_group(name: str) -> dict | None:
    found = kubectl("get", PG, "-n", NS, name, "-o", "json", check=False)
    return json.loads(found.stdout) if found.returncode == 0 else None


def running_pods(job: str, count: int) -> list[dict]:
    pods = job_pods(NS, job)
    ok = len(pods) == count and all(p["status"].get("phase") == "Running" for p in pods)
    return pods if ok else []


def pod_events(pod: str, reason: str) -> list[str]:
    events = get("events", "-n", NS, "--field-selector", f"involvedObject.kind=Pod,involvedObject.name={pod}")
    return [e["message"] for e in events["items"] if e["reason"] == reason]


def delete_job(name: str) -> None:
    kubectl("delete", "tfjob", "-n", NS, name, "--wait=false", check=False)
    wait_for(lambda: pod_group(name) is None, what=f"the PodGroup of {name} garbage-collected with its job")


def test_pod_group_is_what_training_operator_computes_and_the_gang_runs():
    tfjob("coscheduled", {"minAvailable": 2, "scheduleTimeoutSeconds": 120})
    pg = wait_for(lambda: pod_group("coscheduled"), what="the scheduler-plugins PodGroup")
    assert pg["spec"]["minMember"] == 2, "schedulingPolicy.minAvailable wins over the replica count"
    assert pg["spec"]["scheduleTimeoutSeconds"] == 120
    # Upstream's calcPGMinResources: the requests of the first minMember pods, not of all three.
    assert pg["spec"]["minResources"] == {"cpu": "1", "memory": "2Gi"}
    assert pg["metadata"]["ownerReferences"][0]["name"] == "coscheduled"
    created = wait_for(lambda: running_pods("coscheduled", 3), what="three pods bound and running")
    for p in created:
        assert p["spec"]["schedulerName"] == SCHEDULER
        assert p["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] == "coscheduled"
        assert pod_events(p["metadata"]["name"], "Scheduled"), "bound by the coscheduling scheduler"
    # scheduler-plugins' controller keeps the PodGroup's status from its pods.
    wait_for(
        lambda: (pod_group("coscheduled").get("status") or {}).get("phase") == "Running", what="phase Running"
    )
    delete_job("coscheduled")


def test_no_pod_binds_until_min_member_fit_and_the_timeout_is_the_pod_groups():
    """The PS fits but waits at Permit for its gated Workers; after the PodGroup's
    scheduleTimeoutSeconds (3 s, not the scheduler's default 10 s) Coscheduling rejects it. Once
    the gates open, all three bind."""
    tfjob("gated", {"scheduleTimeoutSeconds": 3}, gated_workers=True)
    ps = "gated-ps-0"

    def timed_out():
        # The pod's PodScheduled condition carries the scheduler's latest verdict. Its events do
        # not: the scheduler's recorder folds later FailedScheduling events of a pod into the first
        # one's series (a PS created before its siblings is first refused for want of them).
        found = kubectl("get", "pod", "-n", NS, ps, "-o", "json", check=False)
        pod = json.loads(found.stdout) if found.returncode == 0 else {"status": {}}
        scheduled = [c for c in pod["status"].get("conditions") or [] if c["type"] == "PodScheduled"]
        return [c["message"] for c in scheduled if "timeout" in c.get("message", "")]

    messages = wait_for(timed_out, what="Coscheduling rejecting the waiting PS after the PodGroup's timeout")
    assert "timeout after waiting 3s at plugin Coscheduling" in messages[0], messages
    pods = job_pods(NS, "gated")
    assert len(pods) == 3 and [p["spec"].get("nodeName") for p in pods] == [None] * 3, "none binds alone"
    for p in pods:
        if p["spec"].get("schedulingGates"):
            kubectl("patch", "pod", "-n", NS, p["metadata"]["name"], "--type=json",
                    "-p", '[{"op": "remove", "path": "/spec/schedulingGates"}]')  # fmt: skip
    wait_for(lambda: running_pods("gated", 3), what="the whole gang bound once minMember fit")
    delete_job("gated")
