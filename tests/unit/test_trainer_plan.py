"""One reconcile pass of a TrainJob, as scenarios: what is created, applied again, deleted and
written, against Trainer v2.3.0's ``trainjob`` controller, and where the engine does better
(a finished TrainJob's JobSet is never built again: trainer#3779)."""

from __future__ import annotations

import copy
import json

import pytest
from trainer_jobs import snapshot
from trainer_jobs.observe import jobset_signature
from trainer_jobs.plan import covers, plan
from trainer_jobs.render import render
from trainer_runtimes import NOW, deepspeed_distributed, pod, torch_distributed, trainjob
from training_jobs.idle import IDLE_LABEL, idle_value

KUEUE_PATCH = {
    "manager": "kueue.x-k8s.io/manager",
    "trainingRuntimeSpec": {
        "template": {
            "spec": {
                "replicatedJobs": [
                    {
                        "name": "node",
                        "template": {"spec": {"template": {"spec": {"nodeSelector": {"flavor": "a"}}}}},
                    }
                ]
            }
        }
    },
}


def cond(ctype, st, reason, message=""):
    return {
        "type": ctype,
        "status": st,
        "reason": reason,
        "message": message,
        "lastTransitionTime": "2026-11-30T09:00:00Z",
    }


def served(obj, **status):
    """``obj`` as the API server serves it back: with a resourceVersion and a status."""
    out = copy.deepcopy(obj)
    out["metadata"]["resourceVersion"] = "5"
    if status:
        out["status"] = status
    return out


def existing(tj, rt, *, jobset_status=None, jobset_spec=None):
    """What a cluster holds after a first pass for ``tj``: its snapshot and objects."""
    rendered = render(tj, rt)
    js = served(rendered.jobset, **(jobset_status or {}))
    js["spec"].update(jobset_spec or {})
    cms = [served(snapshot.config_map(tj, rt))] + ([served(rendered.hostfile)] if rendered.hostfile else [])
    secrets = [served(rendered.ssh_secret)] if rendered.ssh_secret else []
    return {
        "jobsets": [js],
        "configmaps": cms,
        "secrets": secrets,
        "podgroups": [served(g) for g in rendered.pod_groups],
    }


def kinds(objs):
    return [(o["kind"], o["metadata"]["name"]) for o in objs]


def test_a_new_trainjob_gets_its_snapshot_and_jobset():
    tj, rt = trainjob(trainer={"numNodes": 2}), torch_distributed()
    p = plan(tj, rt, {}, {}, NOW)
    assert kinds(p["create"]) == [("ConfigMap", "job-runtime-snapshot"), ("JobSet", "job")]
    assert p["create"][1] == render(tj, rt).jobset
    assert json.loads(p["create"][0]["data"]["runtime"])["spec"] == rt["spec"]
    assert [e["reason"] for e in p["events"]] == ["SuccessfulCreateConfigMap", "SuccessfulCreateJobSet"]
    assert p["status"] is None and p["state"] == "" and p["metrics"] == {"created": 1}
    assert p["job"]["framework"] == "torch"
    assert p["patch"] == [] and p["delete"] == [] and not p["final"] and p["apply"]


def test_a_steady_trainjob_costs_nothing():
    tj, rt = trainjob(trainer={"numNodes": 2}), torch_distributed()
    js_status = {
        "replicatedJobsStatus": [
            {"name": "node", "ready": 2, "succeeded": 0, "failed": 0, "active": 2, "suspended": 0}
        ]
    }
    tj["status"] = {
        "jobsStatus": [{"name": "node", "ready": 2, "succeeded": 0, "failed": 0, "active": 2, "suspended": 0}]
    }
    p = plan(tj, rt, existing(tj, rt, jobset_status=js_status), {}, NOW)
    assert p["apply"] is False and p["create"] == p["patch"] == [] and p["status"] is None


RUNNING_NODES = {
    "replicatedJobsStatus": [
        {"name": "node", "ready": 2, "succeeded": 0, "failed": 0, "active": 2, "suspended": 0}
    ]
}
WAKE = {"wake": "True"}  # as the role templates it


def steady(labels=None, **spec):
    tj, rt = trainjob(trainer={"numNodes": 2}), torch_distributed()
    tj["metadata"].update(generation=3, labels=labels or {})
    tj["spec"].update(spec)
    tj["status"] = {"jobsStatus": copy.deepcopy(RUNNING_NODES["replicatedJobsStatus"])}
    return tj, rt, existing(tj, rt, jobset_status=RUNNING_NODES)


