"""The apply action plugin against a recording fake client: what it sends, and what it does with
the API server's refusals (transient, invalid, conflict), without a cluster."""

from __future__ import annotations

import copy
import json

import pytest
from test_plan_status import NOW, TF_CHIEF, tfjob
from training_job_apply import _apply, _record_once
from training_jobs.plan import plan
from training_kube.client import ApiError


class RecordingClient:
    """Answers each (method, path prefix) with the first matching rule; records every request."""

    def __init__(self, rules=()):
        self.rules = list(rules)
        self.calls = []

    def request(self, method, path, body=None, content_type="application/json", owner=True, query=None):
        self.calls.append({"method": method, "path": path, "body": copy.deepcopy(body), "owner": owner})
        for rule_method, prefix, status, message in self.rules:
            if rule_method == method and path.startswith(prefix):
                if status >= 400:
                    raise ApiError(status, json.dumps({"message": message}), method, path)
                break
        return {}

    def close(self):
        pass

    def sent(self, method, prefix=""):
        return [c for c in self.calls if c["method"] == method and c["path"].startswith(prefix)]


def first_plan(resource_version="7"):
    job = tfjob(TF_CHIEF)
    job["metadata"]["resourceVersion"] = resource_version
    return plan(job, {}, {}, NOW)


PODS = "/api/v1/namespaces/ns/pods"
STATUS = "/apis/kubeflow.org/v1/namespaces/ns/tfjobs/job/status"


def test_the_status_patch_carries_the_resource_version():
    client = RecordingClient()
    done = _apply(client, first_plan())
    assert done["status_written"] and not done["conflict"]
    (patch,) = client.sent("PATCH", STATUS)
    assert patch["body"]["metadata"] == {"resourceVersion": "7"}


def test_a_conflict_writes_nothing_counts_nothing_and_asks_for_a_fresh_pass():
    client = RecordingClient([("PATCH", STATUS, 409, "the object has been modified")])
    done = _apply(client, first_plan())
    assert done["conflict"] and not done["status_written"]


@pytest.mark.parametrize(
    ("status", "message", "deferred"),
    [
        (403, 'pods "job-worker-0" is forbidden: exceeded quota: q', True),
        (429, "too many requests", True),
        (500, "etcdserver: request timed out", True),
        (422, 'Pod "job-worker-0" is invalid: spec.containers[0].name: Invalid value', False),
        (400, "bad request", False),
    ],
)
def test_refused_creates_are_deferred_or_rejected(status, message, deferred):
    client = RecordingClient([("POST", PODS, status, message)])
    done = _apply(client, first_plan())
    refused = done["deferred"] if deferred else done["rejected"]
    assert len(refused) == 4 and refused[0]["status"] == status
    assert (done["deferred"] == []) is not deferred
    assert client.sent("POST", "/api/v1/namespaces/ns/services"), "the other objects are still created"
    # A rejected pass writes no status: the engine's rejected_plan replaces it.
    assert bool(client.sent("PATCH", STATUS)) is deferred


def test_a_deferred_create_is_recorded_once_under_a_name_derived_from_its_cause():
    client = RecordingClient()
    job = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "name": "job",
        "namespace": "ns",
        "uid": "0123456789ab",
    }
    refusal = {"kind": "Pod", "name": "job-worker-0", "status": 403, "message": "exceeded quota: q"}
    _record_once(client, job, refusal, NOW)
    _record_once(client, job, {**refusal, "name": "job-worker-1"}, NOW)
    names = [c["body"]["metadata"]["name"] for c in client.sent("POST", "/api/v1/namespaces/ns/events")]
    assert names == ["job.failedcreatepod.403.01234567"] * 2, "the API server's 409 keeps it to one"
    event = client.sent("POST")[0]["body"]
    assert (event["type"], event["reason"]) == ("Warning", "FailedCreatePod")
    assert "exceeded quota" in event["message"]


def test_a_status_refused_as_invalid_is_reported_for_the_engine_to_replace():
    client = RecordingClient([("PATCH", STATUS, 422, "status.reportedPodProblems: Too many")])
    done = _apply(client, first_plan())
    assert done["status_refused"] == "status.reportedPodProblems: Too many"
    assert not done["status_written"]


JOB_PATH = "/apis/kubeflow.org/v1/namespaces/ns/tfjobs/job"


