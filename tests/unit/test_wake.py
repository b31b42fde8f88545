"""The wake watcher's decisions: which pod changes wake a job, and the signature written."""

from __future__ import annotations

import copy

import pytest
from training_wake.signature import ANNOTATION, PodIndex, job_of, pod_state, signature

OWNER = {"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "name": "mnist", "controller": True, "uid": "u"}
JOB = ("kubeflow.org/v1", "TFJob", "team", "mnist")


def pod(name="mnist-worker-0", phase="Pending", restarts=0, waiting=None, unschedulable=False, owner=OWNER):
    status = {"phase": phase}
    if restarts or waiting:
        state = {"waiting": {"reason": waiting}} if waiting else {"running": {}}
        status["containerStatuses"] = [{"name": "tensorflow", "restartCount": restarts, "state": state}]
    if unschedulable:
        status["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]
    meta = {"name": name, "namespace": "team", "ownerReferences": [owner] if owner else []}
    return {"metadata": meta, "status": status}


@pytest.mark.parametrize(
    ("owner", "expected"),
    [
        (OWNER, JOB),
        ({**OWNER, "controller": False}, None),
        ({**OWNER, "kind": "Job", "apiVersion": "batch/v1"}, None),
        (
            {**OWNER, "apiVersion": "batch.paddlepaddle.org/v1", "kind": "PaddleJob"},
            ("batch.paddlepaddle.org/v1", "PaddleJob", "team", "mnist"),
        ),
        (None, None),
    ],
)
def test_job_of_follows_the_controller_reference_of_our_kinds(owner, expected):
    assert job_of(pod(owner=owner)) == expected


@pytest.mark.parametrize(
    ("p", "state"),
    [
        (pod(), ("Pending", 0, ())),
        (pod(phase="Running", restarts=2), ("Running", 2, ())),
        (pod(waiting="ContainerCreating"), ("Pending", 0, ())),
        (pod(waiting="ImagePullBackOff"), ("Pending", 0, ("ImagePullBackOff",))),
        (pod(unschedulable=True), ("Pending", 0, ("Unschedulable",))),
        (
            {
                **pod(phase="Running"),
                "metadata": {**pod()["metadata"], "deletionTimestamp": "2026-11-23T10:00:00Z"},
            },
            ("Running", 0, ("Terminating",)),
        ),
    ],
)
def test_pod_state(p, state):
    assert pod_state(p) == state


def test_signature_is_stable_and_short():
    states = [
        ("Running", 1, ()),
        ("Succeeded", 0, ()),
        ("Running", 0, ()),
        ("Pending", 0, ("Unschedulable",)),
    ]
    assert signature(states) == "Pending=1,Running=2,Succeeded=1,Unschedulable=1,restarts=1"
    assert signature(list(reversed(states))) == signature(states)


@pytest.mark.parametrize(
    ("events", "woken"),
    [
        # created by the reconcile itself: nobody needs waking
        ([("ADDED", pod())], [None]),
        # a phase change of a known pod wakes its job; the same state again does not
        (
            [("ADDED", pod()), ("MODIFIED", pod(phase="Running")), ("MODIFIED", pod(phase="Running"))],
            [None, JOB, None],
        ),
        # an in-place container restart (backoffLimit counts it) and a new problem wake it
        ([("ADDED", pod(phase="Running")), ("MODIFIED", pod(phase="Running", restarts=1))], [None, JOB]),
        ([("ADDED", pod()), ("MODIFIED", pod(unschedulable=True))], [None, JOB]),
        # deletions already trigger the runtime's own watch
        ([("ADDED", pod()), ("DELETED", pod())], [None, None]),
        # a MODIFIED for a pod never seen (the watch started late) records it without waking
        ([("MODIFIED", pod(phase="Running"))], [None]),
        # pods of other controllers are ignored
        ([("ADDED", pod(owner=None)), ("MODIFIED", pod(owner=None, phase="Running"))], [None, None]),
    ],
)
def test_which_events_wake_the_job(events, woken):
    index = PodIndex()
    assert [index.observe(t, copy.deepcopy(p)) for t, p in events] == woken


def test_index_signature_and_forgetting_jobs():
    index = PodIndex()
    index.reset([pod("a", "Running"), pod("b", "Running")])
    assert index.signature_of(JOB) == "Running=2"
    index.observe("MODIFIED", pod("a", "Succeeded"))
    assert index.signature_of(JOB) == "Running=1,Succeeded=1"
    index.observe("DELETED", pod("a"))
    index.observe("DELETED", pod("b"))
    assert JOB not in index.pods and index.signature_of(JOB) == ""


def test_annotation_is_skipped_when_a_job_is_copied_to_its_pod_group():
    from training_jobs.gang import SKIPPED_ANNOTATIONS

    assert ANNOTATION in SKIPPED_ANNOTATIONS


@pytest.mark.parametrize("kind", ["TFJob", "MXJob", "PaddleJob", "Caffe2Job"])
def test_every_kind_has_its_pods_watched(kind):
    """The watcher selects pods by each profile's wake_label: every pod a profile creates must
    carry it, or that kind's jobs would only move at the safety-net poll."""
    from test_plan_status import caffe2job, created, mxjob, paddlejob, tfjob
    from training_jobs.registry import PROFILES
    from training_wake.signature import JOB_KINDS, POD_SELECTORS

    job = {
        "TFJob": lambda: tfjob([("Worker", 2)]),
        "MXJob": lambda: mxjob([("Scheduler", 1), ("Server", 1), ("Worker", 1)]),
        "PaddleJob": lambda: paddlejob([("worker", 2)]),
        "Caffe2Job": lambda: caffe2job(2),
    }[kind]()
    _, observed = created(job)
    profile = PROFILES[kind]
    assert observed["pods"], kind
    for p in observed["pods"]:
        assert profile.wake_label in p["metadata"]["labels"]
        assert job_of(p) is not None
    assert profile.wake_label in POD_SELECTORS
    assert (profile.api_version, kind) in JOB_KINDS
