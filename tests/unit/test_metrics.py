"""Job counters: what a reconcile pass counts, and how the counters are parsed and served."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest
from test_plan_status import LATER, NOW, TF_CHIEF, created, failed, ok, tfjob, with_phases
from training_jobs.plan import plan, rejected_plan
from training_metrics import counters as metrics
from training_metrics.report import observation, report
from training_metrics.server import make_handler

LATE = "2026-11-23T10:05:00Z"


def next_pass(job, phases, now=LATER, **spec):
    """The job created and running, then one pass with its pods in ``phases``."""
    job, observed = created(tfjob(job, **spec))
    return plan(job, {**observed, "pods": with_phases(observed["pods"], phases)}, {}, now)


@pytest.mark.parametrize(
    ("name", "result", "expected"),
    [
        (
            "first pass creates",
            lambda: plan(tfjob(TF_CHIEF), {"pods": [], "services": []}, {}, NOW),
            {"created": 1},
        ),
        ("running pods count nothing", lambda: next_pass(TF_CHIEF, {}), {}),
        ("success", lambda: next_pass(TF_CHIEF, {"job-chief-0": ok()}), {"successful": 1}),
        (
            "permanent exit code fails",
            lambda: next_pass([("Chief", 1, "ExitCode")], {"job-chief-0": failed(1)}),
            {"failed": 1},
        ),
        (
            "retryable exit code restarts one pod",
            lambda: next_pass([("Chief", 1), ("Worker", 2, "ExitCode")], {"job-worker-0": failed(130)}),
            {"restarted": 1},
        ),
        (
            "two pods restarted in one pass",
            lambda: next_pass(
                [("Chief", 1), ("Worker", 2, "OnFailure")],
                {"job-worker-0": failed(1), "job-worker-1": failed(2)},
            ),
            {"restarted": 2},
        ),
        (
            "no restart counted when the same pass finishes the job",
            lambda: next_pass(
                [("Chief", 1), ("Worker", 1, "OnFailure")], {"job-chief-0": ok(), "job-worker-0": failed(1)}
            ),
            {"successful": 1},
        ),
        (
            "deadline fails",
            lambda: next_pass(TF_CHIEF, {}, LATE, runPolicy={"activeDeadlineSeconds": 60}),
            {"failed": 1},
        ),
        (
            "invalid spec: created and failed at once",
            lambda: plan(tfjob([("Worker", 1)], runPolicy={"backoffLimit": -1}), {}, {}, NOW),
            {"created": 1, "failed": 1},
        ),
    ],
)
def test_counts_per_pass(name, result, expected):
    assert result()["metrics"] == expected, name


def test_finished_job_counts_nothing_again_and_ttl_counts_the_deletion():
    job, observed = created(tfjob(TF_CHIEF, runPolicy={"ttlSecondsAfterFinished": 60}))
    observed = {**observed, "pods": with_phases(observed["pods"], {"job-chief-0": ok()})}
    done = plan(job, observed, {}, LATER)
    assert done["metrics"] == {"successful": 1}
    job["status"] = done["status"]
    assert plan(job, observed, {}, "2026-11-23T10:01:00Z")["metrics"] == {}
    assert plan(job, observed, {}, LATE)["metrics"] == {"deleted": 1}


def test_rejected_job_counts_created_and_failed():
    job = tfjob(TF_CHIEF)
    first = plan(job, {"pods": [], "services": []}, {}, NOW)
    rejected = [{"kind": "Pod", "name": "job-ps-0", "status": 422, "message": "bad"}]
    assert rejected_plan(job, first, rejected, NOW)["metrics"] == {"created": 1, "failed": 1}


def test_plan_names_the_framework_label():
    assert plan(tfjob(TF_CHIEF), {}, {}, NOW)["job"]["framework"] == "tensorflow"


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ([], "JSON object"),
        (
            {"framework": "tensorflow", "kind": "TFJob", "group": "kubeflow.org", "counts": {"created": 1}},
            "namespace",
        ),
        (
            {
                "namespace": "ns",
                "framework": "",
                "kind": "TFJob",
                "group": "kubeflow.org",
                "counts": {"created": 1},
            },
            "framework",
        ),
        (
            {
                "namespace": "ns",
                "framework": "tensorflow",
                "kind": "TFJob",
                "group": "kubeflow.org",
                "counts": {},
            },
            "counts",
        ),
        (
            {
                "namespace": "ns",
                "framework": "tensorflow",
                "kind": "TFJob",
                "group": "kubeflow.org",
                "counts": {"exploded": 1},
            },
            "unknown counter",
        ),
        (
            {
                "namespace": "ns",
                "framework": "tensorflow",
                "kind": "TFJob",
                "group": "kubeflow.org",
                "counts": {"created": -1},
            },
            "non-negative",
        ),
        (
            {
                "namespace": "ns",
                "framework": "tensorflow",
                "kind": "TFJob",
                "group": "kubeflow.org",
                "counts": {"created": True},
            },
            "non-negative",
        ),
    ],
)
def test_bad_observations_are_refused(body, error):
    with pytest.raises(metrics.ObservationError, match=error):
        metrics.parse_observation(body)


def test_render_uses_training_operator_names_labels_and_escaping():
    c = metrics.Counters()
    job = {"namespace": "team-a", "kind": "TFJob", "apiVersion": "kubeflow.org/v1", "framework": "tensorflow"}
    c.add(*metrics.parse_observation(observation(job, {"created": 1, "restarted": 2})))
    c.add(*metrics.parse_observation(observation(job, {"created": 1})))
    c.add(('we"ird\\ns', "mxnet", "MXJob", "kubeflow.org"), {"failed": 1})
    text = c.render()
    assert (
        'training_operator_jobs_created_total{job_namespace="team-a",framework="tensorflow",kind="TFJob",group="kubeflow.org"} 2'
        in text
    )
    assert (
        'training_operator_jobs_restarted_total{job_namespace="team-a",framework="tensorflow",kind="TFJob",group="kubeflow.org"} 2'
        in text
    )
    assert (
        'training_operator_jobs_failed_total{job_namespace="we\\"ird\\\\ns",framework="mxnet",kind="MXJob",group="kubeflow.org"} 1'
        in text
    )
    for name in ("created", "successful", "failed", "restarted", "deleted"):
        assert f"# TYPE training_operator_jobs_{name}_total counter" in text


@pytest.fixture
def server():
    import threading
    from http.server import ThreadingHTTPServer

    c = metrics.Counters()
    srv = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(c))
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield c, f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def test_report_reaches_the_server_and_is_served(server):
    c, base = server
    job = {
        "namespace": "ns",
        "kind": "PaddleJob",
        "apiVersion": "batch.paddlepaddle.org/v1",
        "framework": "paddle",
    }
    assert report(job, {"successful": 1}, url=base + "/observe") == ""
    assert c.value("successful", ("ns", "paddle", "PaddleJob", "batch.paddlepaddle.org")) == 1
    with urllib.request.urlopen(base + "/metrics") as resp:
        assert (
            'training_operator_jobs_successful_total{job_namespace="ns",framework="paddle",kind="PaddleJob",group="batch.paddlepaddle.org"} 1'
            in resp.read().decode()
        )


def test_server_answers_bad_observations_with_400(server):
    _, base = server
    req = urllib.request.Request(base + "/observe", data=json.dumps({"counts": 1}).encode(), method="POST")
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(req)
    assert err.value.code == 400


def test_report_without_a_server_is_a_warning_not_an_error():
    warning = report(
        {"namespace": "ns", "kind": "TFJob", "apiVersion": "kubeflow.org/v1"},
        {"created": 1},
        url="http://127.0.0.1:9/observe",
    )
    assert warning.startswith("job metrics not recorded")
    assert (
        report(
            {"namespace": "ns", "kind": "TFJob", "apiVersion": "kubeflow.org/v1"},
            {},
            url="http://127.0.0.1:9/observe",
        )
        == ""
    )