def test_a_steady_trainjob_is_left_idle_with_the_jobset_it_planned_with():
    tj, rt, observed = steady()
    p = plan(tj, rt, observed, WAKE, NOW)
    assert p["idle"] == idle_value(tj, jobset_signature(observed["jobsets"][0]))
    assert p["idle"].startswith("3-") and p["apply"] and p["create"] == p["patch"] == []
    assert p["status"] is None


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda tj, obs, cfg: cfg.update(wake="False"), "nothing would wake it"),
        (lambda tj, obs, cfg: obs["jobsets"][0].pop("status"), "its JobSet's first report wakes it"),
        (lambda tj, obs, cfg: obs.update(jobsets=[]), "its JobSet is created"),
        (lambda tj, obs, cfg: tj["metadata"]["labels"].update({IDLE_LABEL: "x"}), "labelled already"),
        (lambda tj, obs, cfg: tj["spec"].update(activeDeadlineSeconds=10**6), "a look at its deadline"),
        (lambda tj, obs, cfg: tj["spec"].update(suspend=True), "its JobSet is applied again"),
        (lambda tj, obs, cfg: tj["spec"].update(managedBy="kueue.x-k8s.io/multikueue"), "not ours"),
        (
            lambda tj, obs, cfg: obs["jobsets"][0]["status"].update(
                conditions=[cond("Completed", "True", "AllJobsCompleted")]
            ),
            "finished",
        ),
    ],
)
def test_a_trainjob_with_something_pending_is_not_left_idle(change, why):
    tj, rt, observed = steady()
    config = dict(WAKE)
    change(tj, observed, config)
    assert plan(tj, rt, observed, config, NOW)["idle"] == "", why


def test_the_snapshot_not_the_runtime_is_built_from():
    tj, rt = trainjob(trainer={}), torch_distributed()
    observed = existing(tj, rt, jobset_spec={"suspend": True})
    tj["spec"]["suspend"] = True
    edited = copy.deepcopy(rt)
    pod(edited["spec"]["template"])["containers"][0]["image"] = "edited"
    for live in (edited, None):
        p = plan(tj, live, observed, {}, NOW)
        assert p["patch"] == [] and p["create"] == []  # the suspended JobSet already matches the snapshot


def test_kueue_admits_a_suspended_trainjob_patch_and_resume_in_one_apply():
    tj, rt = trainjob(suspend=True, trainer={"numNodes": 2}), torch_distributed()
    first = plan(tj, rt, {}, {}, NOW)
    (js,) = [o for o in first["create"] if o["kind"] == "JobSet"]
    assert js["spec"]["suspend"] is True
    assert first["status"]["conditions"][0]["reason"] == "Suspended"
    observed = existing(tj, rt)
    tj["status"] = first["status"]
    admitted = copy.deepcopy(tj)
    admitted["spec"]["suspend"] = False
    admitted["spec"]["runtimePatches"] = [KUEUE_PATCH]
    p = plan(admitted, rt, observed, {}, NOW)
    (applied,) = p["patch"]
    assert applied["spec"]["suspend"] is False
    assert pod(applied)["nodeSelector"] == {"flavor": "a"}
    assert p["status"]["conditions"] == [
        {
            "type": "Suspended",
            "status": "False",
            "reason": "Resumed",
            "message": "TrainJob is resumed",
            "lastTransitionTime": NOW,
        }
    ]
    assert ("Normal", "Resumed") in [(e["type"], e["reason"]) for e in p["events"]]


def test_suspending_a_running_trainjob_suspends_its_jobset():
    tj, rt = trainjob(trainer={}), torch_distributed()
    observed = existing(tj, rt)
    tj["spec"]["suspend"] = True
    (applied,) = plan(tj, rt, observed, {}, NOW)["patch"]
    assert applied["kind"] == "JobSet" and applied["spec"]["suspend"] is True


def test_preemption_takes_kueues_patch_back():
    tj, rt = trainjob(trainer={}, runtimePatches=[KUEUE_PATCH]), torch_distributed()
    observed = existing(tj, rt)
    tj["spec"]["suspend"] = True
    tj["spec"]["runtimePatches"] = []
    (applied,) = plan(tj, rt, observed, {}, NOW)["patch"]
    assert "nodeSelector" not in pod(applied)


