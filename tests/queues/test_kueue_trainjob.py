"""Kueue v0.19.2 (its real manager, hack/kueue.sh up, framework ``trainer.kubeflow.org/trainjob``)
queues the operator's TrainJobs on a real JobSet (hack/jobset.sh up). Kueue's webhook suspends a
queued TrainJob at its creation and adds a ``runtimePatches`` entry of its own (manager
``kueue.x-k8s.io/manager``); at admission it fills that entry with the flavor's nodeSelector and
tolerations and the podset labels, then sets ``suspend: false``; at preemption it suspends the
TrainJob, waits until its ``jobsStatus`` shows no active Job, and empties the entry again. The
operator only applies the TrainJob to its JobSet: the patch reaches the pods through the JobSet's
template, ``suspend`` through the JobSet's.

hack/test.sh runs this module in the Kueue stage, with JobSet started before Kueue (marker
``kueue_trainjob``). The ClusterQueue's stopPolicy Hold keeps a TrainJob waiting as long as a test
needs (test_kueue.py says why)."""

from __future__ import annotations

from functools import partial

import kueue_queues as queues
import pytest
import trainjobs
from kube import wait_for
from kueue_queues import (
    GPU_NODES,
    GPU_TOLERATION,
    PODSET_LABEL,
    PRIORITY_LABEL,
    QUEUE_LABEL,
    condition,
    is_true,
    queue_held,
)

pytestmark = pytest.mark.kueue_trainjob

NS = "ato-kueue-trainjob"
KIND = "TrainJob"
KUEUE_PATCH = "kueue.x-k8s.io/manager"
namespace = queues.queues_fixture(NS)
watch = queues.watch_fixture(NS)
trainjob = partial(trainjobs.trainjob, NS)
jobset = partial(trainjobs.jobset, NS)
pods = partial(trainjobs.pods, NS)
running = partial(trainjobs.running, NS)
finish = partial(trainjobs.finish, NS)
workload = partial(queues.workload, NS, KIND)
workload_is = partial(queues.workload_is, NS, KIND)


def create(name: str, gpus: int, priority: str | None = None) -> str:
    """A torch TrainJob in the queue ``training``: ``gpus`` nodes of one GPU each (the
    ClusterQueue holds four)."""
    labels = {QUEUE_LABEL: "training", **({PRIORITY_LABEL: priority} if priority else {})}
    trainer = {"numNodes": gpus, "resourcesPerNode": {"limits": {"nvidia.com/gpu": "1"}}}
    trainjobs.create(NS, name, "torch-distributed", trainer, metadata_labels=labels)
    return name


def pod_selector(name: str) -> str:
    return f"jobset.sigs.k8s.io/jobset-name={name}"


def kueue_patch(tj: dict) -> dict:
    (patch,) = [p for p in tj["spec"].get("runtimePatches") or [] if p["manager"] == KUEUE_PATCH]
    return patch


def node_template(js: dict) -> dict:
    (node,) = [r for r in js["spec"]["replicatedJobs"] if r["name"] == "node"]
    return node["template"]["spec"]["template"]


def suspended_both(name: str, value: bool) -> dict:
    """The TrainJob's ``suspend`` and its Suspended condition as ``value``, and its JobSet's
    ``suspend`` the same: the operator has acted on Kueue's write."""

    def both():
        tj, js = trainjob(name), jobset(name)
        return (
            (tj["spec"].get("suspend") is True) is value
            and condition(tj, "Suspended").get("status") == ("True" if value else "False")
            and js is not None
            and (js["spec"].get("suspend") is True) is value
            and tj
        )

    return wait_for(both, what=f"TrainJob {name} and its JobSet suspend={value}")


def waiting_without_pods(name: str, pod_watch) -> None:
    """Suspended by Kueue and by the operator, its JobSet suspended, no pod ever, no quota."""
    tj = suspended_both(name, True)
    assert "replicatedJobs" not in kueue_patch(tj)["trainingRuntimeSpec"]["template"]["spec"], "not admitted"
    assert "nodeSelector" not in node_template(jobset(name))["spec"]
    assert not is_true(workload(name) or {}, "QuotaReserved")
    assert pod_watch.events() == [], f"no pod of {name} while it waits"


