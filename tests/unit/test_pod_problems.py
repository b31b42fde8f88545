"""Pod problems on the job (``training_jobs.pod_problems``), as tables.

Upstream ``RecordAbnormalPods`` (training-operator ``pkg/core/job.go``) has no unit test in v1.9;
its rows here follow the code and issue #1131 ("Surface Pod and other Errors that Prevent TFJob
from starting": image pull errors, crash loops, unschedulable pods). ``ExitedWithCode`` keeps the
message of ``ReconcilePods`` (``pkg/controller.v1/common/pod.go``). ``lost_pod`` follows issue
#2072 (node lost, pod Terminating forever) and the API server's graceful deletion
(``deletionTimestamp`` = request time + grace period, ``rest/delete.go`` ``BeforeDelete``);
``evicted`` follows #1570 / PR #1572 and Kubernetes' ``DisruptionTarget`` pod condition.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from training_jobs.pod_problems import (
    NODE_GONE,
    NODE_NOT_READY,
    NODE_READY,
    abnormal_pod_events,
    evicted,
    exit_code_events,
    lost_pod,
    node_state,
    pod_key,
    prune_seen,
)

DEFAULT = "tensorflow"


def pod(name="job-worker-0", phase="Running", containers=None, init=None, conditions=None, **extra):
    status = {"phase": phase}
    if containers is not None:
        status["containerStatuses"] = containers
    if init is not None:
        status["initContainerStatuses"] = init
    if conditions is not None:
        status["conditions"] = conditions
    status.update(extra.pop("status", {}))
    meta = {"name": name, "namespace": "ns", "uid": f"uid-{name}"}
    meta.update(extra.pop("meta", {}))
    return {"metadata": meta, "spec": extra.pop("spec", {"nodeName": "node-1"}), "status": status}


def waiting(reason, message="", name=DEFAULT, last=None):
    s = {"name": name, "restartCount": 0, "state": {"waiting": {"reason": reason}}}
    if message:
        s["state"]["waiting"]["message"] = message
    if last:
        s["lastState"] = {"terminated": last}
    return s


def terminated(code, reason="", name=DEFAULT, message="", restarts=0):
    term = {"exitCode": code}
    if reason:
        term["reason"] = reason
    if message:
        term["message"] = message
    return {"name": name, "restartCount": restarts, "state": {"terminated": term}}


def running(name=DEFAULT):
    return {"name": name, "restartCount": 0, "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}


UNSCHEDULABLE = {
    "type": "PodScheduled",
    "status": "False",
    "reason": "Unschedulable",
    "message": "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.",
}


@pytest.mark.parametrize(
    ("case", "pods", "expected"),
    [
        (
            # #1131: the image cannot be pulled, the job just sits Created.
            "ImagePullBackOff",
            [
                pod(
                    phase="Pending",
                    containers=[waiting("ImagePullBackOff", 'Back-off pulling image "tf:nope"')],
                )
            ],
            [
                (
                    "ImagePullBackOff",
                    'Pod ns/job-worker-0 container tensorflow: ImagePullBackOff: Back-off pulling image "tf:nope"',
                )
            ],
        ),
        (
            "ErrImagePull",
            [pod(phase="Pending", containers=[waiting("ErrImagePull", "manifest unknown")])],
            [("ErrImagePull", "Pod ns/job-worker-0 container tensorflow: ErrImagePull: manifest unknown")],
        ),
        (
            # #1131: a crash loop, with what ended the last run (OOMKilled is only in lastState).
            "CrashLoopBackOff with the last termination",
            [
                pod(
                    containers=[
                        waiting(
                            "CrashLoopBackOff",
                            "back-off 40s restarting failed container=tensorflow",
                            last={"exitCode": 137, "reason": "OOMKilled"},
                        )
                    ]
                )
            ],
            [
                (
                    "CrashLoopBackOff",
                    "Pod ns/job-worker-0 container tensorflow: CrashLoopBackOff: back-off 40s restarting "
                    "failed container=tensorflow (last exit code 137, OOMKilled)",
                )
            ],
        ),
        (
            # paddle-operator PR #80: pods created before the ConfigMap they import.
            "CreateContainerConfigError",
            [
                pod(
                    phase="Pending",
                    containers=[
                        waiting("CreateContainerConfigError", 'configmap "wide" not found', "paddle")
                    ],
                )
            ],
            [
                (
                    "CreateContainerConfigError",
                    'Pod ns/job-worker-0 container paddle: CreateContainerConfigError: configmap "wide" not found',
                )
            ],
        ),
        (
            "a waiting reason without a message is still reported (upstream needed a message)",
            [pod(phase="Pending", containers=[waiting("InvalidImageName")])],
            [("InvalidImageName", "Pod ns/job-worker-0 container tensorflow: InvalidImageName")],
        ),
        (
            "ContainerCreating is just starting",
            [pod(phase="Pending", containers=[waiting("ContainerCreating")])],
            [],
        ),
        (
            "PodInitializing is just starting",
            [pod(phase="Pending", containers=[waiting("PodInitializing")])],
            [],
        ),
        (
            # RecordAbnormalPods: a terminated container with a non-zero exit in an active pod.
            "a sidecar exited non-zero in a Running pod",
            [pod(containers=[running(), terminated(1, "Error", "sidecar", "boom")])],
            [("Error", "Pod ns/job-worker-0 container sidecar: Error: exit code 1: boom")],
        ),
        (
            "a non-zero exit without a reason reads Error",
            [pod(containers=[terminated(2, name="sidecar")])],
            [("Error", "Pod ns/job-worker-0 container sidecar: Error: exit code 2")],
        ),
        (
            "a container that exited 0 in a Running pod is fine",
            [pod(containers=[running(), terminated(0, "Completed", "sidecar")])],
            [],
        ),
        (
            # Upstream skipped init containers once regular statuses exist (they always do, as
            # PodInitializing), hiding this crash loop.
            "a crash-looping init container",
            [
                pod(
                    phase="Pending",
                    init=[
                        waiting(
                            "CrashLoopBackOff",
                            "back-off 10s",
                            "fetch-data",
                            last={"exitCode": 1, "reason": "Error"},
                        )
                    ],
                    containers=[waiting("PodInitializing")],
                )
            ],
            [
                (
                    "CrashLoopBackOff",
                    "Pod ns/job-worker-0 container fetch-data: CrashLoopBackOff: back-off 10s (last exit code 1, Error)",
                )
            ],
        ),
        (
            "an init container that failed in a Pending pod",
            [
                pod(
                    phase="Pending",
                    init=[terminated(3, "Error", "fetch-data")],
                    containers=[waiting("PodInitializing")],
                )
            ],
            [("Error", "Pod ns/job-worker-0 container fetch-data: Error: exit code 3")],
        ),
        (
            # #1131 / #1282 (long pending pods): the scheduler's reason.
            "Unschedulable",
            [pod(phase="Pending", conditions=[UNSCHEDULABLE])],
            [
                (
                    "Unschedulable",
                    "Pod ns/job-worker-0: Unschedulable: 0/3 nodes are available: 3 Insufficient nvidia.com/gpu.",
                )
            ],
        ),
        (
            "scheduling gates (e.g. Kueue) are not a problem",
            [
                pod(
                    phase="Pending",
                    conditions=[{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}],
                )
            ],
            [],
        ),
        (
            # #1570: kubelet node-pressure eviction.
            "Evicted",
            [
                pod(
                    phase="Failed",
                    status={"reason": "Evicted", "message": "The node was low on resource: memory."},
                )
            ],
            [("Evicted", "Pod ns/job-worker-0: Evicted: The node was low on resource: memory.")],
        ),
        (
            "disrupted (preempted) while being deleted",
            [
                pod(
                    meta={"deletionTimestamp": "2026-01-01T00:00:30Z"},
                    conditions=[
                        {
                            "type": "DisruptionTarget",
                            "status": "True",
                            "reason": "PreemptionByScheduler",
                            "message": "Kubernetes Scheduler: preempting",
                        }
                    ],
                )
            ],
            [
                (
                    "Evicted",
                    "Pod ns/job-worker-0: Evicted: PreemptionByScheduler: Kubernetes Scheduler: preempting",
                )
            ],
        ),
        (
            "Succeeded and Failed pods are the status rules' business",
            [
                pod("a", phase="Succeeded", containers=[terminated(0, "Completed")]),
                pod("b", phase="Failed", containers=[terminated(1, "Error")]),
            ],
            [],
        ),
        (
            "a pod being deleted is not reported",
            [
                pod(
                    phase="Pending",
                    containers=[waiting("ErrImagePull")],
                    meta={"deletionTimestamp": "2026-01-01T00:00:00Z"},
                )
            ],
            [],
        ),
        (
            "two containers with the same problem: one event each",
            [
                pod(
                    phase="Pending",
                    containers=[waiting("ErrImagePull", name="a"), waiting("ErrImagePull", name="b")],
                )
            ],
            [
                ("ErrImagePull", "Pod ns/job-worker-0 container a: ErrImagePull"),
                ("ErrImagePull", "Pod ns/job-worker-0 container b: ErrImagePull"),
            ],
        ),
    ],
)
def test_abnormal_pod_events(case, pods, expected):
    events, added = abnormal_pod_events(pods, DEFAULT, set())
    assert [(e["reason"], e["message"]) for e in events] == expected, case
    assert all(e["type"] == "Warning" for e in events)
    assert len(added) == len(expected)


def test_each_problem_is_reported_once_not_every_pass():
    # Upstream records the same Warning on every reconcile; here the engine's seen keys stop it.
    pulling = pod(phase="Pending", containers=[waiting("ErrImagePull")])
    first, added = abnormal_pod_events([pulling], DEFAULT, set())
    assert [e["reason"] for e in first] == ["ErrImagePull"]
    assert added == {"uid-job-worker-0/tensorflow/ErrImagePull"}
    again, more = abnormal_pod_events([pulling], DEFAULT, added)
    assert again == [] and more == set()
    # The kubelet flips between ErrImagePull and ImagePullBackOff: each reason once.
    backoff = pod(phase="Pending", containers=[waiting("ImagePullBackOff")])
    flipped, more = abnormal_pod_events([backoff], DEFAULT, added)
    assert [e["reason"] for e in flipped] == ["ImagePullBackOff"]
    assert abnormal_pod_events([pulling, backoff], DEFAULT, added | more) == ([], set())
    # The recreated replica is a new pod (new uid): its problem is reported again.
    recreated = pod(phase="Pending", containers=[waiting("ErrImagePull")], meta={"uid": "uid-new"})
    assert len(abnormal_pod_events([recreated], DEFAULT, added | more)[0]) == 1


@pytest.mark.parametrize(
    ("case", "pods", "seen", "expected"),
    [
        (
            # pod.go ReconcilePods: "Pod: %v.%v exited with code %v", Normal.
            "a terminated default container",
            [pod(phase="Failed", containers=[terminated(137, "Error")])],
            set(),
            ["Pod: ns.job-worker-0 exited with code 137"],
        ),
        (
            "exit code 0 is reported too",
            [pod(phase="Succeeded", containers=[terminated(0, "Completed")])],
            set(),
            ["Pod: ns.job-worker-0 exited with code 0"],
        ),
        (
            "only the default container counts",
            [pod(phase="Running", containers=[running(), terminated(1, name="sidecar")])],
            set(),
            [],
        ),
        ("a running default container has no exit", [pod(containers=[running()])], set(), []),
        (
            "already reported",
            [pod(phase="Failed", containers=[terminated(1)])],
            {"uid-job-worker-0/tensorflow/ExitedWithCode/0"},
            [],
        ),
        (
            "an in-place restart's exit is a new exit",
            [pod(containers=[terminated(1, restarts=1)])],
            {"uid-job-worker-0/tensorflow/ExitedWithCode/0"},
            ["Pod: ns.job-worker-0 exited with code 1"],
        ),
    ],
)
def test_exit_code_events(case, pods, seen, expected):
    events, added = exit_code_events(pods, DEFAULT, seen)
    assert [e["message"] for e in events] == expected, case
    assert all(e["type"] == "Normal" and e["reason"] == "ExitedWithCode" for e in events)
    assert len(added) == len(expected)
    assert not added & seen


# Deleted at 10:00:00 with the default 30 s grace period: the API server stores 10:00:30.
DELETING = {"deletionTimestamp": "2026-11-23T10:00:30Z", "deletionGracePeriodSeconds": 30}


@pytest.mark.parametrize(
    ("case", "the_pod", "now", "node", "lost"),
    [
        ("a healthy running pod on a NotReady node", pod(), "2026-11-23T12:00:00Z", NODE_NOT_READY, False),
        (
            "Terminating within its grace period, node NotReady",
            pod(meta=DELETING),
            "2026-11-23T10:00:20Z",
            NODE_NOT_READY,
            False,
        ),
        # deletionTimestamp already includes deletionGracePeriodSeconds: +60 s extra, not +90.
        (
            "Terminating, within the extra 60 s",
            pod(meta=DELETING),
            "2026-11-23T10:01:30Z",
            NODE_NOT_READY,
            False,
        ),
        (
            "#2072: Terminating past deletionTimestamp + 60 s on a NotReady node",
            pod(meta=DELETING),
            "2026-11-23T10:01:31Z",
            NODE_NOT_READY,
            True,
        ),
        (
            "a datetime clock works too",
            pod(meta=DELETING),
            datetime(2026, 11, 23, 11, 0, tzinfo=UTC),
            NODE_NOT_READY,
            True,
        ),
        # Time alone never decides: the kubelet of a Ready node is still stopping the pod.
        (
            "Terminating for an hour on a Ready node",
            pod(meta=DELETING),
            "2026-11-23T11:00:00Z",
            NODE_READY,
            False,
        ),
        ("nodes not read: nothing is decided", pod(meta=DELETING), "2026-11-23T11:00:00Z", None, False),
        ("its node object is gone", pod(), "2026-11-23T10:00:00Z", NODE_GONE, True),
        ("Terminating on a node that is gone", pod(meta=DELETING), "2026-11-23T10:00:00Z", NODE_GONE, True),
        (
            "Pending and bound to a node that is gone",
            pod(phase="Pending"),
            "2026-11-23T10:00:00Z",
            NODE_GONE,
            True,
        ),
        (
            "not yet bound: no node to lose",
            pod(phase="Pending", spec={}),
            "2026-11-23T10:00:00Z",
            NODE_GONE,
            False,
        ),
        (
            "a finished pod on a gone node is not lost",
            pod(phase="Succeeded"),
            "2026-11-23T10:00:00Z",
            NODE_GONE,
            False,
        ),
    ],
)
def test_lost_pod(case, the_pod, now, node, lost):
    assert lost_pod(the_pod, now, 60, node) is lost, case


@pytest.mark.parametrize(
    ("node", "state"),
    [
        (None, NODE_GONE),
        ({"status": {"conditions": [{"type": "Ready", "status": "True"}]}}, NODE_READY),
        ({"status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}}, NODE_NOT_READY),
        ({"status": {}}, NODE_NOT_READY),
    ],
)
def test_node_state(node, state):
    assert node_state(node) == state


@pytest.mark.parametrize(
    ("case", "the_pod", "expected"),
    [
        ("#1570: kubelet eviction", pod(phase="Failed", status={"reason": "Evicted"}), True),
        (
            "a training failure is not an eviction",
            pod(phase="Failed", containers=[terminated(1, "Error")]),
            False,
        ),
        (
            "node shutdown (DisruptionTarget, TerminationByKubelet)",
            pod(
                phase="Failed",
                conditions=[{"type": "DisruptionTarget", "status": "True", "reason": "TerminationByKubelet"}],
            ),
            True,
        ),
        (
            "preemption of a running pod",
            pod(
                conditions=[{"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}]
            ),
            True,
        ),
        ("DisruptionTarget False", pod(conditions=[{"type": "DisruptionTarget", "status": "False"}]), False),
        ("a running pod", pod(), False),
    ],
)
def test_evicted(case, the_pod, expected):
    assert evicted(the_pod) is expected, case


def test_prune_seen_keeps_only_keys_of_existing_pods():
    alive = pod("job-worker-0")
    seen = {
        pod_key(alive, DEFAULT, "ErrImagePull"),
        pod_key(alive, "", "Unschedulable"),
        "uid-gone/tensorflow/CrashLoopBackOff",
        "uid-gone/tensorflow/ExitedWithCode/3",
    }
    assert prune_seen(seen, [alive]) == {
        "uid-job-worker-0/tensorflow/ErrImagePull",
        "uid-job-worker-0/-/Unschedulable",
    }


def test_long_messages_are_cut_for_the_event_api():
    huge = pod(phase="Pending", containers=[waiting("ErrImagePull", "x" * 5000)])
    (event,), _ = abnormal_pod_events([huge], DEFAULT, set())
    assert len(event["message"]) == 1000 and event["message"].endswith("...")
