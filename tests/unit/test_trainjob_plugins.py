"""The TrainJob's Ansible steps: the filters, the observe and apply action plugins, against a
recording client (the same client class, its HTTP layer replaced)."""

from __future__ import annotations

import base64
import copy
import json

import pytest
import trainjob_apply
import trainjob_observe
import yaml
from trainer_jobs import snapshot
from trainer_jobs.observe import WAKE_ANNOTATION, jobset_signature, reads
from trainer_jobs.plan import plan
from trainer_runtimes import NOW, deepspeed_distributed, torch_distributed, trainjob
from training_kube.client import ApiError, Client
from trainjob import trainjob_observe_args, trainjob_plan

NS = "/apis/trainer.kubeflow.org/v1alpha1/namespaces/ns"
JOBSET = "/apis/jobset.x-k8s.io/v1alpha2/namespaces/ns/jobsets/job"
SECRETS = "/api/v1/namespaces/ns/secrets"
EVENTS = "/api/v1/namespaces/ns/events"


class RecordingClient(Client):
    """Answers (method, path) from ``answers`` (a status, or an object for a GET); 404 for a GET
    of anything else; records every request."""

    def __init__(self, answers=None):
        self.answers = dict(answers or {})
        self.calls = []

    def send(self, method, path, body=None, content_type="application/json", owner=True, query=None):
        self.calls.append(
            {
                "method": method,
                "path": path,
                "body": copy.deepcopy(body),
                "type": content_type,
                "query": query,
            }
        )
        answer = self.answers.get((method, path), 404 if method == "GET" else 200)
        if isinstance(answer, int):
            if answer >= 400:
                raise ApiError(answer, json.dumps({"message": f"answer {answer}"}), method, path)
            return answer, {}
        return 200, copy.deepcopy(answer)

    def close(self):
        pass

    def sent(self, method, prefix=""):
        return [c for c in self.calls if c["method"] == method and c["path"].startswith(prefix)]


@pytest.fixture(autouse=True)
def no_metrics_server(monkeypatch):
    reported = []
    monkeypatch.setattr(trainjob_apply, "report", lambda job, counts: reported.append(counts) or "")
    return reported


def mpi_first_plan():
    return plan(trainjob("deepspeed-distributed", trainer={}), deepspeed_distributed(), {}, {}, NOW)


def test_objects_are_server_side_applied_as_trainer_and_the_ssh_secret_created_with_keys(no_metrics_server):
    p = mpi_first_plan()
    client = RecordingClient({("PATCH", JOBSET): 201})
    done = trainjob_apply.apply(client, p)
    applied = client.sent("PATCH")
    assert {c["type"] for c in applied} == {"application/apply-patch+yaml"}
    assert {json.dumps(c["query"], sort_keys=True) for c in applied} == {
        json.dumps({"fieldManager": "trainer", "force": "true", "fieldValidation": "Strict"}, sort_keys=True)
    }
    assert [c["body"]["kind"] for c in applied] == ["ConfigMap", "ConfigMap", "JobSet"]
    (secret,) = client.sent("POST", SECRETS)
    assert secret["body"]["metadata"]["name"] == "job-mpi-ssh-auth"
    private = base64.b64decode(secret["body"]["data"]["ssh-privatekey"]).decode()
    public = base64.b64decode(secret["body"]["data"]["ssh-publickey"]).decode()
    assert private.startswith("-----BEGIN EC PRIVATE KEY-----")
    assert public.startswith("ecdsa-sha2-nistp521 ") and public.endswith("\n")
    assert done["created"] == ["Secret/job-mpi-ssh-auth", "JobSet/job"]
    reasons = [c["body"]["reason"] for c in client.sent("POST", EVENTS)]
    assert reasons == ["SuccessfulCreateSecret", "SuccessfulCreateJobSet"], "only what was created here"
    assert no_metrics_server == [{"created": 1}]


def test_an_ssh_secret_that_exists_is_left_alone():
    client = RecordingClient({("POST", SECRETS): 409})
    done = trainjob_apply.apply(client, mpi_first_plan())
    assert "Secret/job-mpi-ssh-auth" not in done["created"] and done["refused"] == []


def test_each_pass_has_its_own_key_pair():
    assert trainjob_apply.ssh_key_pair()[0] != trainjob_apply.ssh_key_pair()[0]


