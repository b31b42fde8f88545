"""Run policy in the engine: deadline, backoff, suspend/resume, clean-pod policy, TTL, bad input.

Rows follow training-operator's ``job_test.go`` cases and the fixes of its known bugs
(#3358 deadline requeue, #2045 backoff counting recreations, #3419 Failed before cleanup).
"""

from __future__ import annotations

import copy

import pytest
from test_plan_status import (
    LATER,
    NOW,
    TF_CHIEF,
    created,
    failed,
    mxjob,
    ok,
    paddlejob,
    pending,
    tfjob,
    with_phases,
)
from training_jobs import conditions as cond
from training_jobs.plan import observe_args, plan, rejected_plan


def deleted_pods(result):
    return sorted(r["name"] for r in result["delete"] if r["kind"] == "Pod")


def running_job(job, phases=None, now=LATER):
    job, observed = created(job)
    observed = {**observed, "pods": with_phases(observed["pods"], phases or {})}
    return job, observed, plan(job, observed, {}, now)


def test_deadline_fires_and_requeues_for_it_before():
    job = tfjob(TF_CHIEF, runPolicy={"activeDeadlineSeconds": 60})
    job, observed, result = running_job(job)
    # 30 s after start: still running, and the next look is no later than the deadline.
    assert cond.current_state(result["status"]["conditions"]) == cond.RUNNING
    assert int(result["requeue_after"].rstrip("s")) <= 30
    job["status"] = result["status"]
    late = plan(job, observed, {}, "2026-11-23T10:01:01Z")
    last = late["status"]["conditions"][-1]
    assert last["type"] == cond.FAILED and "deadline" in last["message"]
    # cleanPodPolicy None (TF default) keeps the pods even after a deadline failure (#3419).
    assert deleted_pods(late) == []


def test_deadline_failure_applies_clean_pod_policy_all():
    job = tfjob(TF_CHIEF, runPolicy={"activeDeadlineSeconds": 10, "cleanPodPolicy": "All"})
    job, _observed, result = running_job(job, now="2026-11-23T10:00:11Z")
    assert cond.current_state(result["status"]["conditions"]) == cond.FAILED
    assert deleted_pods(result) == ["job-chief-0", "job-ps-0", "job-worker-0", "job-worker-1"]


def test_backoff_limit_counts_exit_code_recreations():
    job = tfjob([("Chief", 1), ("Worker", 1, "ExitCode")], runPolicy={"backoffLimit": 2})
    job, observed, result = running_job(job, {"job-worker-0": failed(137)})
    assert cond.current_state(result["status"]["conditions"]) == cond.RESTARTING
    assert result["status"]["restartCount"] == 1
    # The replacement (a new pod, a new uid) fails again: the second restart reaches backoffLimit 2.
    job["status"] = result["status"]
    observed["pods"] = with_phases(observed["pods"], {"job-worker-0": failed(137)})
    for pod in observed["pods"]:
        pod["metadata"]["uid"] = "replacement-" + pod["metadata"]["name"]
    again = plan(job, observed, {}, "2026-11-23T10:00:40Z")
    last = again["status"]["conditions"][-1]
    assert last["type"] == cond.FAILED and "backoff limit" in last["message"]


def test_backoff_limit_counts_in_place_container_restarts():
    job = tfjob([("Chief", 1), ("Worker", 1, "OnFailure")], runPolicy={"backoffLimit": 2})
    job, observed = created(job)
    pods = with_phases(observed["pods"], {})
    for p in pods:
        p["status"]["containerStatuses"] = [
            {"name": "tensorflow", "restartCount": 3, "state": {"running": {}}}
        ]
    result = plan(job, {**observed, "pods": pods}, {}, LATER)
    assert cond.current_state(result["status"]["conditions"]) == cond.FAILED


