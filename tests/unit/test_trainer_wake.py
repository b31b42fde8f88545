"""The companion wakes a TrainJob when its JobSet changes (training_wake.jobsets)."""

from __future__ import annotations

import copy
import json

import pytest
from trainer_jobs.observe import NO_JOBSET, WAKE_ANNOTATION, jobset_signature
from training_jobs.idle import IDLE_LABEL, PARKED_BEHIND, idle_value
from training_kube.client import ApiError
from training_wake.jobsets import JobSetIndex, JobSetWatcher, stale_trainjobs, trainjob_of

OWNER = {
    "apiVersion": "trainer.kubeflow.org/v1alpha1",
    "kind": "TrainJob",
    "name": "job",
    "uid": "uid-1",
    "controller": True,
}
RUNNING = {"replicatedJobsStatus": [{"name": "node", "ready": 1, "succeeded": 0, "failed": 0, "active": 1}]}
DONE = {
    "conditions": [{"type": "Completed", "status": "True", "reason": "AllJobsCompleted"}],
    "replicatedJobsStatus": [{"name": "node", "ready": 0, "succeeded": 1, "failed": 0, "active": 0}],
}


def jobset(status=None, owner=OWNER, name="job", rv="1"):
    obj = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": "ns", "uid": "js-uid", "resourceVersion": rv},
        "spec": {},
    }
    if owner is not None:
        obj["metadata"]["ownerReferences"] = [owner]
    if status is not None:
        obj["status"] = copy.deepcopy(status)
    return obj


def trainjob(name="job", annotation=None, finished=False):
    meta = {"name": name, "namespace": "ns", "annotations": {}, "labels": {}}
    if annotation is not None:
        meta["annotations"][WAKE_ANNOTATION] = annotation
    if finished:
        meta["labels"]["training.ato.dev/finished"] = "true"
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": meta}


@pytest.mark.parametrize(
    ("owner", "job"),
    [
        (OWNER, ("ns", "job")),
        ({**OWNER, "controller": False}, None),
        ({**OWNER, "kind": "PyTorchJob", "apiVersion": "kubeflow.org/v1"}, None),
        (None, None),
    ],
)
def test_only_a_trainjobs_own_jobset_is_watched_for_it(owner, job):
    assert trainjob_of(jobset(owner=owner)) == job


def test_the_index_wakes_on_a_changed_signature_and_a_deletion_never_on_a_creation():
    index = JobSetIndex()
    assert index.observe("ADDED", jobset()) is None
    assert index.observe("MODIFIED", jobset(rv="2")) is None, "nothing the pass reads changed"
    assert index.observe("MODIFIED", jobset(RUNNING)) == ("ns", "job")
    assert index.signature_of(("ns", "job")) == jobset_signature(jobset(RUNNING))
    assert index.observe("MODIFIED", jobset(DONE)) == ("ns", "job")
    assert index.observe("DELETED", jobset(DONE)) == ("ns", "job")
    assert index.signature_of(("ns", "job")) == NO_JOBSET
    assert index.observe("MODIFIED", jobset(DONE, owner=None, name="other")) is None


def test_a_full_list_wakes_the_trainjobs_that_missed_a_change():
    index = JobSetIndex()
    index.replace([jobset(DONE), jobset(name="new", owner={**OWNER, "name": "new"})])
    jobs = [
        trainjob(annotation=jobset_signature(jobset(RUNNING))),  # missed its JobSet's completion
        trainjob("new"),  # its JobSet as its pass created it
        trainjob("gone", annotation=jobset_signature(jobset(RUNNING))),  # its JobSet was deleted
        trainjob("fresh"),  # no JobSet, never woken
        trainjob("done", annotation="x", finished=True),  # finished: the runtime leaves it alone
    ]
    assert stale_trainjobs(index, jobs, after_error=False) == {
        ("ns", "job"): jobset_signature(jobset(DONE)),
        ("ns", "gone"): NO_JOBSET,
    }
    # After a watch error the runtime may hold a TrainJob without a JobSet in its backoff: once.
    after = stale_trainjobs(index, jobs, after_error=True)
    assert after[("ns", "fresh")] == NO_JOBSET
    assert ("ns", "fresh") not in stale_trainjobs(index, [trainjob("fresh", annotation=NO_JOBSET)], True)


class FakeClient:
    def __init__(self, jobsets, trainjobs, events=(), refuse=None):
        self.jobsets, self.trainjobs, self.events = jobsets, trainjobs, list(events)
        self.refuse = refuse
        self.patches = []

    def request(self, method, path, body=None, content_type="application/json", owner=True, query=None):
        if method == "PATCH":
            if self.refuse:
                raise ApiError(self.refuse, json.dumps({"message": "no"}), method, path)
            self.patches.append((path, body, content_type))
            return {}
        items = self.jobsets if "/jobsets" in path else self.trainjobs
        return {"items": items, "metadata": {"resourceVersion": "10"}}

    def stream(self, path, query, timeout):
        assert query["watch"] == "true" and "labelSelector" not in query
        for event in self.events:
            yield json.dumps(event).encode()


def run_once(watcher):
    """One list and one watch request, then a flush."""
    jobsets, rv = watcher._list("jobset.x-k8s.io/v1alpha2", "JobSet", "")
    watcher._catch_up("", jobsets, after_error=False)
    watcher._follow("", "/apis/jobset.x-k8s.io/v1alpha2/jobsets", rv, 5)
    return watcher.flush()