def completed():
    tj, rt = trainjob(trainer={}), torch_distributed()
    first = plan(tj, rt, {}, {}, NOW)
    jobset = copy.deepcopy(next(o for o in first["create"] if o["kind"] == "JobSet"))
    jobset["status"] = {
        "conditions": [
            {
                "type": "Completed",
                "status": "True",
                "reason": "AllJobsCompleted",
                "message": "jobset completed successfully",
                "lastTransitionTime": NOW,
            }
        ]
    }
    configmaps = [snapshot.config_map(tj, rt)]
    return plan(tj, rt, {"jobsets": [jobset], "configmaps": configmaps}, {}, NOW)


def test_a_finished_trainjob_gets_its_status_then_the_finished_label(no_metrics_server):
    client = RecordingClient()
    done = trainjob_apply.apply(client, completed())
    status, label = client.sent("PATCH", f"{NS}/trainjobs/job")
    assert status["path"].endswith("/status") and status["body"]["metadata"] == {"resourceVersion": "10"}
    assert status["body"]["status"]["conditions"][0]["type"] == "Complete"
    assert label["body"] == {"metadata": {"labels": {"training.ato.dev/finished": "true"}}}
    assert done["status_written"] and done["requeue_after"] == ""
    assert no_metrics_server == [{"successful": 1}]


def test_a_status_conflict_labels_nothing_and_plans_again(no_metrics_server):
    client = RecordingClient({("PATCH", f"{NS}/trainjobs/job/status"): 409})
    done = trainjob_apply.apply(client, completed())
    assert len(client.sent("PATCH", f"{NS}/trainjobs/job")) == 1, "no label"
    assert done["requeue_after"] == "1s" and no_metrics_server == [{}]


def idle_plan(**changes):
    return {
        "apply": True,
        "job": {**trainjob_apply_job(), "resourceVersion": "10"},
        "create": [],
        "patch": [],
        "delete": [],
        "status": None,
        "events": [],
        "idle": "3-abcd-ef01",
        **changes,
    }


def trainjob_apply_job():
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "namespace": "ns",
        "name": "job",
    }


def test_a_steady_trainjob_is_labelled_idle_under_the_version_it_was_read_at():
    client = RecordingClient()
    trainjob_apply.apply(client, idle_plan())
    (label,) = client.sent("PATCH", f"{NS}/trainjobs/job")
    assert label["body"] == {
        "metadata": {"labels": {"training.ato.dev/idle": "3-abcd-ef01"}, "resourceVersion": "10"}
    }


def test_the_idle_label_follows_the_status_write_under_its_version():
    status_path = f"{NS}/trainjobs/job/status"
    client = RecordingClient({("PATCH", status_path): {"metadata": {"resourceVersion": "11"}}})
    trainjob_apply.apply(client, idle_plan(status={"jobsStatus": []}))
    status, label = client.sent("PATCH", f"{NS}/trainjobs/job")
    assert status["path"] == status_path and label["body"]["metadata"]["resourceVersion"] == "11"


@pytest.mark.parametrize(
    ("answers", "changes"),
    [
        ({("PATCH", f"{NS}/trainjobs/job/status"): 409}, {"status": {"jobsStatus": []}}),
        (
            {("PATCH", "/api/v1/namespaces/ns/configmaps/c"): 201},
            {
                "create": [
                    {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "ns"}}
                ]
            },
        ),
    ],
    ids=["the status write conflicted", "an object was created"],
)
def test_a_pass_that_changed_something_labels_nothing(answers, changes):
    client = RecordingClient(answers)
    trainjob_apply.apply(client, idle_plan(**changes))
    labels = [c for c in client.sent("PATCH", f"{NS}/trainjobs/job") if not c["path"].endswith("/status")]
    assert labels == []


def test_a_trainjob_changed_since_its_read_is_not_labelled_idle():
    client = RecordingClient({("PATCH", f"{NS}/trainjobs/job"): 409})
    done = trainjob_apply.apply(client, idle_plan())
    assert done["requeue_after"] == "" and not done["status_written"]


