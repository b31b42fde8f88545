"""The status rules of the reconcile engine, as a scenario table.

Rows come from training-operator's own tables (``pkg/controller.v1/tensorflow/status_test.go``,
``job_test.go``: cleanPodPolicy, activeDeadlineSeconds, backoffLimit, TTL, suspend), the
restart-policy matrix of the historic tf-operator e2e tests, mxnet-operator and paddle-operator
status code, caffe2-operator's termination policy, and the seeds' semantics. Where upstream has
a known bug (both Succeeded and Failed True; MXJob Succeeded when only workers finished,
mxnet-operator#38) the row asserts the fixed behaviour.

Each row: a job, the phase (and exit code) of some of its pods, and the expected current state
(the last condition, what the ``State`` column shows).
"""

from __future__ import annotations

import copy

import pytest
from training_jobs import conditions as cond
from training_jobs.plan import plan

NOW = "2026-11-23T10:00:00Z"
LATER = "2026-11-23T10:00:30Z"


def container(name):
    return {"name": name, "image": "busybox"}


def rspec(name, replicas=1, policy=None):
    spec = {"replicas": replicas, "template": {"spec": {"containers": [container(name)]}}}
    if policy:
        spec["restartPolicy"] = policy
    return spec


def tfjob(types, **spec):
    specs = {}
    for t, replicas, *policy in types:
        specs[t] = rspec("tensorflow", replicas, policy[0] if policy else None)
    return cr("kubeflow.org/v1", "TFJob", {"tfReplicaSpecs": specs, **spec})


def mxjob(types, **spec):
    specs = {}
    for t, replicas, *policy in types:
        specs[t] = rspec("mxnet", replicas, policy[0] if policy else None)
    return cr("kubeflow.org/v1", "MXJob", {"mxReplicaSpecs": specs, **spec})


def paddlejob(types, **spec):
    specs = {}
    for t, replicas, *policy in types:
        specs[t] = rspec("paddle", replicas, policy[0] if policy else None)
    return cr("batch.paddlepaddle.org/v1", "PaddleJob", {**specs, "intranet": "Service", **spec})


def caffe2job(replicas, **spec):
    return cr(
        "kubeflow.org/v1alpha1",
        "Caffe2Job",
        {
            "replicaSpecs": rspec("caffe2", replicas),
            "backendSpecs": {"backendType": "redis", "redisHost": "r"},
            **spec,
        },
    )


def cr(api_version, kind, spec, name="job"):
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {"name": name, "namespace": "ns", "uid": "uid-1", "creationTimestamp": NOW},
        "spec": spec,
    }


def with_phases(pods, phases):
    """Set phase/exit code of the named pods; other pods stay Running."""
    assert set(phases) <= {p["metadata"]["name"] for p in pods}, f"no such pods: {sorted(phases)}"
    out = []
    for p in pods:
        p = copy.deepcopy(p)
        name = p["metadata"]["name"]
        ph, code, deleting = phases.get(name, ("Running", None, False))
        p["status"] = {"phase": ph}
        if code is not None:
            p["status"]["containerStatuses"] = [
                {"name": c["name"], "state": {"terminated": {"exitCode": code}}, "restartCount": 0}
                for c in p["spec"]["containers"]
            ]
        if deleting:
            p["metadata"]["deletionTimestamp"] = NOW
        out.append(p)
    return out


def created(job):
    """Run passes until the engine creates nothing more: the job's objects as it wants them."""
    job = copy.deepcopy(job)
    observed = {"pods": [], "services": [], "configmaps": []}
    for _ in range(3):
        result = plan(job, observed, {}, NOW)
        if result["status"] is not None:
            job["status"] = result["status"]
        if not result["create"]:
            break
        for obj in result["create"]:
            observed.setdefault(obj["kind"].lower() + "s", []).append(obj)
    return job, observed


def run(job, phases, now=LATER):
    """Create the job's objects, then plan with its pods in the given phases."""
    job, observed = created(job)
    observed = {**observed, "pods": with_phases(observed["pods"], phases)}
    return plan(job, observed, {}, now)


def ok(code=0):
    return ("Succeeded", code, False)


def failed(code=1):
    return ("Failed", code, False)


def pending():
    return ("Pending", None, False)


def lost():
    return ("Running", None, True)


TF_CHIEF = [("Chief", 1), ("PS", 1), ("Worker", 2)]
TF_WORKERS = [("PS", 1), ("Worker", 4)]