def finished_plan(labels=None):
    job = tfjob([("Worker", 1)])
    job["metadata"]["labels"] = labels or {}
    job["status"] = {
        "conditions": [{"type": "Succeeded", "status": "True", "reason": "TFJobSucceeded", "message": ""}],
        "completionTime": NOW,
    }
    return plan(job, {"pods": [], "services": []}, {}, NOW)


def test_a_final_job_is_labelled_so_the_runtime_leaves_it_alone():
    client = RecordingClient()
    _apply(client, finished_plan())
    (label,) = [c for c in client.sent("PATCH", JOB_PATH) if not c["path"].endswith("/status")]
    assert label["body"] == {"metadata": {"labels": {"training.ato.dev/finished": "true"}}}
    labelled = finished_plan({"training.ato.dev/finished": "true"})
    assert not labelled["apply"] and not labelled["final"]


def test_a_final_job_is_not_labelled_when_its_status_was_not_written():
    client = RecordingClient([("PATCH", STATUS, 409, "modified")])
    _apply(client, {**finished_plan(), "status": {"completionTime": NOW}})
    assert [c["path"] for c in client.sent("PATCH")] == [STATUS], "a stale pass labels nothing"


@pytest.mark.parametrize("error", [ApiError(503, "{}", "POST", PODS), ConnectionRefusedError("refused")])
def test_an_unreachable_api_server_is_a_short_planned_retry_not_a_failure(error, monkeypatch):
    import training_job_apply

    class Down(RecordingClient):
        def request(self, *args, **kwargs):
            raise error

    monkeypatch.setattr(training_job_apply, "Client", lambda: Down())
    action = training_job_apply.ActionModule.__new__(training_job_apply.ActionModule)
    monkeypatch.setattr(training_job_apply.ActionBase, "run", lambda *a, **k: {})
    action._task = type("Task", (), {"args": {"plan": first_plan()}})()
    result = action.run()
    assert not result.get("failed") and result["requeue_after"] == "5s"


def test_an_unreadable_job_is_planned_as_a_retry_with_nothing_decided():
    result = plan(tfjob(TF_CHIEF), {"unavailable": "503"}, {}, NOW)
    assert not result["apply"] and result["requeue_after"] == "5s" and result["status"] is None


class OneConflict(RecordingClient):
    """The status write meets one 409; the job read again is ``fresh``."""

    def __init__(self, fresh):
        super().__init__()
        self.fresh = fresh
        self.conflicts = 1

    def request(self, method, path, body=None, content_type="application/json", owner=True, query=None):
        self.calls.append({"method": method, "path": path, "body": copy.deepcopy(body), "owner": owner})
        if method == "PATCH" and path == STATUS and self.conflicts:
            self.conflicts -= 1
            raise ApiError(409, "{}", method, path)
        return self.fresh if method == "GET" else {}


@pytest.mark.parametrize(
    ("fresh_meta", "fresh_status", "written"),
    [
        ({"generation": 1, "resourceVersion": "8"}, None, True),  # only the wake annotation moved
        ({"generation": 2, "resourceVersion": "8"}, None, False),  # the spec changed: plan again
        ({"generation": 1, "resourceVersion": "8"}, {"conditions": []}, False),  # someone wrote status
    ],
)
def test_a_conflict_from_a_metadata_change_is_retried_under_the_new_resource_version(
    fresh_meta, fresh_status, written
):
    job = tfjob(TF_CHIEF)
    job["metadata"].update({"resourceVersion": "7", "generation": 1})
    client = OneConflict({"metadata": fresh_meta, "status": fresh_status})
    done = _apply(client, plan(job, {}, {}, NOW))
    assert done["status_written"] is written and done["conflict"] is not written
    if written:
        assert client.sent("PATCH", STATUS)[-1]["body"]["metadata"] == {"resourceVersion": "8"}