def test_a_refused_object_is_reported_once_per_cause_and_retried():
    p = plan(trainjob(trainer={}), torch_distributed(), {}, {}, NOW)
    client = RecordingClient({("PATCH", JOBSET): 422})
    done = trainjob_apply.apply(client, p)
    assert done["refused"][0]["kind"] == "JobSet" and done["requeue_after"] == "10s"
    events = [c["body"] for c in client.sent("POST", EVENTS)]
    (warning,) = [e for e in events if e["type"] == "Warning"]
    assert warning["reason"] == "FailedCreateJobSet"
    assert warning["metadata"]["name"] == "job.failedcreatejobset.422.uid-1"
    assert "SuccessfulCreateJobSet" not in [e["reason"] for e in events]


def test_an_unavailable_api_server_is_raised_for_a_retry():
    p = plan(trainjob(trainer={}), torch_distributed(), {}, {}, NOW)
    with pytest.raises(ApiError):
        trainjob_apply.apply(RecordingClient({("PATCH", JOBSET): 503}), p)


RUNTIME = "/apis/trainer.kubeflow.org/v1alpha1/clustertrainingruntimes/deepspeed-distributed"
SNAPSHOT = "/api/v1/namespaces/ns/configmaps/job-runtime-snapshot"
HOSTFILE = "/api/v1/namespaces/ns/configmaps/job-mpi-hostfile"


def test_observe_reads_the_runtime_what_it_adds_and_the_jobset():
    tj, rt = trainjob("deepspeed-distributed", trainer={}), deepspeed_distributed()
    client = RecordingClient(
        {("GET", RUNTIME): rt, ("GET", HOSTFILE): {"metadata": {"name": "job-mpi-hostfile"}}}
    )
    objects = trainjob_observe.observe(client, reads(tj))
    assert [c["path"] for c in client.calls] == [RUNTIME, SNAPSHOT, HOSTFILE, JOBSET]
    assert objects["runtime"]["metadata"]["name"] == "deepspeed-distributed"
    assert [o["kind"] for o in objects["configmaps"]] == ["ConfigMap"]
    assert objects["jobsets"] == [] and objects["runtime_snapshot"] is None


def test_observe_hands_over_an_upstream_yaml_snapshot():
    tj, rt = trainjob("deepspeed-distributed", trainer={}), deepspeed_distributed()
    cm = snapshot.config_map(tj, rt)
    cm["data"]["runtime"] = yaml.safe_dump(json.loads(cm["data"]["runtime"]))
    client = RecordingClient({("GET", SNAPSHOT): cm})
    objects = trainjob_observe.observe(client, reads(tj))
    assert objects["runtime_snapshot"]["kind"] == "ClusterTrainingRuntime"
    assert HOSTFILE in [c["path"] for c in client.calls], "the snapshot's runtime says MPI"


@pytest.mark.parametrize(("direct_status", "read"), [(2, "direct"), (None, "cached"), (0, "cached")])
def test_a_jobset_behind_the_last_wake_is_read_past_the_cache(monkeypatch, direct_status, read):
    cached = {"metadata": {"name": "job", "uid": "u"}, "spec": {}}
    direct = copy.deepcopy(cached) | {"status": {"conditions": [{"type": "Completed", "status": "True"}]}}
    tj = trainjob(trainer={})
    tj["metadata"]["annotations"] = {WAKE_ANNOTATION: jobset_signature(direct)}
    api_server = RecordingClient({("GET", JOBSET): direct if direct_status else 503})
    monkeypatch.setattr(
        Client, "past_proxy", classmethod(lambda cls: api_server if direct_status is not None else None)
    )
    objects = trainjob_observe.observe(RecordingClient({("GET", JOBSET): cached}), reads(tj))
    assert objects["jobsets"][0] == {
        **(direct if read == "direct" else cached),
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
    }


def test_the_filters_plan_from_what_observe_returns():
    tj = trainjob(trainer={})
    assert trainjob_observe_args(tj) == reads(tj)
    p = trainjob_plan(tj, {"runtime": torch_distributed(), "jobsets": [], "configmaps": []}, {}, NOW)
    assert [o["kind"] for o in p["create"]] == ["ConfigMap", "JobSet"]
    assert trainjob_plan(tj, {"unavailable": "connection refused"}, {}, NOW) == {
        "apply": False,
        "requeue_after": "5s",
        "job": {},
    }