def test_kueue_takes_its_patch_back_after_the_suspend_and_the_jobset_follows():
    """Kueue's preemption in its two writes: ``suspend`` first (the JobSet is suspended with the
    flavor still on its template), then, once no Job is active, its patch emptied: the next pass
    applies the suspended JobSet again without the flavor."""
    admitted = {**KUEUE_PATCH, "trainingRuntimeSpec": copy.deepcopy(KUEUE_PATCH["trainingRuntimeSpec"])}
    node = admitted["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]
    node["template"]["metadata"] = {"labels": {"kueue.x-k8s.io/podset": "node"}}
    node["template"]["spec"]["tolerations"] = [{"key": "gpu", "operator": "Exists"}]
    tj, rt = trainjob(suspend=True, trainer={}, runtimePatches=[admitted]), torch_distributed()
    observed = existing(tj, rt)
    assert plan(tj, rt, observed, {}, NOW)["patch"] == [], "suspended with the flavor: nothing new"
    tj["spec"]["runtimePatches"] = [{**KUEUE_PATCH, "trainingRuntimeSpec": {"template": {"spec": {}}}}]
    (applied,) = plan(tj, rt, observed, {}, NOW)["patch"]
    assert applied["spec"]["suspend"] is True
    assert {"nodeSelector", "tolerations"}.isdisjoint(pod(applied))
    (rjob,) = applied["spec"]["replicatedJobs"]
    # Applied as {}, the labels' map would be stored as null, which the JobSet CRD refuses.
    assert "metadata" not in rjob["template"]["spec"]["template"]
    observed["jobsets"] = [served(applied)]
    assert plan(tj, rt, observed, {}, NOW)["patch"] == [], "applied: nothing new"


def test_runtime_patches_of_a_running_trainjob_are_not_applied():
    # Upstream builds nothing while both the TrainJob and the JobSet run (its webhook refuses
    # such an edit anyway).
    tj, rt = trainjob(trainer={}), torch_distributed()
    observed = existing(tj, rt)
    tj["spec"]["runtimePatches"] = [KUEUE_PATCH]
    assert plan(tj, rt, observed, {}, NOW)["patch"] == []


def test_a_finished_trainjob_whose_jobset_is_gone_gets_no_new_one():
    done = {"conditions": [cond("Failed", "True", "ReachedMaxRestarts", "jobset failed")]}
    tj, rt = trainjob(trainer={}, status=done), torch_distributed()
    observed = existing(tj, rt)
    observed["jobsets"] = []
    p = plan(tj, rt, observed, {}, NOW)
    assert p["create"] == [] and p["status"] is None and p["final"] is True
    tj["metadata"]["labels"] = {"training.ato.dev/finished": ""}
    assert plan(tj, rt, observed, {}, NOW)["apply"] is False


def test_a_completed_jobset_completes_the_trainjob():
    tj, rt = trainjob(trainer={}), torch_distributed()
    completed = {
        "conditions": [cond("Completed", "True", "AllJobsCompleted", "jobset completed successfully")]
    }
    p = plan(tj, rt, existing(tj, rt, jobset_status=completed), {}, NOW)
    assert p["status"]["conditions"] == [
        cond("Complete", "True", "AllJobsCompleted", "jobset completed successfully")
    ]
    assert p["state"] == "Complete" and p["final"] is True and p["metrics"] == {"successful": 1}
    # Counted under the framework of the runtime (its snapshot's label), as a v1 kind's job is.
    assert p["job"]["framework"] == "torch"
    assert ("Normal", "AllJobsCompleted") in [(e["type"], e["reason"]) for e in p["events"]]


def test_a_failed_jobset_fails_the_trainjob_with_its_reason():
    tj, rt = trainjob(trainer={}), torch_distributed()
    failed = {"conditions": [cond("Failed", "True", "FailedJobs", "jobset failed due to a failed job")]}
    p = plan(tj, rt, existing(tj, rt, jobset_status=failed), {}, NOW)
    assert p["state"] == "Failed" and p["metrics"] == {"failed": 1}
    assert ("Warning", "FailedJobs") in [(e["type"], e["reason"]) for e in p["events"]]


@pytest.mark.parametrize(
    ("created", "failed", "requeue"),
    [("2026-11-30T09:59:50Z", False, "5s"), ("2026-11-30T09:50:00Z", True, "")],
)
def test_a_missing_runtime(created, failed, requeue):
    tj = trainjob("gone", trainer={})
    tj["metadata"]["creationTimestamp"] = created
    p = plan(tj, None, {}, {}, NOW)
    assert p["create"] == [] and p["requeue_after"] == requeue
    if failed:
        (c,) = p["status"]["conditions"]
        assert (c["type"], c["status"], c["reason"]) == ("Failed", "True", "TrainingRuntimeNotFound")
        assert c["message"] == (
            "not found ClusterTrainingRuntime specified in TrainJob: "
            'clustertrainingruntimes.trainer.kubeflow.org "gone" not found'
        )
        assert p["final"] is True
    else:
        assert p["status"] is None
        assert [e["reason"] for e in p["events"]] == ["TrainJobResourcesCreationFailed"]


def test_an_unsupported_runtime_kind():
    tj = trainjob(trainer={})
    tj["spec"]["runtimeRef"]["apiGroup"] = "example.com"
    (c,) = plan(tj, torch_distributed(), {}, {}, NOW)["status"]["conditions"]
    assert (c["reason"], c["message"]) == (
        "TrainingRuntimeNotSupported",
        "unsupported runtime: ClusterTrainingRuntime.example.com",
    )


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda cm: cm["metadata"]["ownerReferences"][0].update(uid="other"), "owned by another object"),
        (lambda cm: cm.update(data={}), 'missing "runtime" data key'),
        (lambda cm: cm.update(data={"runtime": "kind: [x"}), "unable to unmarshal"),
        (
            lambda cm: cm.update(
                data={"runtime": json.dumps({**torch_distributed(), "kind": "TrainingRuntime"})}
            ),
            'expecting a runtime with name, api group and kind of "torch-distributed", "trainer.kubeflow.org", '
            '"ClusterTrainingRuntime" but found runtime with name, api group and kind of "torch-distributed", '
            '"trainer.kubeflow.org", "TrainingRuntime"',
        ),
    ],
)
def test_an_invalid_snapshot_fails_the_trainjob(mutate, message):
    tj, rt = trainjob(trainer={}), torch_distributed()
    cm = served(snapshot.config_map(tj, rt))
    mutate(cm)
    (c,) = plan(tj, rt, {"configmaps": [cm]}, {}, NOW)["status"]["conditions"]
    assert c["reason"] == "TrainJobResourcesCreationFailed" and message in c["message"]