def test_the_watcher_writes_the_signature_into_the_trainjobs_annotation():
    events = [
        {"type": "MODIFIED", "object": jobset(RUNNING, rv="11")},
        {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "12"}}},
        {"type": "MODIFIED", "object": jobset(DONE, rv="13")},
    ]
    client = FakeClient([jobset()], [trainjob()], events)
    assert run_once(JobSetWatcher(client)) == 1, "changes between two flushes cost one write"
    ((path, body, content_type),) = client.patches
    assert path == "/apis/trainer.kubeflow.org/v1alpha1/namespaces/ns/trainjobs/job"
    # The same write brings a TrainJob labelled idle back to the runtime's watch.
    assert body == {
        "metadata": {
            "annotations": {WAKE_ANNOTATION: jobset_signature(jobset(DONE))},
            "labels": {IDLE_LABEL: None},
        }
    }
    assert content_type == "application/merge-patch+json"


def test_nothing_changing_costs_no_write():
    sig = jobset_signature(jobset(RUNNING))
    client = FakeClient([jobset(RUNNING)], [trainjob(annotation=sig)], [])
    assert run_once(JobSetWatcher(client)) == 0
    assert client.patches == []


def test_a_refused_wake_is_tried_again_at_the_next_flush():
    client = FakeClient(
        [jobset()], [trainjob()], [{"type": "DELETED", "object": jobset(RUNNING)}], refuse=503
    )
    watcher = JobSetWatcher(client)
    assert run_once(watcher) == 0
    assert watcher.dirty == {("ns", "job"): NO_JOBSET}
    client.refuse = None
    assert watcher.flush() == 1


def test_a_trainjob_that_is_gone_is_not_retried():
    client = FakeClient(
        [jobset()], [trainjob()], [{"type": "DELETED", "object": jobset(RUNNING)}], refuse=404
    )
    watcher = JobSetWatcher(client)
    run_once(watcher)
    assert watcher.dirty == {}


def test_a_watch_error_event_restarts_from_a_list():
    error = {"type": "ERROR", "object": {"code": 410, "message": "too old resource version"}}
    client = FakeClient([jobset()], [trainjob()], [error])
    watcher = JobSetWatcher(client)
    with pytest.raises(ApiError) as raised:
        watcher._follow("", "/apis/jobset.x-k8s.io/v1alpha2/jobsets", "1", 5)
    assert raised.value.status == 410


def idle_trainjob(planned_with, generation=3, labelled_at=None):
    """A TrainJob labelled idle by a pass that read a JobSet of signature ``planned_with``, at
    ``generation`` (or as ``labelled_at`` was, for one edited since)."""
    tj = trainjob(annotation=planned_with)
    tj["metadata"]["generation"] = generation
    tj["metadata"]["labels"][IDLE_LABEL] = idle_value(labelled_at or tj, planned_with)
    return tj


def listed(watcher, jobsets, trainjobs):
    watcher.client.jobsets, watcher.client.trainjobs = jobsets, trainjobs
    watcher._catch_up("", jobsets, after_error=False)


def test_an_idle_trainjob_whose_pass_read_the_jobset_the_watcher_knows_costs_nothing():
    watcher = JobSetWatcher(FakeClient([], []))
    listed(watcher, [jobset(RUNNING)], [idle_trainjob(jobset_signature(jobset(RUNNING)))])
    watcher._on_idle(idle_trainjob(jobset_signature(jobset(RUNNING))))
    assert watcher.flush() == 0 and watcher.client.patches == []


def test_an_idle_trainjob_whose_pass_read_an_older_jobset_is_woken_once():
    older, now = jobset_signature(jobset(RUNNING)), jobset_signature(jobset(DONE))
    watcher = JobSetWatcher(FakeClient([], []))
    listed(watcher, [jobset(DONE)], [])
    watcher._on_idle(idle_trainjob(older))
    assert watcher.flush() == 1
    ((path, body, _),) = watcher.client.patches
    assert path.endswith("/trainjobs/job")
    assert body["metadata"]["labels"] == {IDLE_LABEL: None}
    assert body["metadata"]["annotations"][WAKE_ANNOTATION] == now
    assert body["metadata"]["annotations"][PARKED_BEHIND].startswith(idle_value(idle_trainjob(older), older))
    # The pass that reads the same old JobSet again is not woken in a loop.
    watcher._on_idle(idle_trainjob(older))
    assert watcher.flush() == 0


def test_an_idle_trainjob_edited_since_its_label_is_brought_back_at_once():
    sig = jobset_signature(jobset(RUNNING))
    watcher = JobSetWatcher(FakeClient([], []))
    listed(watcher, [jobset(RUNNING)], [])
    watcher._on_idle(idle_trainjob(sig, generation=4, labelled_at=idle_trainjob(sig)))  # e.g. Kueue's suspend
    ((path, body, _),) = watcher.client.patches
    assert path.endswith("/trainjobs/job") and body["metadata"]["labels"] == {IDLE_LABEL: None}
    assert body["metadata"]["annotations"], "an annotation change: the runtime reconciles on it"


def test_a_list_checks_the_trainjobs_labelled_idle_while_nobody_watched():
    older = jobset_signature(jobset(RUNNING))
    watcher = JobSetWatcher(FakeClient([], []))
    # Its annotation is the JobSet's signature (no stale wake), its label the older one's.
    tj = idle_trainjob(older)
    tj["metadata"]["annotations"][WAKE_ANNOTATION] = jobset_signature(jobset(DONE))
    listed(watcher, [jobset(DONE)], [tj])
    assert watcher.flush() == 1
    assert PARKED_BEHIND in watcher.client.patches[0][1]["metadata"]["annotations"]