def test_a_patched_object_gets_everything_but_its_metadata_merged():
    """A PodGroup's spec, an MPIJob's ConfigMap data and launcher Role rules alike."""
    plan_ = {
        "job": first_plan()["job"],
        "patch": [
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "job-config", "namespace": "ns", "labels": {"app": "job"}},
                "data": {"hostfile": "job-worker-0 slots=1\n"},
            },
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "Role",
                "metadata": {"name": "job-launcher", "namespace": "ns"},
                "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}],
            },
        ],
    }
    client = RecordingClient()
    _apply(client, plan_)
    assert [(c["path"], c["body"]) for c in client.sent("PATCH")] == [
        ("/api/v1/namespaces/ns/configmaps/job-config", {"data": {"hostfile": "job-worker-0 slots=1\n"}}),
        (
            "/apis/rbac.authorization.k8s.io/v1/namespaces/ns/roles/job-launcher",
            {"rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}]},
        ),
    ]


def test_a_job_gone_before_its_status_is_written_is_no_conflict():
    client = RecordingClient([("PATCH", STATUS, 404, "not found")])
    done = _apply(client, first_plan())
    assert not done["status_written"] and not done["conflict"] and not done["status_refused"]
    assert done["created"]  # what was created stays; the garbage collector takes it with the job


def test_objects_are_created_with_strict_field_validation():
    """A typo in a pod template is refused by the API server, never silently dropped."""
    queries = []

    class Client(RecordingClient):
        def request(self, method, path, body=None, content_type="application/json", owner=True, query=None):
            if method == "POST" and path.startswith(PODS):
                queries.append(query)
            return super().request(method, path, body, content_type, owner, query)

    _apply(Client(), first_plan())
    assert queries and all(q == {"fieldValidation": "Strict"} for q in queries)


def test_events_are_posted_without_the_proxys_owner_identity():
    # With it the runtime's proxy would watch every Event of the cluster, which the role forbids.
    client = RecordingClient()
    _apply(client, first_plan())
    events = client.sent("POST", "/api/v1/namespaces/ns/events")
    assert events and all(call["owner"] is False for call in events)


# --- an idle job: labelled under the resourceVersion this pass leaves it at ------------------
JOB = "/apis/kubeflow.org/v1/namespaces/ns/tfjobs/job"


class VersionedClient(RecordingClient):
    """Answers a status write with the job at resourceVersion 8."""

    def request(self, method, path, body=None, content_type="application/json", owner=True, query=None):
        answer = super().request(method, path, body, content_type, owner, query)
        return {"metadata": {"resourceVersion": "8"}} if path == STATUS else answer


def idle_plan(status=True):
    return {
        "job": {
            "apiVersion": "kubeflow.org/v1",
            "kind": "TFJob",
            "name": "job",
            "namespace": "ns",
            "uid": "u",
            "resourceVersion": "7",
            "generation": 2,
        },
        "status": {"conditions": []} if status else None,
        "idle": "2-abcd",
        "apply": True,
    }


@pytest.mark.parametrize(("status", "version"), [(True, "8"), (False, "7")])
def test_an_idle_job_is_labelled_under_the_version_this_pass_leaves_it_at(status, version):
    client = VersionedClient()
    _apply(client, idle_plan(status))
    (label,) = [c for c in client.sent("PATCH") if c["path"] == JOB]
    assert label["body"] == {
        "metadata": {"resourceVersion": version, "labels": {"training.ato.dev/idle": "2-abcd"}}
    }
    assert label["owner"] is False


def test_a_job_that_changed_meanwhile_is_not_labelled_idle():
    # A wake came between the read and the label: the label write conflicts and is dropped.
    client = VersionedClient([("PATCH", JOB, 409, "the object has been modified")])
    done = _apply(client, idle_plan(status=False))
    assert [c["path"] for c in client.sent("PATCH")] == [JOB]
    assert not done["conflict"], "nothing to plan again: the wake brings the next pass"


def test_a_status_written_only_after_a_conflict_leaves_the_job_watched():
    # The conflict was a wake: the pass it queued must not be dropped by the label.
    job = tfjob(TF_CHIEF)
    job["metadata"].update({"resourceVersion": "7", "generation": 1})

    class VersionedConflict(OneConflict):
        def request(self, method, path, body=None, content_type="application/json", owner=True, query=None):
            answer = super().request(method, path, body, content_type, owner, query)
            return {"metadata": {"resourceVersion": "9"}} if path == STATUS else answer

    client = VersionedConflict({"metadata": {"generation": 1, "resourceVersion": "8"}, "status": None})
    result = {**plan(job, {}, {}, NOW), "create": [], "idle": "1-abcd"}
    done = _apply(client, result)
    assert done["status_written"], "written under the new version"
    assert [c for c in client.sent("PATCH") if c["path"] == JOB] == []
