"""What a real cluster does that a simulator hides, in the engine: pods being deleted, stale
reads, evictions, an external manager, gang holds, huge jobs and odd input.

Rows follow training-operator v1.9's ``TestPastBackoffLimit`` and ``job_test.go``, Kubernetes'
graceful deletion (a deleted pod turns Failed with 143 before it goes) and the issues each row
names.
"""

from __future__ import annotations

import pytest
from test_plan_status import LATER, NOW, TF_CHIEF, created, failed, mxjob, ok, pending, tfjob, with_phases
from training_jobs import conditions as cond
from training_jobs import pod_signature
from training_jobs.idle import IDLE_LABEL, idle_value, parked_pods, pods_digest
from training_jobs.job_status import MAX_REPORTED_PROBLEMS
from training_jobs.plan import (
    plan,
    refused_status_plan,
)
from training_jobs.run_policy import DEFAULT_EVICTION_LIMIT

VOLCANO = {"gang_scheduler": "volcano"}


def state(result, job):
    status = result["status"] if result["status"] is not None else job.get("status") or {}
    return cond.current_state(status.get("conditions") or [])


def with_uids(pods, generation="a"):
    for pod in pods:
        pod["metadata"]["uid"] = f"{generation}-{pod['metadata']['name']}"
    return pods


def deleting(phase, code):
    return (phase, code, True)


# --- 1. a pod being deleted is a replica being replaced -----------------------------------------
@pytest.mark.parametrize("policy", ["Never", "OnFailure", "Always", "ExitCode"])
@pytest.mark.parametrize(
    ("case", "pod"),
    [
        ("kubectl delete: Failed 143 while the object still exists", deleting("Failed", 143)),
        ("drained pod that exited 1 on SIGTERM", deleting("Failed", 1)),
        ("Running with a deletionTimestamp", deleting("Running", None)),
        ("exited 0 on SIGTERM", deleting("Succeeded", 0)),
    ],
)
def test_a_pod_being_deleted_never_decides_the_job(policy, case, pod):
    job, observed = created(tfjob([("Worker", 2, policy)]))
    pods = with_phases(observed["pods"], {"job-worker-0": pod})
    result = plan(job, {**observed, "pods": pods}, {}, LATER)
    assert state(result, job) == cond.RUNNING, case
    assert not [r for r in result["delete"] if r["name"] == "job-worker-0"], "it is already going"
    assert "restartCount" not in (result["status"] or {}), "a deletion is not a restart"


def test_scale_down_never_fails_the_job():
    job, observed = created(tfjob([("Worker", 3)]))
    job["spec"]["tfReplicaSpecs"]["Worker"]["replicas"] = 1
    first = plan(job, {**observed, "pods": with_phases(observed["pods"], {})}, {}, LATER)
    assert sorted(r["name"] for r in first["delete"] if r["kind"] == "Pod") == [
        "job-worker-1",
        "job-worker-2",
    ]
    # The kubelet stops them: Failed with 143, still there, being deleted.
    gone = {"job-worker-1": deleting("Failed", 143), "job-worker-2": deleting("Failed", 143)}
    job["status"] = first["status"]
    second = plan(job, {**observed, "pods": with_phases(observed["pods"], gone)}, {}, LATER)
    assert state(second, job) == cond.RUNNING


# --- 3. runPolicy.managedBy ----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("manager", "runs"),
    [(None, True), ("kubeflow.org/training-operator", True), ("kueue.x-k8s.io/multikueue", False)],
)
def test_a_job_managed_elsewhere_is_left_alone(manager, runs):
    job = tfjob(TF_CHIEF, runPolicy={"managedBy": manager} if manager else {})
    result = plan(job, {}, {}, NOW)
    assert bool(result["create"]) is runs
    assert (result["status"] is not None) is runs
    assert result["apply"] is runs
    assert (result["create_retry_after"] != "") is runs