ROWS = [
    # --- TFJob (training-operator status_test.go and UpdateJobStatus) ---
    ("tf chief succeeded", tfjob(TF_CHIEF), {"job-chief-0": ok()}, cond.SUCCEEDED),
    ("tf chief running, workers running", tfjob(TF_CHIEF), {}, cond.RUNNING),
    ("tf chief running, a PS failed", tfjob(TF_CHIEF), {"job-ps-0": failed()}, cond.FAILED),
    ("tf chief running, a worker failed (Never)", tfjob(TF_CHIEF), {"job-worker-1": failed()}, cond.FAILED),
    ("tf master succeeded", tfjob([("Master", 1), ("Worker", 1)]), {"job-master-0": ok()}, cond.SUCCEEDED),
    ("tf no chief: worker-0 succeeded, 3 active", tfjob(TF_WORKERS), {"job-worker-0": ok()}, cond.SUCCEEDED),
    (
        "tf AllWorkers: worker-0 succeeded, 3 active",
        tfjob(TF_WORKERS, successPolicy="AllWorkers"),
        {"job-worker-0": ok()},
        cond.RUNNING,
    ),
    (
        "tf AllWorkers: all workers succeeded",
        tfjob(TF_WORKERS, successPolicy="AllWorkers"),
        {f"job-worker-{i}": ok() for i in range(4)},
        cond.SUCCEEDED,
    ),
    (
        "tf AllWorkers: worker-0 succeeded, one failed",
        tfjob(TF_WORKERS, successPolicy="AllWorkers"),
        {"job-worker-0": ok(), "job-worker-3": failed()},
        cond.FAILED,
    ),
    (
        "tf no chief: worker-1 succeeded, worker-0 running",
        tfjob(TF_WORKERS),
        {"job-worker-1": ok()},
        cond.RUNNING,
    ),
    (
        "tf worker-0 exited 0 but phase Failed is not success",
        tfjob(TF_WORKERS),
        {"job-worker-0": failed(0)},
        cond.FAILED,
    ),
    (
        "tf chief failed and restarting (OnFailure)",
        tfjob([("Chief", 1, "OnFailure"), ("Worker", 1)]),
        {"job-chief-0": failed()},
        cond.RESTARTING,
    ),
    (
        "tf chief failed (Never)",
        tfjob([("Chief", 1, "Never"), ("Worker", 1)]),
        {"job-chief-0": failed()},
        cond.FAILED,
    ),
    (
        "tf worker ExitCode 1 is permanent",
        tfjob([("Chief", 1), ("Worker", 2, "ExitCode")]),
        {"job-worker-0": failed(1)},
        cond.FAILED,
    ),
    (
        "tf worker ExitCode 137 is retryable",
        tfjob([("Chief", 1), ("Worker", 2, "ExitCode")]),
        {"job-worker-0": failed(137)},
        cond.RESTARTING,
    ),
    (
        "tf worker ExitCode 130 is retryable",
        tfjob([("Chief", 1), ("Worker", 2, "ExitCode")]),
        {"job-worker-1": failed(130)},
        cond.RESTARTING,
    ),
    (
        "tf worker Always + exit 1 restarts",
        tfjob([("Chief", 1), ("Worker", 2, "Always")]),
        {"job-worker-0": failed(1)},
        cond.RESTARTING,
    ),
    (
        "tf evaluator failed (Never) fails the job",
        tfjob([("Chief", 1), ("Evaluator", 1)]),
        {"job-evaluator-0": failed()},
        cond.FAILED,
    ),
    (
        "tf dynamic workers: a failed worker is ignored",
        tfjob(TF_CHIEF, enableDynamicWorker=True),
        {"job-worker-1": failed()},
        cond.RUNNING,
    ),
    (
        "tf pods pending: still Created",
        tfjob(TF_CHIEF),
        {n: pending() for n in ("job-chief-0",)},
        cond.CREATED,
    ),
    # Upstream counted it failed and failed the job (#2072): here it is a replica being replaced.
    ("tf chief on a lost node does not fail the job", tfjob(TF_CHIEF), {"job-chief-0": lost()}, cond.CREATED),
    (
        "tf chief succeeded while a worker failed: Succeeded only",
        tfjob(TF_CHIEF),
        {"job-chief-0": ok(), "job-worker-0": failed()},
        cond.SUCCEEDED,
    ),
    ("tf single worker succeeded", tfjob([("Worker", 1)]), {"job-worker-0": ok()}, cond.SUCCEEDED),
    # --- MXJob (training-operator v1.8 mxjob_controller.go; mx-operator scheduler semantics) ---
    (
        "mx scheduler succeeded",
        mxjob([("Scheduler", 1), ("Server", 1), ("Worker", 2)]),
        {"job-scheduler-0": ok()},
        cond.SUCCEEDED,
    ),
    (
        "mx all workers succeeded, scheduler running: not yet (mxnet-operator#38)",
        mxjob([("Scheduler", 1), ("Server", 1), ("Worker", 2)]),
        {"job-worker-0": ok(), "job-worker-1": ok()},
        cond.RUNNING,
    ),
    (
        "mx worker failed (Never)",
        mxjob([("Scheduler", 1), ("Server", 1), ("Worker", 2)]),
        {"job-worker-1": failed()},
        cond.FAILED,
    ),
    (
        "mx scheduler ExitCode 137 is retryable",
        mxjob([("Scheduler", 1, "ExitCode"), ("Server", 1), ("Worker", 1)]),
        {"job-scheduler-0": failed(137)},
        cond.RESTARTING,
    ),
    (
        "mx scheduler ExitCode 2 is permanent",
        mxjob([("Scheduler", 1, "ExitCode"), ("Server", 1), ("Worker", 1)]),
        {"job-scheduler-0": failed(2)},
        cond.FAILED,
    ),
    (
        "mx server OnFailure restarts",
        mxjob([("Scheduler", 1), ("Server", 1, "OnFailure"), ("Worker", 1)]),
        {"job-server-0": failed()},
        cond.RESTARTING,
    ),
    ("mx single worker succeeded", mxjob([("Worker", 1)]), {"job-worker-0": ok()}, cond.SUCCEEDED),
    (
        "mx tune: tuner succeeded",
        mxjob([("TunerTracker", 1), ("TunerServer", 1), ("Tuner", 1)], jobMode="MXTune"),
        {"job-tuner-0": ok()},
        cond.SUCCEEDED,
    ),
    # --- PaddleJob (paddle-operator getPaddleJobPhase) ---
    (
        "paddle all ps and workers succeeded",
        paddlejob([("ps", 1), ("worker", 2)]),
        {"job-ps-0": ok(), "job-worker-0": ok(), "job-worker-1": ok()},
        cond.SUCCEEDED,
    ),
    (
        "paddle workers succeeded, ps running",
        paddlejob([("ps", 1), ("worker", 2)]),
        {"job-worker-0": ok(), "job-worker-1": ok()},
        cond.RUNNING,
    ),
    (
        "paddle worker failed (Never)",
        paddlejob([("ps", 1, "Never"), ("worker", 2, "Never")]),
        {"job-worker-0": failed()},
        cond.FAILED,
    ),
    (
        "paddle worker failed (OnFailure) restarts",
        paddlejob([("worker", 2, "OnFailure")]),
        {"job-worker-1": failed()},
        cond.RESTARTING,
    ),
    ("paddle collective running", paddlejob([("worker", 2)]), {}, cond.RUNNING),
    # --- Caffe2Job (terminationPolicy chief / all workers) ---
    ("caffe2 chief worker-0 succeeded", caffe2job(2), {"job-worker-0": ok()}, cond.SUCCEEDED),
    (
        "caffe2 allWorkers: worker-0 succeeded, worker-1 running",
        caffe2job(2, terminationPolicy={"allWorkers": True}),
        {"job-worker-0": ok()},
        cond.RUNNING,
    ),
    (
        "caffe2 allWorkers: all succeeded",
        caffe2job(2, terminationPolicy={"allWorkers": True}),
        {"job-worker-0": ok(), "job-worker-1": ok()},
        cond.SUCCEEDED,
    ),
    (
        "caffe2 chief is worker-1",
        caffe2job(2, terminationPolicy={"chief": {"replicaName": "worker", "replicaIndex": 1}}),
        {"job-worker-1": ok()},
        cond.SUCCEEDED,
    ),
    ("caffe2 a worker failed", caffe2job(2), {"job-worker-1": failed()}, cond.FAILED),
    ("caffe2 running", caffe2job(2), {}, cond.RUNNING),
]