def test_a_yaml_snapshot_is_read_through_the_observe_steps_parse():
    tj, rt = trainjob(trainer={}), torch_distributed()
    cm = served(snapshot.config_map(tj, rt))
    cm["data"]["runtime"] = "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: ClusterTrainingRuntime\n"
    p = plan(tj, None, {"configmaps": [cm], "runtime_snapshot": rt}, {}, NOW)
    assert kinds(p["create"]) == [("JobSet", "job")]


@pytest.mark.parametrize(
    ("spec", "conditions", "failed", "requeue"),
    [
        ({"activeDeadlineSeconds": 600}, [], False, "540s"),  # created a minute ago
        ({"activeDeadlineSeconds": 30}, [], True, ""),
        ({"activeDeadlineSeconds": 30, "suspend": True}, [], False, ""),
        # Counted from the last resume, not from the creation.
        ({"activeDeadlineSeconds": 3600}, [cond("Suspended", "False", "Resumed")], False, "1s"),
    ],
)
def test_active_deadline(spec, conditions, failed, requeue):
    tj, rt = trainjob(trainer={}, **spec), torch_distributed()
    observed = existing(tj, rt)
    tj["status"] = {"conditions": conditions}
    p = plan(tj, rt, observed, {}, NOW)
    assert p["requeue_after"] == requeue
    if failed:
        assert p["state"] == "Failed" and p["status"]["conditions"][-1]["reason"] == "DeadlineExceeded"
        assert [(r["kind"], r["name"]) for r in p["delete"]] == [("JobSet", "job")]
    else:
        assert p["delete"] == []


def test_a_trainjob_past_its_deadline_gets_no_jobset():
    p = plan(trainjob(trainer={}, activeDeadlineSeconds=30), torch_distributed(), {}, {}, NOW)
    assert p["create"] == [] and p["state"] == "Failed"