# --- 4. backoffLimit as training-operator's PastBackoffLimit counts --------------------------------
@pytest.mark.parametrize(
    ("case", "workers", "restarts_each", "limit", "fails"),
    [
        ("4 workers each having 1 restartCount, backoffLimit 4", 4, 1, 4, True),
        ("4 workers each having 1 restartCount, backoffLimit 5", 4, 1, 5, False),
        ("1 worker with 1 restart, backoffLimit 0", 1, 1, 0, True),
        ("no restarts, backoffLimit 0", 2, 0, 0, False),
        ("2 workers, 1 restart each, backoffLimit 2", 2, 1, 2, True),
    ],
)
def test_past_backoff_limit(case, workers, restarts_each, limit, fails):
    job, observed = created(tfjob([("Worker", workers, "OnFailure")], runPolicy={"backoffLimit": limit}))
    pods = with_phases(observed["pods"], {})
    for pod in pods:
        pod["status"]["containerStatuses"] = [
            {"name": "tensorflow", "restartCount": restarts_each, "state": {"running": {}}}
        ]
    result = plan(job, {**observed, "pods": pods}, {}, LATER)
    assert (state(result, job) == cond.FAILED) is fails, case


# --- 5. an eviction loop ends ---------------------------------------------------------------------
def evict_worker_forever(job, passes):
    job, observed = created(job)
    result = None
    for n in range(passes):
        pods = with_uids(with_phases(observed["pods"], {"job-worker-0": ("Failed", None, False)}), str(n))
        for pod in pods:
            if pod["metadata"]["name"] == "job-worker-0":
                pod["status"]["reason"] = "Evicted"
        result = plan(job, {**observed, "pods": pods}, {}, LATER)
        job["status"] = result["status"] or job["status"]
        if state(result, job) == cond.FAILED:
            return n + 1, result
    return passes, result


@pytest.mark.parametrize(
    ("run_policy", "evictions"),
    [({}, DEFAULT_EVICTION_LIMIT), ({"backoffLimit": 2}, 2), ({"backoffLimit": 10}, 10)],
)
def test_evictions_are_counted_and_end_the_loop(run_policy, evictions):
    job = tfjob([("Chief", 1), ("Worker", 1, "Never")], runPolicy=run_policy)
    passes, result = evict_worker_forever(job, 20)
    assert passes == evictions
    assert result["status"]["evictionCount"] == evictions
    assert "restartCount" not in result["status"], "an eviction is not a training failure (#1570)"


# --- 6. activeDeadlineSeconds starts when the pods may start ------------------------------------------
def test_deadline_does_not_tick_while_the_gang_is_held():
    job = tfjob(TF_CHIEF, runPolicy={"activeDeadlineSeconds": 60})
    first = plan(job, {}, VOLCANO, NOW)
    assert "startTime" not in first["status"]
    (pg,) = [o for o in first["create"] if o["kind"] == "PodGroup"]
    job["status"] = first["status"]
    held = {**pg, "status": {"phase": "Pending"}}
    hour_later = plan(job, {"podgroups": [held]}, VOLCANO, "2026-11-23T11:00:00Z")
    assert state(hour_later, job) != cond.FAILED
    admitted = {**pg, "status": {"phase": "Inqueue"}}
    job["status"] = hour_later["status"] or job["status"]
    go = plan(job, {"podgroups": [admitted]}, VOLCANO, "2026-11-23T11:00:00Z")
    assert go["status"]["startTime"] == "2026-11-23T11:00:00Z"
    assert state(go, job) != cond.FAILED


def test_deadline_does_not_tick_while_suspended():
    job = tfjob(TF_CHIEF, runPolicy={"activeDeadlineSeconds": 60, "suspend": True})
    suspended = plan(job, {}, {}, NOW)
    assert "startTime" not in suspended["status"]
    job["status"] = suspended["status"]
    job["spec"]["runPolicy"]["suspend"] = False
    resumed = plan(job, {}, {}, "2026-11-23T11:00:00Z")
    assert resumed["status"]["startTime"] == "2026-11-23T11:00:00Z"
    assert state(resumed, job) != cond.FAILED


# --- 7. a finished job keeps its counts ---------------------------------------------------------------
def test_a_finished_job_keeps_its_counts_when_its_pods_go():
    job, observed = created(tfjob(TF_CHIEF, runPolicy={"cleanPodPolicy": "All"}))
    done = plan(job, {**observed, "pods": with_phases(observed["pods"], {"job-chief-0": ok()})}, {}, LATER)
    assert state(done, job) == cond.SUCCEEDED
    job["status"] = done["status"]
    # The clean-pod policy removed the pods; the operator restarts and sees none.
    again = plan(job, {"pods": [], "services": []}, {}, "2026-11-23T12:00:00Z")
    assert again["status"] is None and again["final"], "only the finished label is written"
    job["metadata"]["labels"] = {"training.ato.dev/finished": "true"}
    assert not plan(job, {"pods": [], "services": []}, {}, "2026-11-23T12:00:00Z")["apply"]