@pytest.mark.parametrize(("name", "job", "phases", "expected"), ROWS, ids=[r[0] for r in ROWS])
def test_status_rules(name, job, phases, expected):
    result = run(job, phases)
    conditions = result["status"]["conditions"]
    assert cond.current_state(conditions) == expected, conditions
    # Never both: the engine's fix of upstream's Succeeded+Failed pass.
    assert not (cond.is_true(conditions, cond.SUCCEEDED) and cond.is_true(conditions, cond.FAILED))
    if expected in (cond.SUCCEEDED, cond.FAILED):
        assert result["status"]["completionTime"] == LATER
        assert result["requeue_after"] == "", "a finished job without TTL is not polled"
        assert result["final"], "and nothing is pending: it is labelled and left alone"
    else:
        assert not result["final"]
        # Only a pod being recreated (2 s) or being deleted (when its grace ends) asks to look again.
        assert result["requeue_after"] in ("", "1s", "2s")


def test_state_reaches_the_printer_column_last():
    result = run(tfjob(TF_CHIEF), {"job-chief-0": ok()})
    types = [c["type"] for c in result["status"]["conditions"]]
    assert types[0] == cond.CREATED and types[-1] == cond.SUCCEEDED


def test_failed_pods_under_restarting_policy_are_deleted_and_counted():
    result = run(tfjob([("Chief", 1), ("Worker", 2, "OnFailure")]), {"job-worker-1": failed()})
    assert {"apiVersion": "v1", "kind": "Pod", "name": "job-worker-1", "namespace": "ns"} in result["delete"]
    assert result["status"]["restartCount"] == 1
    assert any(e["reason"] == "ExitedWithCode" for e in result["events"])