def test_suspend_removes_pods_and_services_and_resume_resets_start_time():
    job, observed, result = running_job(tfjob(TF_CHIEF))
    job["status"] = result["status"]
    job["spec"]["runPolicy"] = {"suspend": True}
    suspended = plan(job, observed, {}, "2026-11-23T10:01:00Z")
    conds = suspended["status"]["conditions"]
    assert cond.current_state(conds) == cond.SUSPENDED
    assert cond.find(conds, cond.RUNNING)["status"] == cond.FALSE
    assert len(deleted_pods(suspended)) == 4
    assert len([r for r in suspended["delete"] if r["kind"] == "Service"]) == 4
    assert suspended["requeue_after"] == ""
    job["status"] = suspended["status"]
    job["spec"]["runPolicy"] = {"suspend": False}
    resumed = plan(job, {"pods": [], "services": []}, {}, "2026-11-23T10:02:00Z")
    assert cond.find(resumed["status"]["conditions"], cond.SUSPENDED)["status"] == cond.FALSE
    assert resumed["status"]["startTime"] == "2026-11-23T10:02:00Z"
    assert len([o for o in resumed["create"] if o["kind"] == "Pod"]) == 4


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        ("None", []),
        ("Running", ["job-ps-0", "job-worker-0", "job-worker-1"]),
        ("All", ["job-chief-0", "job-ps-0", "job-worker-0", "job-worker-1"]),
    ],
)
def test_clean_pod_policy_when_finished(policy, expected):
    job = tfjob(TF_CHIEF, runPolicy={"cleanPodPolicy": policy})
    _, _, result = running_job(job, {"job-chief-0": ok()})
    assert cond.current_state(result["status"]["conditions"]) == cond.SUCCEEDED
    assert deleted_pods(result) == expected
    assert result["create"] == []


@pytest.mark.parametrize(
    ("policy", "outcome", "cleans"),
    [
        ("OnCompletion", "ok", True),
        ("OnCompletion", "fail", False),
        ("OnFailure", "fail", True),
        ("OnFailure", "ok", False),
        ("Always", "ok", True),
        ("Never", "fail", False),
    ],
)
def test_paddle_clean_pod_policies(policy, outcome, cleans):
    job = paddlejob([("worker", 2, "Never")], cleanPodPolicy=policy)
    phases = {"job-worker-0": ok(), "job-worker-1": ok()} if outcome == "ok" else {"job-worker-1": failed()}
    _, _, result = running_job(job, phases)
    assert cond.is_finished(result["status"]["conditions"])
    assert bool(deleted_pods(result)) == cleans


def test_ttl_deletes_the_job_on_time():
    job = tfjob(TF_CHIEF, runPolicy={"ttlSecondsAfterFinished": 60})
    job, observed, result = running_job(job, {"job-chief-0": ok()})
    assert result["requeue_after"] == "60s"
    job["status"] = result["status"]
    early = plan(job, observed, {}, "2026-11-23T10:01:00Z")
    assert early["delete_job"] is False and early["requeue_after"] == "30s"
    late = plan(job, observed, {}, "2026-11-23T10:01:31Z")
    assert late["delete_job"] is True


def test_finished_job_never_changes_state():
    job, observed, result = running_job(tfjob(TF_CHIEF), {"job-chief-0": ok()})
    job["status"] = result["status"]
    observed["pods"] = with_phases(observed["pods"], {"job-chief-0": ok(), "job-worker-0": failed()})
    later = plan(job, observed, {}, "2026-11-23T10:05:00Z")
    conds = (later["status"] or job["status"])["conditions"]
    assert cond.current_state(conds) == cond.SUCCEEDED
    assert not cond.is_true(conds, cond.FAILED)