# --- 8. the status stays writable -----------------------------------------------------------------------
def test_pod_problems_of_a_huge_job_are_bounded_and_the_job_still_finishes():
    job, observed = created(tfjob([("Worker", 501)]))
    pods = with_uids(with_phases(observed["pods"], {}))
    for pod in pods:
        pod["status"] = {
            "phase": "Pending",
            "containerStatuses": [
                {"name": "tensorflow", "state": {"waiting": {"reason": "ImagePullBackOff", "message": "no"}}}
            ],
        }
    first = plan(job, {**observed, "pods": pods}, {}, LATER)
    assert len(first["status"]["reportedPodProblems"]) == MAX_REPORTED_PROBLEMS
    assert len(first["events"]) == MAX_REPORTED_PROBLEMS
    job["status"] = first["status"]
    second = plan(job, {**observed, "pods": pods}, {}, LATER)
    assert second["status"] is None, "nothing new to write: no write on every pass"
    finished = with_phases(pods, {"job-worker-0": ok()})
    last = plan(job, {**observed, "pods": with_uids(finished)}, {}, LATER)
    assert state(last, job) == cond.SUCCEEDED


# --- 9. stale reads -------------------------------------------------------------------------------------
def test_a_restart_is_counted_once_even_if_the_deleted_pod_is_seen_again():
    job, observed = created(tfjob([("Chief", 1), ("Worker", 1, "OnFailure")]))
    pods = with_uids(with_phases(observed["pods"], {"job-worker-0": failed(1)}))
    first = plan(job, {**observed, "pods": pods}, {}, LATER)
    assert first["status"]["restartCount"] == 1
    assert first["metrics"].get("restarted") == 1
    job["status"] = first["status"]
    # A stale pod cache still shows the deleted pod.
    stale = plan(job, {**observed, "pods": pods}, {}, LATER)
    assert (stale["status"] or job["status"])["restartCount"] == 1
    assert "restarted" not in stale["metrics"]
    assert "ExitedWithCode" not in [e["reason"] for e in stale["events"]]
    # Its replacement is seen: the gone pod's uid leaves the status.
    fresh = with_uids(with_phases(observed["pods"], {}), "b")
    later = plan(job, {**observed, "pods": fresh}, {}, LATER)
    assert later["status"]["countedPods"] == []


def test_the_status_patch_carries_the_jobs_resource_version():
    job = tfjob(TF_CHIEF)
    job["metadata"]["resourceVersion"] = "4711"
    assert plan(job, {}, {}, NOW)["job"]["resourceVersion"] == "4711"


def test_creates_are_retried_when_refused_for_now():
    result = plan(tfjob(TF_CHIEF), {}, {}, NOW)
    assert result["create"] and result["create_retry_after"] == "10s"
    job, observed = created(tfjob(TF_CHIEF))
    assert plan(job, observed, {}, LATER)["create_retry_after"] == ""


@pytest.mark.parametrize(
    ("annotated_phase", "woken_at", "looks_again"),
    [
        ("Succeeded", "2026-11-23T10:00:20Z", True),  # woken 10 s ago; the cache shows Running
        ("Succeeded", "2026-11-23T09:59:00Z", False),  # 90 s ago: the cache is trusted now
        ("Running", "2026-11-23T10:00:20Z", False),  # the cache shows what woke the pass
        (None, None, False),  # never woken (the companion is off): nothing to compare
    ],
)
def test_a_pass_whose_pods_disagree_with_a_recent_wake_looks_again(annotated_phase, woken_at, looks_again):
    # After an API outage the runtime's cache re-lists pods only after its backoff: a pass woken
    # by "every pod Succeeded" still reads them Running, and no later event would come.
    job, observed = created(tfjob([("Worker", 2)]))
    pods = with_phases(observed["pods"], {})
    if annotated_phase:
        states = {p["metadata"]["name"]: (annotated_phase, 0, ()) for p in pods}
        job["metadata"]["annotations"] = {pod_signature.ANNOTATION: pod_signature.signature(states)}
        job["metadata"]["managedFields"] = [
            {"manager": "kubectl-client-side-apply", "operation": "Update", "time": "2026-11-23T10:00:29Z"},
            {"manager": pod_signature.WAKE_MANAGER, "operation": "Update", "time": woken_at},
        ]
    result = plan(job, {**observed, "pods": pods}, {}, LATER)
    assert state(result, job) == cond.RUNNING, "decided from what was read"
    assert result["requeue_after"] == (f"{pod_signature.FENCE_RETRY_SECONDS}s" if looks_again else "")