def test_replica_statuses_move_active_to_succeeded_when_done():
    result = run(tfjob(TF_CHIEF), {"job-chief-0": ok()})
    rs = result["status"]["replicaStatuses"]
    assert rs["Worker"]["succeeded"] == 2 and rs["Worker"]["active"] == 0
    assert rs["Chief"]["succeeded"] == 1


def test_unchanged_status_is_not_written_again():
    job, observed = created(tfjob(TF_CHIEF))
    observed = {**observed, "pods": with_phases(observed["pods"], {})}
    job["status"] = plan(job, observed, {}, LATER)["status"]
    again = plan(job, observed, {}, "2026-11-23T10:01:00Z")
    assert again["status"] is None
    assert again["create"] == [] and again["delete"] == []


def test_pods_another_controller_owns_are_not_the_jobs():
    """The observe step lists by labels; a failed pod with this job's labels but another
    controller's owner reference (another kind labelling alike, a copied manifest) neither
    counts nor fails the job."""
    job, observed = created(tfjob([("Worker", 1, "Never")]))
    (mine,) = observed["pods"]
    foreign = copy.deepcopy(mine)
    foreign["metadata"]["name"] = "job-worker-0-copy"
    foreign["metadata"]["ownerReferences"] = [{"kind": "PaddleJob", "uid": "uid-2", "controller": True}]
    observed = {**observed, "pods": [*with_phases([mine], {}), {**foreign, "status": {"phase": "Failed"}}]}
    result = plan(job, observed, {}, LATER)
    assert result["status"]["replicaStatuses"]["Worker"] == {
        **result["status"]["replicaStatuses"]["Worker"],
        "failed": 0,
    }
    assert cond.FAILED not in [c["type"] for c in result["status"]["conditions"]]


STARTED = "2026-11-23T10:00:05Z"


def started_and_ended(pods, code, started=STARTED):
    """Every pod's containers started at ``started`` and exited with ``code`` since the last pass."""
    phase = "Succeeded" if code == 0 else "Failed"
    out = with_phases(pods, {p["metadata"]["name"]: (phase, code, False) for p in pods})
    for pod in out:
        for status in pod["status"]["containerStatuses"]:
            status["state"]["terminated"]["startedAt"] = started
    return out


@pytest.mark.parametrize(
    ("name", "code", "started", "history"),
    [
        ("pods ran and succeeded between two passes", 0, STARTED, ["Created", "Running", "Succeeded"]),
        ("pods ran and failed between two passes", 1, STARTED, ["Created", "Running", "Failed"]),
        ("pods failed without a container ever starting", 1, None, ["Created", "Failed"]),
    ],
)
def test_a_job_whose_pods_ran_unseen_records_running_first(name, code, started, history):
    """A busy queue can take longer than the pods run: the job's history is the same as if its
    passes had seen them running (issue 27)."""
    job, observed = created(tfjob([("Worker", 2, "Never")]))
    pods = started_and_ended(observed["pods"], code, started)
    result = plan(job, {**observed, "pods": pods}, {}, LATER)
    conditions = result["status"]["conditions"]
    assert [c["type"] for c in conditions] == history, conditions
    if started:
        running = cond.find(conditions, cond.RUNNING)
        assert running["status"] == cond.FALSE and running["reason"] == "TFJobRunning"
        assert running["lastTransitionTime"] == LATER, "turned off by the final condition"
        assert running["lastUpdateTime"] == LATER
        assert [e["reason"] for e in result["events"]].count("TFJobRunning") == 1


def test_a_job_seen_running_keeps_its_running_condition():
    job, observed = created(tfjob([("Worker", 2, "Never")]))
    job["status"] = plan(job, {**observed, "pods": with_phases(observed["pods"], {})}, {}, NOW)["status"]
    since = cond.find(job["status"]["conditions"], cond.RUNNING)["lastTransitionTime"]
    pods = started_and_ended(observed["pods"], 0, started="2026-11-23T09:00:00Z")
    result = plan(job, {**observed, "pods": pods}, {}, LATER)
    conditions = result["status"]["conditions"]
    assert [c["type"] for c in conditions] == ["Created", "Running", "Succeeded"]
    assert since == NOW and "TFJobRunning" not in [e["reason"] for e in result["events"]]