def assert_on_the_flavor(name: str, count: int) -> list[dict]:
    """Running where the flavor says: the nodeSelector, toleration and podset label Kueue put
    into its runtime patch, on the JobSet's template (applied by the operator, field manager
    ``trainer``) and on every pod."""
    started = running(name, count)
    js = jobset(name, "--show-managed-fields")
    template = node_template(js)
    assert template["spec"].get("nodeSelector") == GPU_NODES, "the runtime patch on the JobSet"
    assert GPU_TOLERATION in template["spec"].get("tolerations", [])
    (applied,) = [m for m in js["metadata"]["managedFields"] if m["manager"] == "trainer"]
    assert "f:nodeSelector" in str(applied["fieldsV1"]), "the operator applied the runtime patch"
    assert not [m for m in js["metadata"]["managedFields"] if m["manager"].startswith("kueue")]
    for pod in started:
        assert pod["metadata"]["labels"][PODSET_LABEL] == "node", pod["metadata"]["name"]
        assert pod["spec"]["nodeSelector"] == GPU_NODES, pod["metadata"]["name"]
        assert GPU_TOLERATION in pod["spec"]["tolerations"], pod["metadata"]["name"]
        assert pod["spec"]["nodeName"].startswith("kwok-gpu-"), pod["metadata"]["name"]
    return started


def finished(name: str) -> dict:
    """End the pods; the TrainJob Complete, its Workload Finished (Succeeded)."""
    finish(name)
    wait_for(lambda: is_true(trainjob(name), "Complete"), what=f"TrainJob {name} Complete")
    done = wait_for(lambda: workload_is(name, "Finished"), what=f"the Workload of {name} Finished")
    assert condition(done, "Finished")["reason"] == "Succeeded"
    return done


def test_a_queued_trainjob_waits_suspended_then_runs_where_kueue_admits_it(watch):
    name = "admitted"
    with queue_held():
        pod_watch = watch("pods", pod_selector(name))
        create(name, 2)
        wait_for(lambda: workload(name), what=f"the Workload of {name}")
        waiting_without_pods(name, pod_watch)
    admitted = wait_for(lambda: workload_is(name, "Admitted"), what=f"{name} admitted")
    patch = kueue_patch(trainjob(name))["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    assert [(p["name"], p["template"]["spec"]["template"]["spec"]["nodeSelector"]) for p in patch] == [
        ("node", GPU_NODES)
    ]
    suspended_both(name, False)
    assert condition(trainjob(name), "Suspended")["reason"] == "Resumed"
    assert_on_the_flavor(name, 2)
    ready = wait_for(lambda: workload_is(name, "PodsReady"), what=f"{name} PodsReady")
    assert (
        condition(ready, "PodsReady")["lastTransitionTime"]
        >= condition(admitted, "Admitted")["lastTransitionTime"]
    )
    finished(name)


def test_a_trainjob_beyond_the_quota_waits_without_pods_until_the_first_finishes(watch):
    first = create("quota-first", 4)
    assert_on_the_flavor(first, 4)
    pod_watch = watch("pods", pod_selector("quota-second"))
    second = create("quota-second", 2)
    wait_for(lambda: workload(second), what=f"the Workload of {second}")
    waiting_without_pods(second, pod_watch)
    finished(first)
    wait_for(lambda: workload_is(second, "Admitted"), what=f"{second} admitted once {first} finished")
    suspended_both(second, False)
    assert_on_the_flavor(second, 2)
    finished(second)


def test_a_higher_priority_trainjob_preempts_and_the_victim_runs_again():
    """A low TrainJob fills the quota; a high one preempts it: Kueue suspends it, the operator
    suspends its JobSet (its pods go), and once Kueue has taken its patch back the JobSet's
    template is as before the admission. Once the high one is done, the low one is admitted
    again and runs on new pods."""
    low = create("low", 4, "low")
    before = {p["metadata"]["uid"] for p in assert_on_the_flavor(low, 4)}
    high = create("high", 2, "high")
    wait_for(lambda: workload_is(low, "Evicted"), what=f"{low} evicted")
    suspended_both(low, True)
    wait_for(lambda: pods(low) == [], what=f"the pods of {low} gone")
    wait_for(
        lambda: "replicatedJobs" not in kueue_patch(trainjob(low))["trainingRuntimeSpec"]["template"]["spec"],
        what=f"Kueue's patch of {low} taken back",
    )
    restored = wait_for(
        lambda: (t := node_template(jobset(low))) and "nodeSelector" not in t["spec"] and t,
        what=f"the JobSet of {low} without the flavor",
    )
    assert PODSET_LABEL not in (restored.get("metadata") or {}).get("labels", {})
    assert not workload_is(low, "Admitted")
    assert_on_the_flavor(high, 2)
    finished(high)
    wait_for(lambda: workload_is(low, "Admitted"), what=f"{low} admitted again")
    suspended_both(low, False)
    again = assert_on_the_flavor(low, 4)
    assert not {p["metadata"]["uid"] for p in again} & before, "new pods"
    finished(low)
