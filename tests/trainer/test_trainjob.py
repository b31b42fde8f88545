"""TrainJobs on the built-in runtimes, on a real JobSet: JobSet v0.12.0's manager (hack/jobset.sh)
makes the Jobs, the control plane's Job controller their pods, KWOK runs them. What is checked is
what upstream's Trainer v2.3.0 does (its env names and values, its conditions and reasons, its
``jobsStatus``) and where this operator does better (a finished TrainJob's JobSet is never built
again; a runtime that does not exist fails the TrainJob instead of an endless retry).

Run by ``hack/test.sh`` (``trainer_tests``: JobSet and the operator started, ``pytest -m trainer``).
"""

from __future__ import annotations

import json
import time
from functools import partial

import pytest
import trainjobs
from kube import get, kubectl, namespace_fixture, reconcile_finished, wait_for

pytestmark = pytest.mark.trainer

NS = "ato-trainer"
namespace = namespace_fixture(NS)
RANK = {"fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}
FINISHED = "training.ato.dev/finished"
create_trainjob = partial(trainjobs.create, NS)
trainjob = partial(trainjobs.trainjob, NS)
jobset = partial(trainjobs.jobset, NS)
pods = partial(trainjobs.pods, NS)
running = partial(trainjobs.running, NS)
finish = partial(trainjobs.finish, NS)


def condition(tj: dict, ctype: str) -> dict | None:
    return next((c for c in (tj.get("status") or {}).get("conditions") or [] if c["type"] == ctype), None)


def has_condition(name: str, ctype: str, status: str = "True", reason: str | None = None):
    def check():
        c = condition(trainjob(name), ctype)
        return c is not None and c["status"] == status and (reason is None or c["reason"] == reason)

    wait_for(check, what=f"TrainJob {name}: {ctype}={status} {reason or ''}")


def rjob(js: dict, name: str) -> dict:
    return next(r for r in js["spec"]["replicatedJobs"] if r["name"] == name)


def node_container(js: dict, job: str = "node") -> dict:
    spec = rjob(js, job)["template"]["spec"]["template"]["spec"]
    return next(c for c in spec["containers"] if c["name"] == "node")


def env(container: dict) -> dict:
    """Name -> value (or valueFrom), without the fieldRef apiVersion the API server adds to pods."""
    found = {}
    for e in container.get("env") or []:
        value = e.get("value", e.get("valueFrom"))
        if isinstance(value, dict) and value.get("fieldRef", {}).get("apiVersion") == "v1":
            value = {"fieldRef": {k: v for k, v in value["fieldRef"].items() if k != "apiVersion"}}
        found[e["name"]] = value
    return found


@pytest.fixture(scope="module")
def missing_runtime(namespace):
    """Created first: its grace period (30 s) runs while the other tests do."""
    create_trainjob("no-runtime", "no-such-runtime", {})
    return "no-runtime"


def test_a_trainjob_whose_runtime_does_not_exist_is_warned_first(missing_runtime):
    def warned():
        events = get("events", "-n", NS, "--field-selector", f"involvedObject.name={missing_runtime}")[
            "items"
        ]
        return [
            e for e in events if e["reason"] == "TrainJobResourcesCreationFailed" and e["type"] == "Warning"
        ]

    (event, *_) = wait_for(warned, what="a Warning while the runtime may still come")
    assert 'clustertrainingruntimes.trainer.kubeflow.org "no-such-runtime" not found' in event["message"]
    assert jobset(missing_runtime) is None


IMAGE = "docker.io/library/busybox:1.36"
# What upstream's plugins put into container node of the trainer's job, for a TrainJob named <n>.
CASES = {
    "torch": (
        "torch-distributed",
        {"numNodes": 2, "image": IMAGE, "command": ["torchrun", "train.py"], "env": [{"name": "EPOCHS", "value": "3"}],
         "resourcesPerNode": {"requests": {"cpu": "2"}}},
        lambda n: {"EPOCHS": "3", "PET_NNODES": "2", "PET_NPROC_PER_NODE": "2", "PET_NODE_RANK": RANK,
                   "PET_MASTER_ADDR": f"{n}-node-0-0.{n}", "PET_MASTER_PORT": "29500"},
    ),
    "jax": (
        "jax-distributed",
        {"numNodes": 2},
        lambda n: {"JAX_NUM_PROCESSES": "2", "JAX_PROCESS_ID": RANK, "JAX_COORDINATOR_ADDRESS": f"{n}-node-0-0.{n}:29500"},
    ),
    "xgboost": (
        "xgboost-distributed",
        {"numNodes": 2},
        lambda n: {"DMLC_TRACKER_URI": f"{n}-node-0-0.{n}", "DMLC_TRACKER_PORT": "29500", "DMLC_TASK_ID": RANK,
                   "DMLC_NUM_WORKER": "2"},
    ),
}  # fmt: skip
DONE_JOB = {"ready": 0, "succeeded": 1, "failed": 0, "active": 0, "suspended": 0}


def check_jobset(name: str, trainer: dict) -> dict:
    js = wait_for(lambda: jobset(name, "--show-managed-fields"), what=f"JobSet {name}")
    (owner,) = js["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["controller"], owner["blockOwnerDeletion"]) == (
        "TrainJob", name, True, True,
    )  # fmt: skip
    assert owner["uid"] == trainjob(name)["metadata"]["uid"]
    assert "trainer" in {m["manager"] for m in js["metadata"]["managedFields"] if m["operation"] == "Apply"}
    node = rjob(js, "node")
    assert node["replicas"] == 1
    job_spec = node["template"]["spec"]
    assert job_spec["parallelism"] == job_spec["completions"] == trainer["numNodes"]
    assert js["spec"].get("suspend") is not True
    return js


def check_events(name: str, *reasons: str) -> None:
    def seen():
        events = get("events", "-n", NS, "--field-selector", f"involvedObject.name={name}")["items"]
        got = {e["reason"] for e in events if e["involvedObject"]["kind"] == "TrainJob"}
        return set(reasons) <= got

    wait_for(seen, what=f"events {reasons} on TrainJob {name}")


def check_complete(name: str) -> dict:
    has_condition(name, "Complete", reason="AllJobsCompleted")
    wait_for(
        lambda: FINISHED in (trainjob(name)["metadata"].get("labels") or {}), what=f"{name} labelled finished"
    )
    tj, js = trainjob(name), jobset(name)
    completed = next(c for c in js["status"]["conditions"] if c["type"] == "Completed")
    assert condition(tj, "Complete")["message"] == completed["message"]
    assert tj["status"]["jobsStatus"] == js["status"]["replicatedJobsStatus"], "jobsStatus is the JobSet's"
    assert [c["type"] for c in tj["status"]["conditions"]] == ["Complete"], "no condition upstream lacks"
    return tj


@pytest.mark.parametrize("framework", sorted(CASES))
def test_a_trainjob_runs_on_its_jobset_as_upstream_renders_it(framework):
    name = f"{framework}-job"
    runtime, trainer, expected = CASES[framework]
    create_trainjob(name, runtime, trainer)
    js = check_jobset(name, trainer)
    container = node_container(js)
    assert env(container) == expected(name)
    assert {"containerPort": 29500, "protocol": "TCP"} in container["ports"]
    if "image" in trainer:
        assert (container["image"], container["command"]) == (trainer["image"], trainer["command"])
    started = running(name, trainer["numNodes"])
    for pod in started:
        (pod_node,) = [c for c in pod["spec"]["containers"] if c["name"] == "node"]
        # The Job controller adds JOB_COMPLETION_INDEX to an Indexed Job's pods.
        pod_env = {k: v for k, v in env(pod_node).items() if k != "JOB_COMPLETION_INDEX"}
        assert pod_env == expected(name), "the pods run with the JobSet's env"
    assert trainjob(name).get("status", {}).get("conditions") is None, "the SDK reads Running"
    finish(name)
    tj = check_complete(name)
    assert tj["status"]["jobsStatus"] == [{"name": "node", **DONE_JOB}]
    check_events(name, "SuccessfulCreateJobSet", "AllJobsCompleted")


def test_an_mpi_trainjob_gets_its_ssh_keys_hostfile_and_launcher():
    name = "mpi-job"
    create_trainjob(name, "deepspeed-distributed", {"numNodes": 2})
    js = check_jobset(name, {"numNodes": 1})  # the launcher is the second node
    assert rjob(js, "launcher")["template"]["spec"]["parallelism"] == 1
    assert env(node_container(js, "launcher")) == {
        "OMPI_MCA_orte_default_hostfile": "/etc/mpi/hostfile",
        "OMPI_MCA_orte_keep_fqdn_hostnames": "true",
        "OMPI_MCA_orte_set_default_slots": "1",
        "OMPI_MCA_plm_rsh_args": "-o ConnectionAttempts=10",
    }
    hostfile = get("configmap", "-n", NS, f"{name}-mpi-hostfile")["data"]["hostfile"]
    assert hostfile == f"{name}-node-0-0.{name} slots=1\n{name}-launcher-0-0.{name} slots=1\n"
    secret = get("secret", "-n", NS, f"{name}-mpi-ssh-auth")
    assert secret["type"] == "kubernetes.io/ssh-auth" and secret["immutable"] is True
    assert set(secret["data"]) == {"ssh-privatekey", "ssh-publickey"}
    running(name, 1, "node")
    running(name, 1, "launcher")  # after the node is Ready (dependsOn)
    finish(name, "launcher")
    tj = check_complete(name)
    launcher = next(j for j in tj["status"]["jobsStatus"] if j["name"] == "launcher")
    assert launcher == {"name": "launcher", **DONE_JOB}
    assert get("secret", "-n", NS, f"{name}-mpi-ssh-auth")["data"] == secret["data"], "created once"


def suspend(name: str, value: bool) -> None:
    patch = json.dumps({"spec": {"suspend": value}})
    kubectl("patch", "trainjobs.trainer.kubeflow.org", "-n", NS, name, "--type=merge", "-p", patch)


def jobset_suspended(name: str, value: bool) -> None:
    wait_for(
        lambda: (js := jobset(name)) is not None and (js["spec"].get("suspend") is True) is value,
        what=f"JobSet {name} suspend={value}",
    )


def test_a_trainjob_created_suspended_runs_once_resumed():
    name = "suspended-job"
    create_trainjob(name, "xgboost-distributed", {"numNodes": 1}, suspend=True)
    has_condition(name, "Suspended", reason="Suspended")
    jobset_suspended(name, True)
    time.sleep(3)  # what a suspended JobSet would have started by now
    assert pods(name) == []
    assert condition(trainjob(name), "Suspended")["message"] == "TrainJob is suspended"
    suspend(name, False)
    jobset_suspended(name, False)
    has_condition(name, "Suspended", "False", "Resumed")
    running(name, 1)
    finish(name)
    has_condition(name, "Complete", reason="AllJobsCompleted")
    tj = trainjob(name)
    assert [(c["type"], c["status"], c["reason"]) for c in tj["status"]["conditions"]] == [
        ("Suspended", "False", "Resumed"),
        ("Complete", "True", "AllJobsCompleted"),
    ]
    check_events(name, "Suspended", "Resumed")


def test_a_running_trainjob_suspended_stops_its_pods_and_resumes():
    name = "pause-job"
    create_trainjob(name, "jax-distributed", {"numNodes": 2})
    running(name, 2)
    suspend(name, True)
    jobset_suspended(name, True)
    has_condition(name, "Suspended", reason="Suspended")
    wait_for(lambda: pods(name) == [], what=f"{name}'s pods gone while suspended")
    suspended_node = {"name": "node", "ready": 0, "succeeded": 0, "failed": 0, "active": 0, "suspended": 1}
    wait_for(
        lambda: trainjob(name)["status"].get("jobsStatus") == [suspended_node],
        what=f"{name}'s jobsStatus: its Job suspended",
    )
    assert jobset(name)["status"]["replicatedJobsStatus"] == [suspended_node]
    suspend(name, False)
    has_condition(name, "Suspended", "False", "Resumed")
    running(name, 2)
    finish(name)
    check_events(name, "Suspended", "Resumed")
    has_condition(name, "Complete", reason="AllJobsCompleted")


IDLE = "training.ato.dev/idle"


def labels(name: str) -> dict:
    return trainjob(name)["metadata"].get("labels") or {}


def test_a_steady_trainjob_is_left_idle_and_still_moves():
    """A running TrainJob whose JobSet has nothing new is labelled idle, out of the runtime's
    watch (an operator restart costs it no pass): an edit brings it back (a suspend, as Kueue's
    preemption; the resume), and so does its JobSet's completion (the companion's wake)."""
    name = "idle-job"
    create_trainjob(name, "torch-distributed", {"numNodes": 2})
    running(name, 2)
    wait_for(lambda: IDLE in labels(name), what=f"{name} labelled idle while it runs")
    suspend(name, True)
    has_condition(name, "Suspended", reason="Suspended")
    wait_for(lambda: pods(name) == [], what=f"{name}'s pods gone while suspended")
    suspend(name, False)
    has_condition(name, "Suspended", "False", "Resumed")
    running(name, 2)
    wait_for(lambda: IDLE in labels(name), what=f"{name} idle again")
    finish(name)
    has_condition(name, "Complete", reason="AllJobsCompleted")
    wait_for(lambda: FINISHED in labels(name), what=f"{name} labelled finished")
    assert IDLE not in labels(name)


def test_a_finished_trainjob_whose_jobset_is_deleted_gets_no_new_one():
    name = "done-job"
    create_trainjob(name, "torch-distributed", {"numNodes": 1})
    running(name, 1)
    finish(name)
    before = check_complete(name)
    old_uid = jobset(name)["metadata"]["uid"]
    kubectl("delete", "jobsets.jobset.x-k8s.io", "-n", NS, name, "--wait=true")
    # Upstream builds the JobSet again, which trains again (trainer#3779). Here a pass runs and
    # leaves the TrainJob as it was.
    reconcile_finished("trainjobs.trainer.kubeflow.org", NS, name)
    after = trainjob(name)
    assert jobset(name) is None, f"a new JobSet (the old one was {old_uid})"
    assert after["status"] == before["status"]


def test_a_trainjob_whose_runtime_does_not_exist_fails(missing_runtime):
    has_condition(missing_runtime, "Failed", reason="TrainingRuntimeNotFound")
    failed = condition(trainjob(missing_runtime), "Failed")
    assert failed["message"] == (
        "not found ClusterTrainingRuntime specified in TrainJob: "
        'clustertrainingruntimes.trainer.kubeflow.org "no-such-runtime" not found'
    )
    assert jobset(missing_runtime) is None
    wait_for(
        lambda: FINISHED in (trainjob(missing_runtime)["metadata"].get("labels") or {}),
        what="the failed TrainJob labelled finished",
    )
