"""A TrainJob's status as Trainer v2.3.0 writes it, as a scenario table.

Rows from upstream's ``pkg/controller/trainjob_controller.go`` (``setSuspendedCondition``,
``setTrainJobStatus``, ``reconcileDeadline``), the JobSet plugin's ``Status`` and
``test/integration/controller/trainjob_controller_test.go`` (suspend, resume, complete, fail).
"""

from __future__ import annotations

import pytest
from trainer_jobs.status import set_condition, status
from trainer_runtimes import NOW, trainjob

EARLIER = "2026-11-30T09:00:00Z"


def cond(ctype, st, reason, message="", at=EARLIER):
    return {"type": ctype, "status": st, "reason": reason, "message": message, "lastTransitionTime": at}


SUSPENDED = cond("Suspended", "True", "Suspended", "TrainJob is suspended")
RESUMED = cond("Suspended", "False", "Resumed", "TrainJob is resumed")


def jobset(conditions=(), jobs=None):
    st = {"conditions": list(conditions)}
    if jobs is not None:
        st["replicatedJobsStatus"] = jobs
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "job"},
        "status": st,
    }


JOB = {"name": "node", "ready": 2, "succeeded": 0, "failed": 0, "active": 2, "suspended": 0}


@pytest.mark.parametrize(
    ("suspend", "before", "js", "after"),
    [
        # A new TrainJob: no condition at all (the SDK then reports Running or Created itself).
        (False, [], None, []),
        (False, [], jobset(), []),
        # Suspended, then resumed: the condition stays where it was, False with reason Resumed.
        (True, [], None, [cond("Suspended", "True", "Suspended", "TrainJob is suspended", NOW)]),
        (True, [SUSPENDED], None, [SUSPENDED]),
        (False, [SUSPENDED], None, [cond("Suspended", "False", "Resumed", "TrainJob is resumed", NOW)]),
        (False, [RESUMED], None, [RESUMED]),
        (True, [RESUMED], None, [cond("Suspended", "True", "Suspended", "TrainJob is suspended", NOW)]),
        # The JobSet's Completed and Failed, copied whole under the TrainJob's names.
        (
            False,
            [RESUMED],
            jobset([cond("Completed", "True", "AllJobsCompleted", "jobset completed successfully")]),
            [RESUMED, cond("Complete", "True", "AllJobsCompleted", "jobset completed successfully")],
        ),
        (
            False,
            [],
            jobset(
                [
                    cond(
                        "Failed",
                        "True",
                        "ReachedMaxRestarts",
                        "jobset failed due to reaching max number of restarts",
                    )
                ]
            ),
            [
                cond(
                    "Failed",
                    "True",
                    "ReachedMaxRestarts",
                    "jobset failed due to reaching max number of restarts",
                )
            ],
        ),
        (False, [], jobset([cond("Completed", "False", "x"), cond("Suspended", "True", "x")]), []),
        # DeadlineExceeded stays, whatever the JobSet says.
        (
            False,
            [cond("Failed", "True", "DeadlineExceeded", "TrainJob exceeded its active deadline")],
            jobset([cond("Failed", "True", "FailedJobs", "a job failed")]),
            [cond("Failed", "True", "DeadlineExceeded", "TrainJob exceeded its active deadline")],
        ),
    ],
)
def test_conditions(suspend, before, js, after):
    tj = trainjob(suspend=suspend, status={"conditions": before} if before else None)
    assert status(tj, js, NOW).get("conditions", []) == after


def test_no_condition_says_running():
    tj = trainjob()
    js = jobset(jobs=[{**JOB}])
    assert "Running" not in [c["type"] for c in status(tj, js, NOW).get("conditions", [])]


@pytest.mark.parametrize(
    ("before", "js", "after"),
    [
        (None, jobset(jobs=[JOB]), [JOB]),
        # Every field written, zeros too, in the JobSet's order.
        (
            None,
            jobset(jobs=[{"name": "launcher"}, {"name": "node", "active": 1}]),
            [
                {"name": "launcher", "ready": 0, "succeeded": 0, "failed": 0, "active": 0, "suspended": 0},
                {"name": "node", "ready": 0, "succeeded": 0, "failed": 0, "active": 1, "suspended": 0},
            ],
        ),
        # A JobSet without replicated job status clears it; no JobSet keeps the last one.
        ([JOB], jobset(), None),
        ([JOB], None, [JOB]),
    ],
)
def test_jobs_status(before, js, after):
    tj = trainjob(status={"jobsStatus": before} if before else None)
    assert status(tj, js, NOW).get("jobsStatus") == after


def test_set_condition_moves_the_transition_time_only_when_the_status_changes():
    base = [cond("Suspended", "True", "Suspended", "m")]
    same = set_condition(
        base, {"type": "Suspended", "status": "True", "reason": "Other", "message": "n"}, NOW
    )
    assert same == [cond("Suspended", "True", "Other", "n")]
    flipped = set_condition(
        base, {"type": "Suspended", "status": "False", "reason": "Resumed", "message": "r"}, NOW
    )
    assert flipped == [cond("Suspended", "False", "Resumed", "r", NOW)]
    assert base == [cond("Suspended", "True", "Suspended", "m")]