@pytest.mark.parametrize(
    ("case", "observed_generation", "keep"),
    [
        ("the same pods, not yet Succeeded in the cache", "a", 2),
        ("both pods replaced under their names (ExitCode)", "b", 2),
        ("one pod deleted by the pass (scale-down)", "a", 1),
    ],
)
def test_only_the_pods_the_wake_saw_can_be_behind_it(case, observed_generation, keep):
    job, observed = created(tfjob([("Worker", 2)]))
    woken = with_uids(with_phases(observed["pods"], {}), "a")
    states = {pod_signature.pod_key(p): ("Succeeded", 0, ()) for p in woken}
    job["metadata"]["annotations"] = {pod_signature.ANNOTATION: pod_signature.signature(states)}
    job["metadata"]["managedFields"] = [
        {"manager": pod_signature.WAKE_MANAGER, "operation": "Update", "time": "2026-11-23T10:00:25Z"}
    ]
    read = with_uids(with_phases(observed["pods"], {}), observed_generation)[:keep]
    looks_again = observed_generation == "a" and keep == 2
    result = plan(job, {**observed, "pods": read}, {}, LATER)
    assert (result["requeue_after"] == f"{pod_signature.FENCE_RETRY_SECONDS}s") == looks_again, case


# --- 11. zero replicas of the deciding role ---------------------------------------------------------------
def test_a_chief_with_zero_replicas_leaves_the_decision_to_worker_0():
    job, observed = created(tfjob([("Chief", 0), ("Worker", 2)]))
    running = plan(job, {**observed, "pods": with_phases(observed["pods"], {})}, {}, LATER)
    assert state(running, job) == cond.RUNNING
    done = plan(job, {**observed, "pods": with_phases(observed["pods"], {"job-worker-0": ok()})}, {}, LATER)
    assert state(done, job) == cond.SUCCEEDED


# --- 12. nothing escapes the engine --------------------------------------------------------------------------
def worker_container(**fields):
    return {
        "Worker": {"replicas": 1, "template": {"spec": {"containers": [{"name": "tensorflow", **fields}]}}}
    }


@pytest.mark.parametrize(
    ("case", "specs", "fragment"),
    [
        ("port as a word", worker_container(image="i", ports=[{"containerPort": "http"}]), "containerPort"),
        ("port out of range", worker_container(image="i", ports=[{"containerPort": 70000}]), "containerPort"),
        ("resources as a list", worker_container(image="i", resources=[{"cpu": 1}]), "resources"),
        ("limits as a list", worker_container(image="i", resources={"limits": ["gpu"]}), "resources"),
        ("env as a map", worker_container(image="i", env={"A": "1"}), "env"),
        ("containers as a map", {"Worker": {"template": {"spec": {"containers": {"a": 1}}}}}, "list"),
        ("template as a list", {"Worker": {"template": [1]}}, "pod template"),
        ("replicas as a word", {"Worker": {"replicas": "two", "template": {}}}, "whole number"),
    ],
)
def test_odd_input_fails_the_job_with_its_path(case, specs, fragment):
    result = plan(tfjob([]) | {"spec": {"tfReplicaSpecs": specs}}, {}, {}, NOW)
    last = result["status"]["conditions"][-1]
    assert last["type"] == cond.FAILED, case
    assert fragment in last["message"], case
    assert result["create"] == []


def test_a_malformed_time_in_the_status_is_set_again():
    job = tfjob(TF_CHIEF, runPolicy={"activeDeadlineSeconds": 60})
    job["status"] = {"startTime": "yesterday", "conditions": []}
    result = plan(job, {}, {}, NOW)
    assert result["status"]["startTime"] == NOW