@pytest.mark.parametrize(
    ("mutate", "fragment"),
    [
        (lambda s: s["tfReplicaSpecs"]["Worker"]["template"]["spec"].update(containers=[]), "no containers"),
        (
            lambda s: s["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0].update(name="main"),
            "tensorflow",
        ),
        (
            lambda s: s["tfReplicaSpecs"].update(Master=copy.deepcopy(s["tfReplicaSpecs"]["Chief"])),
            "Chief or Master",
        ),
        (
            lambda s: s["tfReplicaSpecs"].update(Launcher=copy.deepcopy(s["tfReplicaSpecs"]["PS"])),
            "unknown replica type",
        ),
        (lambda s: s["tfReplicaSpecs"]["PS"].update(restartPolicy="Sometimes"), "restartPolicy"),
    ],
)
def test_invalid_spec_fails_the_job_and_creates_nothing(mutate, fragment):
    job = tfjob(TF_CHIEF)
    mutate(job["spec"])
    result = plan(job, {"pods": [], "services": []}, {}, NOW)
    assert result["create"] == []
    last = result["status"]["conditions"][-1]
    assert last["type"] == cond.FAILED and last["reason"] == "TFJobFailedValidation"
    assert fragment in last["message"]
    assert result["requeue_after"] == ""


def test_rejected_objects_fail_the_job_and_remove_what_was_created():
    job = tfjob(TF_CHIEF)
    first = plan(job, {"pods": [], "services": []}, {}, NOW)
    rejected = [
        {
            "kind": "Pod",
            "name": "job-worker-1",
            "status": 422,
            "message": "spec.containers[0].image: Required",
        }
    ]
    result = rejected_plan(job, first, rejected, NOW)
    last = result["status"]["conditions"][-1]
    assert last["type"] == cond.FAILED and "job-worker-1" in last["message"] and "image" in last["message"]
    assert len(result["delete"]) == len(first["create"])


def test_created_objects_are_owned_by_the_job_as_controller():
    _, observed = created(tfjob(TF_CHIEF))
    for obj in observed["pods"] + observed["services"]:
        (ref,) = obj["metadata"]["ownerReferences"]
        assert ref == {
            "apiVersion": "kubeflow.org/v1",
            "kind": "TFJob",
            "name": "job",
            "uid": "uid-1",
            "controller": True,
            "blockOwnerDeletion": True,
        }


def test_scale_down_deletes_extra_replicas():
    job, observed, result = running_job(tfjob(TF_CHIEF))
    job["status"] = result["status"]
    job["spec"]["tfReplicaSpecs"]["Worker"]["replicas"] = 1
    smaller = plan(job, observed, {}, "2026-11-23T10:00:40Z")
    assert deleted_pods(smaller) == ["job-worker-1"]
    assert any(r["kind"] == "Service" and r["name"] == "job-worker-1" for r in smaller["delete"])


def test_pods_get_user_template_but_operator_labels_and_restart_policy():
    job = tfjob([("Chief", 1, "ExitCode"), ("Worker", 1)])
    tmpl = job["spec"]["tfReplicaSpecs"]["Chief"]["template"]
    tmpl["metadata"] = {"labels": {"team": "ml", "training.kubeflow.org/job-name": "spoofed"}}
    tmpl["spec"]["restartPolicy"] = "Always"
    _, observed = created(job)
    chief = next(p for p in observed["pods"] if p["metadata"]["name"] == "job-chief-0")
    assert chief["metadata"]["labels"]["team"] == "ml"
    assert chief["metadata"]["labels"]["training.kubeflow.org/job-name"] == "job"
    assert chief["metadata"]["labels"]["training.kubeflow.org/job-role"] == "master"
    # ExitCode is enforced by the operator: the kubelet must not restart the container itself.
    assert chief["spec"]["restartPolicy"] == "Never"


def test_accelerators_config_mounts_host_libraries_into_gpu_containers():
    config = {
        "accelerators": {
            "nvidia.com/gpu": {
                "volumes": [
                    {
                        "name": "nvidia-libs",
                        "hostPath": "/usr/lib/nvidia",
                        "mountPath": "/usr/local/nvidia/lib64",
                    }
                ],
                "envVars": [{"name": "LD_LIBRARY_PATH", "value": "/usr/local/nvidia/lib64"}],
            }
        }
    }
    job = tfjob([("Chief", 1), ("Worker", 1)])
    job["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["resources"] = {
        "limits": {"nvidia.com/gpu": 1}
    }
    pods = {p["metadata"]["name"]: p for p in plan(job, {}, config, NOW)["create"] if p["kind"] == "Pod"}
    worker, chief = pods["job-worker-0"]["spec"], pods["job-chief-0"]["spec"]
    assert worker["volumes"] == [{"name": "nvidia-libs", "hostPath": {"path": "/usr/lib/nvidia"}}]
    assert {"name": "nvidia-libs", "mountPath": "/usr/local/nvidia/lib64"} in worker["containers"][0][
        "volumeMounts"
    ]
    assert {"name": "LD_LIBRARY_PATH", "value": "/usr/local/nvidia/lib64"} in worker["containers"][0]["env"]
    assert "volumes" not in chief, "containers without the resource are left alone"


def test_paddle_configmap_comes_before_pods_in_service_mode():
    job = paddlejob([("ps", 1), ("worker", 2)])
    first = plan(job, {}, {}, NOW)
    kinds = [o["kind"] for o in first["create"]]
    assert "Pod" not in kinds and kinds.count("ConfigMap") == 1 and kinds.count("Service") == 3
    data = first["create"][0]["data"]
    assert data["PADDLE_TRAINER_ENDPOINTS"] == "job-worker-0:36000,job-worker-1:36000"
    assert data["PADDLE_PSERVERS_IP_PORT_LIST"] == "job-ps-0:36000"


def test_paddle_configmap_waits_for_pod_addresses_in_podip_mode():
    job = paddlejob([("ps", 1), ("worker", 1)], intranet="PodIP")
    first = plan(job, {}, {}, NOW)
    assert "ConfigMap" not in [o["kind"] for o in first["create"]]
    pods = with_phases([o for o in first["create"] if o["kind"] == "Pod"], {})
    for i, p in enumerate(pods):
        p["status"]["podIP"] = f"127.1.0.{i + 1}"
        env_from = p["spec"]["containers"][0]["envFrom"]
        assert env_from == [{"configMapRef": {"name": "job"}}], "containers wait for the ConfigMap"
    second = plan(job, {"pods": pods}, {}, LATER)
    (cm,) = [o for o in second["create"] if o["kind"] == "ConfigMap"]
    port = cm["data"]["PADDLE_PORT"]
    assert cm["data"]["PADDLE_PSERVERS_IP_PORT_LIST"] == f"127.1.0.1:{port}"


def test_plan_keys_are_safe_in_jinja():
    # Jinja resolves plan.update to dict.update before the "update" key: no key may be a dict method.
    result = plan(tfjob(TF_CHIEF), {}, {}, NOW)
    assert not set(result) & set(dir(dict))


VOLCANO = {"gang_scheduler": "volcano"}


def test_volcano_gang_waits_for_an_admitted_pod_group():
    job = tfjob(TF_CHIEF)
    first = plan(job, {}, VOLCANO, NOW)
    kinds = [o["kind"] for o in first["create"]]
    assert "PodGroup" in kinds and "Pod" not in kinds, "no pod before Volcano admits the gang (#1630)"
    (pg,) = [o for o in first["create"] if o["kind"] == "PodGroup"]
    assert pg["spec"]["minMember"] == 4 and pg["spec"]["queue"] == "default"
    assert first["status"]["lastReconcileTime"] == NOW
    assert any(e["reason"] == "PodGroupPending" for e in first["events"])
    assert first["status"]["podGroupPendingMessage"] == "waiting for the Volcano PodGroup to be created"
    job["status"] = first["status"]
    pending = {**pg, "status": {"phase": "Pending"}}
    still = plan(job, {"podgroups": [pending]}, VOLCANO, LATER)
    assert not [o for o in still["create"] if o["kind"] == "Pod"]
    admitted = {**pg, "status": {"phase": "Inqueue"}}
    go = plan(job, {"podgroups": [admitted]}, VOLCANO, LATER)
    pods = [o for o in go["create"] if o["kind"] == "Pod"]
    assert len(pods) == 4
    assert go["status"]["podGroupPendingMessage"] is None, "the hold is over: removed (merge patch)"
    job["status"] = {k: v for k, v in go["status"].items() if v is not None}
    after = plan(job, {"podgroups": [admitted]}, VOLCANO, LATER)["status"] or {}
    assert "podGroupPendingMessage" not in after, "and not written again"
    for p in pods:
        assert p["spec"]["schedulerName"] == "volcano"
        assert p["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == "job"


def pending_events(result):
    return [e["message"] for e in result["events"] if e["reason"] == "PodGroupPending"]


def test_volcano_gang_held_says_why_once_per_reason():
    """A gang Volcano never admits (its minResources exceed the queue) is not silent: each new
    reason is an event, kept in the status; the same reason on the next poll is not repeated."""
    job = tfjob(TF_CHIEF, runPolicy={"schedulingPolicy": {"minResources": {"cpu": "1000"}}})
    first = plan(job, {}, VOLCANO, NOW)
    (pg,) = [o for o in first["create"] if o["kind"] == "PodGroup"]
    job["status"] = first["status"]
    unschedulable = {
        "type": "Unschedulable",
        "reason": "NotEnoughResources",
        "message": "0/0 tasks in gang unschedulable: pod group is not ready, 4 minAvailable",
        "lastTransitionTime": LATER,
    }
    pending = {**pg, "status": {"phase": "Pending", "conditions": [unschedulable]}}
    second = plan(job, {"podgroups": [pending]}, VOLCANO, LATER)
    (why,) = pending_events(second)
    assert "minResources cpu 1k" in why and why.endswith(unschedulable["message"])
    assert second["status"]["podGroupPendingMessage"] == why
    job["status"] = second["status"]
    assert pending_events(plan(job, {"podgroups": [pending]}, VOLCANO, LATER)) == []


@pytest.mark.parametrize("scheduler", ["volcano", "scheduler-plugins-scheduler"])
def test_a_job_suspended_at_creation_creates_nothing_with_gang_scheduling(scheduler):
    """Kueue suspends a job in its create: no pod, Service or PodGroup until it is unsuspended."""
    job = tfjob(TF_CHIEF, runPolicy={"suspend": True})
    first = plan(job, {}, {"gang_scheduler": scheduler}, NOW)
    assert first["create"] == [] and first["delete"] == []
    assert cond.current_state(first["status"]["conditions"]) == cond.SUSPENDED
    assert "startTime" not in first["status"]


def test_scheduler_plugins_gang_labels_pods_and_does_not_wait():
    config = {"gang_scheduler": "scheduler-plugins-scheduler"}
    job = tfjob(TF_CHIEF, runPolicy={"schedulingPolicy": {"minAvailable": 3}})
    first = plan(job, {}, config, NOW)
    (pg,) = [o for o in first["create"] if o["kind"] == "PodGroup"]
    assert pg["apiVersion"] == "scheduling.x-k8s.io/v1alpha1" and pg["spec"]["minMember"] == 3
    pods = [o for o in first["create"] if o["kind"] == "Pod"]
    assert len(pods) == 4
    assert all(p["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] == "job" for p in pods)
    assert all(p["spec"]["schedulerName"] == "scheduler-plugins-scheduler" for p in pods)


def test_pod_group_is_deleted_when_the_job_finishes():
    job, observed = created(tfjob(TF_CHIEF))
    pg = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "job", "namespace": "ns"},
        "status": {"phase": "Running"},
    }
    observed = {**observed, "pods": with_phases(observed["pods"], {"job-chief-0": ok()}), "podgroups": [pg]}
    result = plan(job, observed, VOLCANO, LATER)
    assert cond.current_state(result["status"]["conditions"]) == cond.SUCCEEDED
    assert {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "name": "job",
        "namespace": "ns",
    } in result["delete"]


def test_pod_problems_are_reported_once():
    job, observed = created(tfjob(TF_CHIEF))
    pods = with_phases(observed["pods"], {"job-ps-0": ("Pending", None, False)})
    ps = next(p for p in pods if p["metadata"]["name"] == "job-ps-0")
    ps["metadata"]["uid"] = "ps-uid"
    ps["status"]["containerStatuses"] = [
        {
            "name": "tensorflow",
            "state": {"waiting": {"reason": "ImagePullBackOff", "message": "no such image"}},
        }
    ]
    first = plan(job, {**observed, "pods": pods}, {}, LATER)
    assert [e["reason"] for e in first["events"]].count("ImagePullBackOff") == 1
    job["status"] = first["status"]
    again = plan(job, {**observed, "pods": pods}, {}, "2026-11-23T10:01:00Z")
    assert "ImagePullBackOff" not in [e["reason"] for e in again["events"]]


def node(name, ready):
    return {"metadata": {"name": name}, "status": {"conditions": [{"type": "Ready", "status": ready}]}}


@pytest.mark.parametrize(
    ("nodes", "now", "forced"),
    [
        ([node("kwok-node-0", "False")], "2026-11-23T10:00:10Z", False),  # within grace
        ([node("kwok-node-0", "False")], "2026-11-23T10:01:00Z", True),  # NotReady, past grace
        ([], "2026-11-23T10:00:10Z", True),  # its node is gone: at once
        ([node("kwok-node-0", "True")], "2026-11-23T11:00:00Z", False),  # Ready: never on time alone
        (None, "2026-11-23T11:00:00Z", False),  # nodes not read
    ],
)
def test_stuck_terminating_pod_is_force_deleted_only_when_its_node_is_lost(nodes, now, forced):
    job, observed = created(tfjob(TF_CHIEF))
    pods = with_phases(observed["pods"], {"job-worker-0": ("Running", None, True)})
    for pod in pods:
        pod["spec"]["nodeName"] = "kwok-node-0"
    seen = {**observed, "pods": pods}
    if nodes is not None:
        seen["nodes"] = nodes
    result = plan(job, seen, {}, now)
    force = {"apiVersion": "v1", "kind": "Pod", "name": "job-worker-0", "namespace": "ns", "force": True}
    assert (force in result["delete"]) is forced


def test_evicted_pod_is_recreated_even_under_never():
    job, observed = created(tfjob([("Chief", 1), ("Worker", 1, "Never")]))
    pods = with_phases(observed["pods"], {"job-worker-0": ("Failed", None, False)})
    next(p for p in pods if p["metadata"]["name"] == "job-worker-0")["status"]["reason"] = "Evicted"
    result = plan(job, {**observed, "pods": pods}, {}, LATER)
    assert cond.current_state(result["status"]["conditions"]) == cond.RESTARTING
    assert any(r["name"] == "job-worker-0" for r in result["delete"])
    assert "restartCount" not in result["status"], "an eviction is not a training failure"


def test_tensorboard_is_opt_in_and_reads_the_jobs_log_volume():
    job = tfjob(TF_CHIEF)
    assert not [o for o in plan(job, {}, {}, NOW)["create"] if o["kind"] == "Deployment"]
    job["metadata"]["annotations"] = {"training.ato.dev/tensorboard-log-dir": "/train/logs/run1"}
    chief = job["spec"]["tfReplicaSpecs"]["Chief"]["template"]["spec"]
    chief["volumes"] = [{"name": "train", "persistentVolumeClaim": {"claimName": "train-pvc"}}]
    chief["containers"][0]["volumeMounts"] = [{"name": "train", "mountPath": "/train"}]
    result = plan(job, {}, {}, NOW)
    (dep,) = [o for o in result["create"] if o["kind"] == "Deployment"]
    assert dep["metadata"]["name"] == "job-tensorboard"
    assert dep["metadata"]["ownerReferences"][0]["controller"] is True
    pod = dep["spec"]["template"]["spec"]
    assert pod["volumes"] == [{"name": "train", "persistentVolumeClaim": {"claimName": "train-pvc"}}]
    assert pod["containers"][0]["volumeMounts"] == [
        {"name": "train", "mountPath": "/train", "readOnly": True}
    ]
    assert "/train/logs/run1" in pod["containers"][0]["command"]
    assert "training.kubeflow.org/job-name" not in dep["spec"]["template"]["metadata"]["labels"]
    assert any(
        o["kind"] == "Service" and o["metadata"]["name"] == "job-tensorboard" for o in result["create"]
    )


def test_tensorboard_log_dir_must_be_on_a_volume():
    job = tfjob(TF_CHIEF)
    job["metadata"]["annotations"] = {"training.ato.dev/tensorboard-log-dir": "/tmp/logs"}
    last = plan(job, {}, {}, NOW)["status"]["conditions"][-1]
    assert last["type"] == cond.FAILED and "tensorboard-log-dir" in last["message"]


def test_only_kinds_the_framework_creates_are_read():
    # Each kind read starts a cluster-wide informer in the runtime's proxy.
    tf_kinds = [k["kind"] for k in observe_args(tfjob(TF_CHIEF))["kinds"]]
    paddle_kinds = [k["kind"] for k in observe_args(paddlejob([("worker", 1)]))["kinds"]]
    assert tf_kinds == ["Pod", "Service"]
    assert paddle_kinds == ["Pod", "Service", "ConfigMap"]


MX_TRAIN = [("Scheduler", 1), ("Server", 1), ("Worker", 2)]


@pytest.mark.parametrize(
    ("scheduler_policy", "code", "state", "recreated"),
    [
        # seed 002: the scheduler's exit code decides the job when no restartPolicy is set.
        (None, 0, cond.SUCCEEDED, False),
        (None, 1, cond.FAILED, False),
        (None, 127, cond.FAILED, False),
        (None, 128, cond.RESTARTING, True),
        (None, 137, cond.RESTARTING, True),
        # an explicit policy on the scheduler wins (training-operator v1 users set one).
        ("Never", 137, cond.FAILED, False),
        ("OnFailure", 1, cond.RESTARTING, True),
    ],
)
def test_mxjob_scheduler_exit_code_semantics(scheduler_policy, code, state, recreated):
    types = [("Scheduler", 1, scheduler_policy) if scheduler_policy else ("Scheduler", 1), *MX_TRAIN[1:]]
    phases = {"job-scheduler-0": ok() if code == 0 else failed(code)}
    _, _, result = running_job(mxjob(types), phases)
    assert cond.current_state(result["status"]["conditions"]) == state
    assert ("job-scheduler-0" in deleted_pods(result)) == recreated


def test_mxjob_scheduler_pod_runs_with_never_under_exit_code():
    _job, observed = created(mxjob(MX_TRAIN))
    scheduler = next(p for p in observed["pods"] if p["metadata"]["name"] == "job-scheduler-0")
    assert scheduler["spec"]["restartPolicy"] == "Never"


def requeue_seconds(result):
    return int(result["requeue_after"].rstrip("s") or 0)


@pytest.mark.parametrize(
    ("name", "result", "seconds"),
    [
        # an active job with nothing pending is not polled: pod changes wake it
        ("running", lambda: running_job(tfjob(TF_CHIEF))[2], 0),
        # unless the operator is told to poll (JOB_POLL_SECONDS, e.g. without the companion)
        (
            "polled",
            lambda: plan(
                created(tfjob(TF_CHIEF))[0], created(tfjob(TF_CHIEF))[1], {"poll_seconds": 3}, LATER
            ),
            3,
        ),
        # a failed pod deleted to be recreated: nothing reconciles the job when it is gone
        (
            "recreating",
            lambda: running_job(
                tfjob([("Chief", 1), ("Worker", 1, "OnFailure")]), {"job-worker-0": failed(1)}
            )[2],
            2,
        ),
        # PaddleJob's config map first: its creation reconciles nothing
        (
            "waiting for config map",
            lambda: plan(
                paddlejob([("worker", 2)], intranet="Service"), {"pods": [], "services": []}, {}, NOW
            ),
            2,
        ),
    ],
)
def test_requeue_when_nothing_else_will_reconcile(name, result, seconds):
    assert requeue_seconds(result()) == seconds, name


def test_terminating_pod_is_looked_at_when_its_grace_period_ends():
    job, observed = created(tfjob([("Chief", 1), ("Worker", 1)]))
    # (A Running pod being deleted counts as failed, as upstream; a Pending one does not.)
    pods = with_phases(observed["pods"], {"job-worker-0": pending()})
    for p in pods:
        if p["metadata"]["name"] == "job-worker-0":
            p["metadata"]["deletionTimestamp"] = "2026-11-23T10:00:40Z"  # 10 s after LATER
    result = plan(job, {**observed, "pods": pods}, {}, LATER)
    assert requeue_seconds(result) == 11