def test_multikueue_trainjobs_are_left_alone():
    tj = trainjob(trainer={}, managedBy="kueue.x-k8s.io/multikueue")
    p = plan(tj, torch_distributed(), {}, {}, NOW)
    assert p["apply"] is False and p["create"] == [] and p["status"] is None


def test_mpi_secret_is_created_once_and_the_hostfile_kept_right():
    tj, rt = trainjob("deepspeed-distributed", trainer={"numNodes": 2}), deepspeed_distributed()
    p = plan(tj, rt, {}, {}, NOW)
    assert kinds(p["create"]) == [
        ("ConfigMap", "job-runtime-snapshot"),
        ("Secret", "job-mpi-ssh-auth"),
        ("ConfigMap", "job-mpi-hostfile"),
        ("JobSet", "job"),
    ]
    assert p["ssh_keys"] == ["job-mpi-ssh-auth"]
    observed = existing(tj, rt)
    observed["configmaps"][1]["data"]["hostfile"] = "stale\n"
    p = plan(tj, rt, observed, {}, NOW)
    assert kinds(p["patch"]) == [("ConfigMap", "job-mpi-hostfile")] and p["ssh_keys"] == []


def test_a_suspended_trainjobs_pod_group_follows_the_runtime_patches():
    rt = torch_distributed()
    rt["spec"]["podGroupPolicy"] = {"coscheduling": {}}
    tj = trainjob(suspend=True, trainer={"numNodes": 2})
    observed = existing(tj, rt)
    assert plan(tj, rt, observed, {}, NOW)["patch"] == []
    observed["podgroups"][0]["spec"]["minMember"] = 5
    assert kinds(plan(tj, rt, observed, {}, NOW)["patch"]) == [("PodGroup", "job")]


def test_a_runtime_that_cannot_be_built_fails_the_trainjob():
    rt = deepspeed_distributed()
    rt["spec"]["mlPolicy"]["mpi"]["mpiImplementation"] = "MPICH"
    (c,) = plan(trainjob("deepspeed-distributed", trainer={}), rt, {}, {}, NOW)["status"]["conditions"]
    assert c["reason"] == "TrainJobResourcesCreationFailed"
    assert (
        c["message"]
        == "TrainJob resources reconciliation failed: MPI implementation for MPICH doesn't supported"
    )


def test_objects_another_controller_owns_are_not_ours():
    tj, rt = trainjob(trainer={}), torch_distributed()
    observed = existing(tj, rt)
    observed["jobsets"][0]["metadata"]["ownerReferences"][0]["uid"] = "someone-else"
    assert kinds(plan(tj, rt, observed, {}, NOW)["create"]) == [("JobSet", "job")]


@pytest.mark.parametrize(
    ("observed", "desired", "same"),
    [
        ({"a": 1, "b": 2}, {"a": 1}, True),  # a default the API server added
        ({"a": 1}, {"a": 2}, False),
        ({"l": [1, 2]}, {"l": [1]}, False),  # an item the apply would remove
        ({"labels": {"x": "1", "y": "2"}}, {"labels": {"x": "1"}}, False),
        ({"nodeSelector": {"x": "1"}}, {"nodeSelector": {"x": "1"}}, True),
        ({"spec": {"x": {"y": 1, "z": 2}}}, {"spec": {"x": {"y": 1}}}, True),
        ({"template": {"spec": {"tolerations": [{"key": "a"}]}}}, {"template": {"spec": {}}}, False),
        ({"template": {"metadata": {"labels": {"x": "1"}}}}, {"template": {"metadata": {}}}, False),
        ({"template": {"spec": {"tolerations": []}}}, {"template": {"spec": {}}}, True),
        ({"spec": {"tolerations": [{"key": "a"}]}}, {"spec": {}}, True),  # not a template
        ({"template": {"spec": {}}}, {"template": {"metadata": {}, "spec": {}}}, True),
        (None, {"a": 1}, False),
    ],
)
def test_covers(observed, desired, same):
    assert covers(observed, desired) is same


def test_a_status_key_gone_is_written_as_null():
    tj, rt = trainjob(trainer={}), torch_distributed()
    tj["status"] = {
        "jobsStatus": [{"name": "node", "ready": 1, "succeeded": 0, "failed": 0, "active": 1, "suspended": 0}]
    }
    assert plan(tj, rt, existing(tj, rt), {}, NOW)["status"] == {"jobsStatus": None}