def test_an_engine_bug_is_not_turned_into_a_job_failure(monkeypatch):
    from training_jobs.profiles.tensorflow import TensorFlowProfile

    def broken(*_args, **_kwargs):
        raise ValueError("a bug")

    monkeypatch.setattr(TensorFlowProfile, "outcome", broken)
    with pytest.raises(ValueError, match="a bug"):
        plan(tfjob(TF_CHIEF), {}, {}, NOW)


# --- 13. the contract's env wins ------------------------------------------------------------------------------
def test_the_contracts_env_wins_over_the_templates():
    job = tfjob([("Worker", 2)])
    container = job["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    container["env"] = [{"name": "TF_CONFIG", "value": "mine"}, {"name": "KEEP", "value": "1"}]
    (pod, *_) = [o for o in plan(job, {}, {}, NOW)["create"] if o["kind"] == "Pod"]
    env = pod["spec"]["containers"][0]["env"]
    assert [e["name"] for e in env].count("TF_CONFIG") == 1
    assert next(e for e in env if e["name"] == "TF_CONFIG")["value"] != "mine"
    assert {"name": "KEEP", "value": "1"} in env


def test_a_slow_kubelet_is_looked_at_every_30_s_not_in_a_loop():
    job, observed = created(tfjob([("Worker", 1)]))
    pods = with_phases(observed["pods"], {"job-worker-0": ("Running", None, True)})  # deleting at NOW
    for pod in pods:
        pod["spec"]["nodeName"] = "kwok-node-0"
    ready = {
        "metadata": {"name": "kwok-node-0"},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }
    result = plan(job, {**observed, "pods": pods, "nodes": [ready]}, {}, "2026-11-23T11:00:00Z")
    assert result["requeue_after"] == "30s"


# --- 15. messages upstream's tests assert verbatim -------------------------------------------------
MX_TRAIN = [("Scheduler", 1), ("Server", 1), ("Worker", 1)]


@pytest.mark.parametrize(
    ("case", "job", "phases", "ctype", "reason", "message"),
    [
        (
            "pod_test.go: Test Unretryable Exit Code",
            tfjob([("Worker", 1, "ExitCode")]),
            {"job-worker-0": failed(1)},
            cond.FAILED,
            "TFJobFailed",
            'job "job" is failing because "Worker" replica(s) failed.',
        ),
        (
            "pod.go ReconcilePods: Restarting",
            tfjob([("Chief", 1), ("Worker", 1, "ExitCode")]),
            {"job-worker-0": failed(130)},
            cond.RESTARTING,
            "TFJobRestarting",
            "job job is restarting because Worker replica(s) failed.",
        ),
        (
            "tfjob_controller_test.go: running",
            tfjob([("Worker", 1)]),
            {},
            cond.RUNNING,
            "TFJobRunning",
            "TFJob ns/job is running.",
        ),
        (
            "mxjob_controller_test.go: running",
            mxjob(MX_TRAIN),
            {},
            cond.RUNNING,
            "MXJobRunning",
            "MXJob job is running.",
        ),
        (
            "mxjob_controller.go: succeeded",
            mxjob(MX_TRAIN),
            {"job-scheduler-0": ok()},
            cond.SUCCEEDED,
            "MXJobSucceeded",
            "MXJob job is successfully completed.",
        ),
    ],
)
def test_upstream_messages_verbatim(case, job, phases, ctype, reason, message):
    job, observed = created(job)
    result = plan(job, {**observed, "pods": with_phases(observed["pods"], phases)}, {}, LATER)
    found = cond.find(result["status"]["conditions"], ctype)
    assert found and (found["reason"], found["message"]) == (reason, message), case
    assert cond.find(result["status"]["conditions"], cond.CREATED)["message"] in (
        "TFJob job is created.",
        "MXJob job is created.",
    )


def test_a_refused_status_fails_the_job_with_a_small_status():
    job, _observed = created(tfjob(TF_CHIEF))
    job["status"]["reportedPodProblems"] = ["x"] * 5
    result = refused_status_plan(job, {}, "status.reportedPodProblems: Too many", LATER)
    last = result["status"]["conditions"][-1]
    assert last["type"] == cond.FAILED and "refused its status" in last["message"]
    assert "reportedPodProblems" not in result["status"] and result["status"]["completionTime"] == LATER
    assert result["metrics"] == {"failed": 1}


# --- idle jobs: left to the companion until their pods or their spec change -------------------
WAKE_ON = {"wake": True, "poll_seconds": 0}


def idle_candidate(**meta):
    job, observed = created(tfjob([("Worker", 2)]))
    job["metadata"].update({"generation": 2, **meta})
    return job, {**observed, "pods": with_phases(observed["pods"], {})}


def test_a_running_job_with_nothing_pending_is_left_idle_under_its_generation():
    job, observed = idle_candidate()
    result = plan(job, observed, WAKE_ON, LATER)
    assert state(result, job) == cond.RUNNING
    planned_with = pod_signature.signature_of_pods(observed["pods"])
    assert result["idle"] == idle_value(job, planned_with) and result["idle"].startswith("2-")
    assert result["apply"], "the label is a write"


def test_the_idle_label_carries_the_pods_the_pass_planned_with():
    """The companion compares them with the pods it knows once the label lands (idle.parked_behind)."""
    job, observed = idle_candidate()
    label = plan(job, observed, WAKE_ON, LATER)["idle"]
    labelled = {**job, "metadata": {**job["metadata"], "labels": {IDLE_LABEL: label}}}
    assert parked_pods(labelled) == pods_digest(pod_signature.signature_of_pods(observed["pods"]))
    (pod, *_) = observed["pods"]
    other = {**observed, "pods": [{**pod, "status": {"phase": "Succeeded"}}, *observed["pods"][1:]]}
    other_label = plan(job, other, WAKE_ON, LATER)["idle"]
    assert other_label and other_label != label


@pytest.mark.parametrize(
    ("case", "config", "meta", "phases"),
    [
        ("the companion does not wake jobs (JOB_WAKE=false)", {"wake": False}, {}, {}),
        ("the config says nothing of wakes", {}, {}, {}),
        ("the wake arrives templated as a string", {"wake": "False"}, {}, {}),
        ("the job is polled", {**WAKE_ON, "poll_seconds": 3}, {}, {}),
        ("already idle (a pass queued before the label)", WAKE_ON, {"labels": {IDLE_LABEL: "2-x"}}, {}),
        ("a job without a generation", WAKE_ON, {"generation": None}, {}),
        ("the job finishes in this pass", WAKE_ON, {}, {"job-worker-0": ok(), "job-worker-1": ok()}),
        ("a failed pod is recreated", WAKE_ON, {}, {"job-worker-0": failed(1)}),
        ("a pod is still starting: its start is the next wake", WAKE_ON, {}, {"job-worker-1": pending()}),
    ],
)
def test_a_job_with_something_pending_or_nobody_to_bring_it_back_stays_watched(case, config, meta, phases):
    job, observed = idle_candidate(**meta)
    if phases:
        job["spec"]["tfReplicaSpecs"]["Worker"]["restartPolicy"] = "OnFailure"
        observed = {**observed, "pods": with_phases(observed["pods"], phases)}
    assert plan(job, observed, config, LATER)["idle"] == "", case


def test_a_job_whose_pod_cannot_start_is_left_idle():
    """A pod that waits on a problem (no node fits it) may wait for hours: the job is left idle,
    and a change of the problem wakes it."""
    job, observed = idle_candidate()
    (stuck, *_) = [p for p in observed["pods"] if p["metadata"]["name"] == "job-worker-1"]
    stuck["status"] = {
        "phase": "Pending",
        "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
    }
    planned_with = pod_signature.signature_of_pods(observed["pods"])
    assert plan(job, observed, WAKE_ON, LATER)["idle"] == idle_value(job, planned_with)


def test_a_job_that_asks_for_a_later_look_stays_watched():
    job, observed = idle_candidate()
    job["spec"]["runPolicy"] = {"activeDeadlineSeconds": 3600}
    result = plan(job, observed, WAKE_ON, LATER)
    assert result["requeue_after"] and result["idle"] == ""


def test_the_idle_label_says_the_generation_and_the_annotations():
    job, _ = idle_candidate()
    base = idle_value(job, "Running=2")
    edited = {**job, "metadata": {**job["metadata"], "generation": 3}}
    annotated = {**job, "metadata": {**job["metadata"], "annotations": {"note": "x"}}}
    woken = {**job, "metadata": {**job["metadata"], "annotations": {pod_signature.ANNOTATION: "Running=2"}}}
    assert len({base, idle_value(edited, "Running=2"), idle_value(annotated, "Running=2")}) == 3
    assert idle_value(woken, "Running=2") == base, "the wake annotation is not an edit"
