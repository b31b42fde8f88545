"""What a TrainJob's pass reads (trainer_jobs.observe) and the JobSet signature that wakes it."""

from __future__ import annotations

import copy

import pytest
from trainer_jobs.observe import (
    NO_JOBSET,
    WAKE_ANNOTATION,
    behind_wake,
    jobset_signature,
    reads,
    runtime_reads,
)
from trainer_runtimes import deepspeed_distributed, torch_distributed, trainjob

JOBSET_READ = {
    "key": "jobsets",
    "apiVersion": "jobset.x-k8s.io/v1alpha2",
    "kind": "JobSet",
    "name": "job",
    "namespace": "ns",
}


@pytest.mark.parametrize(
    ("ref", "runtime"),
    [
        (
            {"kind": "ClusterTrainingRuntime", "apiGroup": "trainer.kubeflow.org"},
            {"kind": "ClusterTrainingRuntime", "namespace": None},
        ),
        (
            {"kind": "TrainingRuntime", "apiGroup": "trainer.kubeflow.org"},
            {"kind": "TrainingRuntime", "namespace": "ns"},
        ),
        ({"kind": "Deployment", "apiGroup": "apps"}, None),
        ({"kind": "TrainingRuntime", "apiGroup": "example.com"}, None),
    ],
)
def test_reads_name_the_runtime_of_the_ref_and_the_objects_named_after_the_trainjob(ref, runtime):
    job = trainjob()
    job["spec"]["runtimeRef"] |= ref
    got = reads(job)
    if runtime is None:
        assert got["runtime"] is None
    else:
        expected = {
            "key": "runtime",
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "name": "torch-distributed",
        }
        assert got["runtime"] == expected | runtime
    assert got["snapshot"]["name"] == "job-runtime-snapshot"
    assert got["objects"] == [JOBSET_READ]
    assert got["wake"] is None


def test_reads_carry_the_last_wake():
    job = trainjob()
    job["metadata"]["annotations"] = {WAKE_ANNOTATION: "abc running [] []"}
    assert reads(job)["wake"] == "abc running [] []"


def _gang(runtime, policy):
    runtime = copy.deepcopy(runtime)
    runtime["spec"]["podGroupPolicy"] = policy
    return runtime


@pytest.mark.parametrize(
    ("runtimes", "expected"),
    [
        ([None, None], []),
        ([torch_distributed(), None], []),
        ([deepspeed_distributed(), None], [("configmaps", "ConfigMap", "job-mpi-hostfile")]),
        ([None, deepspeed_distributed()], [("configmaps", "ConfigMap", "job-mpi-hostfile")]),
        ([_gang(torch_distributed(), {"coscheduling": {}}), None], [("podgroups", "PodGroup", "job")]),
        (
            [_gang(torch_distributed(), {"volcano": {}}), _gang(torch_distributed(), {"coscheduling": {}})],
            [("podgroups", "PodGroup", "job"), ("podgroups", "PodGroup", "job")],
        ),
    ],
)
def test_runtime_reads_follow_the_live_runtime_and_the_snapshots(runtimes, expected):
    got = runtime_reads(reads(trainjob()), runtimes)
    assert [(r["key"], r["kind"], r["name"]) for r in got] == expected
    assert all(r["namespace"] == "ns" for r in got)
    apis = {r["apiVersion"] for r in got if r["kind"] == "PodGroup"}
    assert len(apis) == len([r for r in got if r["kind"] == "PodGroup"]), "one read per scheduler"


def jobset(status=None, suspend=False, uid="0123456789"):
    obj = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "job", "namespace": "ns", "uid": uid, "resourceVersion": "5"},
        "spec": {"suspend": suspend},
    }
    if status is not None:
        obj["status"] = status
    return obj


RUNNING = {
    "replicatedJobsStatus": [
        {"name": "node", "ready": 2, "succeeded": 0, "failed": 0, "active": 2, "suspended": 0}
    ]
}
DONE = {
    "conditions": [
        {"type": "Completed", "status": "True", "reason": "AllJobsCompleted", "message": "jobset completed"}
    ],
    "replicatedJobsStatus": [
        {"name": "node", "ready": 0, "succeeded": 2, "failed": 0, "active": 0, "suspended": 0}
    ],
}


def test_the_signature_says_what_the_pass_reads():
    assert jobset_signature(None) == NO_JOBSET
    assert jobset_signature(jobset()) == "01234567 running [] []"
    assert jobset_signature(jobset(RUNNING)) == "01234567 running [] [node:2/0/0/2/0]"
    assert (
        jobset_signature(jobset(DONE))
        == "01234567 running [Completed=True:AllJobsCompleted] [node:0/2/0/0/0]"
    )
    assert jobset_signature(jobset(suspend=True)).startswith("01234567 suspended")


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (jobset(RUNNING), jobset(DONE)),
        (jobset(), jobset(suspend=True)),
        (jobset(DONE), jobset(DONE, uid="fedcba9876")),
        (jobset(RUNNING), None),
    ],
)
def test_what_the_pass_reads_changes_the_signature(a, b):
    assert jobset_signature(a) != jobset_signature(b)


def test_what_the_pass_does_not_read_leaves_the_signature():
    moved = jobset(DONE)
    moved["metadata"]["resourceVersion"] = "99"
    moved["status"]["conditions"][0]["lastTransitionTime"] = "2026-11-30T10:00:00Z"
    moved["status"]["restarts"] = 0
    assert jobset_signature(moved) == jobset_signature(jobset(DONE))


@pytest.mark.parametrize(
    ("wake", "read", "behind"),
    [
        (None, jobset(RUNNING), False),
        (jobset_signature(jobset(DONE)), jobset(DONE), False),
        (jobset_signature(jobset(DONE)), jobset(RUNNING), True),
        (NO_JOBSET, None, False),
        (NO_JOBSET, jobset(RUNNING), True),
        (jobset_signature(jobset(RUNNING)), None, True),
    ],
)
def test_a_jobset_is_behind_the_wake_when_its_signature_is_not_the_wakes(wake, read, behind):
    job = trainjob()
    if wake is not None:
        job["metadata"]["annotations"] = {WAKE_ANNOTATION: wake}
    assert behind_wake(reads(job), read) is behind
