"""What the Ansible runtime writes onto a job's status when a run fails, undone by the next pass.

ansible-operator v1.42's ``markError`` (``internal/ansible/controller/reconcile.go``) runs even
with ``manageStatus: false``: a pass that crashed in ansible-runner (an operator stopped mid-pass
leaves a dangling ``artifacts/latest`` link, docs/troubleshooting.md) appends
``{type: Failure, reason: Failed}``, turns ``Running`` to ``False`` and rewrites every condition
without ``lastUpdateTime``. :func:`mark_error` below does exactly that; each row then runs the
next pass and checks the conditions it writes.
"""

from __future__ import annotations

import pytest
from test_plan_status import (
    LATER,
    NOW,
    TF_CHIEF,
    cr,
    created,
    failed,
    ok,
    paddlejob,
    pending,
    tfjob,
    with_phases,
)
from training_jobs import conditions as cond
from training_jobs.plan import FINISHED_LABEL, plan

THEN = "2026-11-23T10:00:10Z"
RUNTIME_NOW = "2026-11-23T10:00:20Z"


def set_ansible_condition(conditions, new):
    """ansible-operator's ``status.SetCondition``: a no-op for the same status and reason (except
    Failure); the transition time kept for the same status; removed and appended last."""
    current = next((c for c in conditions if c["type"] == new["type"]), None)
    if (
        current
        and new["type"] != "Failure"
        and (current["status"], current["reason"]) == (new["status"], new["reason"])
    ):
        return conditions
    if current and current["status"] == new["status"]:
        new = {**new, "lastTransitionTime": current["lastTransitionTime"]}
    return [c for c in conditions if c["type"] != new["type"]] + [new]


def mark_error(conditions, message="Failed to get ansible-runner stdout"):
    """ansible-operator's ``markError`` on a job's conditions."""
    # Its condition struct has no lastUpdateTime: every condition is written back without it.
    keep = ("type", "status", "lastTransitionTime", "reason", "message")
    out = [{k: c.get(k, "") for k in keep} for c in conditions]
    for ctype in ("Running", "Successful"):
        current = next((c for c in out if c["type"] == ctype), None)
        if current:
            out = set_ansible_condition(out, {**current, "status": "False"})
    failure = {"type": "Failure", "status": "True", "reason": "Failed", "message": message}
    return set_ansible_condition(out, {**failure, "lastTransitionTime": RUNTIME_NOW})


def at(job, *steps):
    """The job with the status its passes write when its pods are in each of ``steps`` (their
    phases) in turn, and its objects."""
    job, observed = created(job)
    for phases in steps:
        observed = {**observed, "pods": with_phases(observed["pods"], phases)}
        result = plan(job, observed, {}, THEN)
        if result["status"] is not None:
            job["status"] = result["status"]
    return job, observed


def pytorchjob():
    spec = {"replicas": 1, "template": {"spec": {"containers": [{"name": "pytorch", "image": "busybox"}]}}}
    return cr("kubeflow.org/v1", "PyTorchJob", {"pytorchReplicaSpecs": {"Master": spec, "Worker": spec}})


TF_ONFAILURE = [("Chief", 1), ("Worker", 2, "OnFailure")]
RUN = cond.RUNNING, cond.TRUE
RUN_OFF = cond.RUNNING, cond.FALSE
PENDING = {n: pending() for n in ("job-chief-0", "job-ps-0", "job-worker-0", "job-worker-1")}

# Each row: the job, its pods' phases in the passes before the runtime marked a failed run, their
# phases at the next pass, and the conditions (type, status) that pass leaves.
ROWS = [
    ("running, still running", tfjob(TF_CHIEF), [{}], {}, [(cond.CREATED, cond.TRUE), RUN]),
    (
        "running, then succeeded",
        tfjob(TF_CHIEF),
        [{}],
        {"job-chief-0": ok()},
        [(cond.CREATED, cond.TRUE), RUN_OFF, (cond.SUCCEEDED, cond.TRUE)],
    ),
    (
        "running, then a worker failed (OnFailure)",
        tfjob(TF_ONFAILURE),
        [{}],
        {"job-worker-1": failed()},
        [(cond.CREATED, cond.TRUE), (cond.RESTARTING, cond.TRUE)],
    ),
    (
        "succeeded",
        tfjob(TF_CHIEF),
        [{}, {"job-chief-0": ok()}],
        {"job-chief-0": ok()},
        [(cond.CREATED, cond.TRUE), RUN_OFF, (cond.SUCCEEDED, cond.TRUE)],
    ),
    (
        "failed",
        tfjob([("Worker", 2, "Never")]),
        [{}, {"job-worker-0": failed()}],
        {"job-worker-0": failed()},
        [(cond.CREATED, cond.TRUE), RUN_OFF, (cond.FAILED, cond.TRUE)],
    ),
    (
        "pods still pending: no Running to restore",
        tfjob(TF_CHIEF),
        [PENDING],
        PENDING,
        [(cond.CREATED, cond.TRUE)],
    ),
    ("PyTorchJob running (its own reason)", pytorchjob(), [{}], {}, [(cond.CREATED, cond.TRUE), RUN]),
    (
        "paddle-operator's PaddleJob running",
        paddlejob([("worker", 2)]),
        [{}],
        {},
        [(cond.CREATED, cond.TRUE), RUN],
    ),
]


@pytest.mark.parametrize(("name", "job", "before", "after", "expected"), ROWS, ids=[r[0] for r in ROWS])
def test_the_pass_after_a_failed_run_writes_kubeflow_conditions_only(name, job, before, after, expected):
    job, observed = at(job, *before)
    kubeflow = job["status"]["conditions"]
    job["status"]["conditions"] = mark_error(kubeflow)
    assert cond.current_state(job["status"]["conditions"]) == "Failure"
    observed = {**observed, "pods": with_phases(observed["pods"], after)}
    result = plan(job, observed, {}, LATER)
    assert result["status"] is not None, "the repaired status is written"
    conditions = result["status"]["conditions"]
    assert [(c["type"], c["status"]) for c in conditions] == expected
    assert cond.foreign_types(conditions) == []
    assert all(c.get("lastUpdateTime") for c in conditions), conditions
    # What the runtime did not change is as it was: its times too.
    for c in conditions:
        before_c = cond.find(kubeflow, c["type"])
        if before_c and (before_c["status"], before_c["reason"]) == (c["status"], c["reason"]):
            assert c["lastTransitionTime"] == before_c["lastTransitionTime"], c
    if result["final"]:
        assert FINISHED_LABEL not in (job["metadata"].get("labels") or {})


def test_a_finished_job_woken_for_a_foreign_condition_is_labelled_finished_again():
    """The companion takes the finished label off such a job to bring it back: its pass drops
    the condition and labels it finished again."""
    job, observed = at(tfjob(TF_CHIEF), {}, {"job-chief-0": ok()})
    job["status"]["conditions"] = mark_error(job["status"]["conditions"])
    result = plan(job, observed, {}, LATER)
    assert cond.current_state(result["status"]["conditions"]) == cond.SUCCEEDED
    assert result["final"] and result["apply"]
    assert result["metrics"] == {}, "no job counted twice"


def test_a_suspended_jobs_running_stays_off():
    """Suspending turns Running off with reason Suspended: that one is Kubeflow's."""
    job, observed = at(tfjob(TF_CHIEF), {})
    job["spec"]["runPolicy"] = {"suspend": True}
    job["status"] = plan(job, observed, {}, THEN)["status"]
    observed = {**observed, "pods": []}
    job["status"]["conditions"] = mark_error(job["status"]["conditions"])
    result = plan(job, observed, {}, LATER)
    assert [(c["type"], c["status"], c["reason"]) for c in result["status"]["conditions"]] == [
        (cond.CREATED, cond.TRUE, "TFJobCreated"),
        (cond.RUNNING, cond.FALSE, "TFJobSuspended"),
        (cond.SUSPENDED, cond.TRUE, "TFJobSuspended"),
    ]


def test_a_repaired_status_is_not_written_again():
    job, observed = at(tfjob(TF_CHIEF), {})
    job["status"]["conditions"] = mark_error(job["status"]["conditions"])
    job["status"] = plan(job, observed, {}, LATER)["status"]
    assert plan(job, observed, {}, "2026-11-23T10:01:00Z")["status"] is None


def test_an_earlier_operators_pass_left_the_failure_before_running():
    """Before this repair a pass kept the foreign condition and set Running again after it."""
    job, observed = at(tfjob(TF_CHIEF), {})
    running = cond.find(job["status"]["conditions"], cond.RUNNING)
    failure = mark_error(job["status"]["conditions"])[-1]
    job["status"]["conditions"] = [job["status"]["conditions"][0], failure, running]
    result = plan(job, observed, {}, LATER)
    assert [c["type"] for c in result["status"]["conditions"]] == [cond.CREATED, cond.RUNNING]


@pytest.mark.parametrize(
    ("conditions", "expected"),
    [
        ([], []),
        ([{"type": "Created"}, {"type": "Running"}], []),
        ([{"type": "Failure"}, {"type": "Created"}, {"type": "Successful"}], ["Failure", "Successful"]),
        ([{"type": "Ready"}, {"status": "True"}], ["None", "Ready"]),
    ],
)
def test_foreign_types(conditions, expected):
    assert cond.foreign_types(conditions) == expected


@pytest.mark.parametrize(
    ("running", "others", "restored"),
    [
        ({"status": "False", "reason": "TFJobRunning"}, [], True),
        ({"status": "False", "reason": "TFJobSuspended"}, [], False),
        ({"status": "False", "reason": "TFJobRunning"}, [{"type": "Succeeded", "status": "True"}], False),
        ({"status": "False", "reason": "TFJobRunning"}, [{"type": "Failed", "status": "True"}], False),
        ({"status": "False", "reason": "TFJobRunning"}, [{"type": "Suspended", "status": "True"}], False),
        ({"status": "False", "reason": "TFJobRunning"}, [{"type": "Suspended", "status": "False"}], True),
        ({"status": "False", "reason": "PyTorchJobRunning"}, [], False),
        ({"status": "True", "reason": "TFJobRunning"}, [], True),
    ],
)
def test_kubeflow_only_restores_a_running_the_runtime_turned_off(running, others, restored):
    conditions = [{"type": "Created", "status": "True"}, *others, {"type": "Running", **running}]
    out = cond.kubeflow_only(conditions, "TFJob")
    assert cond.is_true(out, cond.RUNNING) is restored
    assert conditions[-1]["status"] == running["status"], "the input is left as it was"


def test_kubeflow_only_fills_the_update_time_the_runtime_dropped():
    conditions = [
        {"type": "Created", "status": "True", "lastTransitionTime": NOW},
        {"type": "Running", "status": "True", "lastTransitionTime": NOW, "lastUpdateTime": THEN},
    ]
    out = cond.kubeflow_only(conditions, "TFJob")
    assert [c["lastUpdateTime"] for c in out] == [NOW, THEN]
