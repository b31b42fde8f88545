"""What the operator spends on jobs where nothing changes, against the running operator: an idle
running job and a finished one run no Ansible at all, and a companion that dies loses no job.

An Ansible run of a job is counted from the operator's log (OPERATOR_LOG, set by hack/test.sh):
each run starts with the task that reads the job's objects."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import kube
import pytest
from kube import HANG_S, finish_pod, get, kubectl, namespace_fixture, replica, wait_for
from test_lifecycle import unique
from training_jobs.pod_signature import WAKE_MANAGER

pytestmark = pytest.mark.cluster

NS = "ato-cost"
FINISHED = "training.ato.dev/finished"
IDLE = "training.ato.dev/idle"

namespace = namespace_fixture(NS)


def runs(name: str) -> int:
    log = Path(os.environ["OPERATOR_LOG"]).read_text(errors="replace")
    return sum(
        1
        for line in log.splitlines()
        if f'"name":"{name}"' in line
        and f'"namespace":"{NS}"' in line
        and "Read the objects the job owns" in line
    )


def tfjob(name, specs, run_policy=None):
    return kube.tfjob(name, specs, NS, run_policy)


def state(name):
    conditions = get("tfjob", "-n", NS, name).get("status", {}).get("conditions") or []
    return conditions[-1]["type"] if conditions else ""


def settled(name, quiet=3.0):
    """Wait until the job's Ansible runs stop for ``quiet`` seconds; the count then. Call it once
    the job is labelled idle or finished, after which no pass may start: the quiet spell then
    only lets a pass already under way be counted, however slowly the machine runs it."""
    deadline = time.monotonic() + HANG_S
    count = runs(name)
    while time.monotonic() < deadline:
        time.sleep(quiet)
        now = runs(name)
        if now == count:
            return count
        count = now
    raise AssertionError(f"{name} kept reconciling")


def test_an_idle_running_job_runs_no_ansible():
    name = tfjob(unique("idle"), {"PS": replica(), "Worker": {**replica(), "replicas": 2}})
    wait_for(lambda: state(name) == "Running", what=f"{name} running")
    wait_for(lambda: IDLE in labels(name), what=f"{name} labelled idle")
    before = settled(name)
    assert before > 0, "the operator log counts this job's Ansible runs (else nothing below can fail)"
    # Longer than the 30 s safety-net poll this replaces.
    time.sleep(35)
    assert runs(name) == before, "an idle job's pods changed nothing: no Ansible run"


def labels(name):
    return get("tfjob", "-n", NS, name)["metadata"].get("labels") or {}


def test_a_running_job_is_left_idle_and_its_pods_bring_it_back():
    # Its pod runs until the test ends it: the job must be seen idle while it runs.
    name = tfjob(unique("parked"), {"Worker": replica(policy="Never")})
    wait_for(lambda: IDLE in labels(name), what=f"{name} labelled idle")
    assert state(name) == "Running"
    generation = get("tfjob", "-n", NS, name)["metadata"]["generation"]
    assert labels(name)[IDLE].startswith(f"{generation}-"), "the label says the generation it was left at"
    # Its pod ends: the companion's wake removes the label, and the runtime sees the job again.
    finish_pod(NS, f"{name}-worker-0")
    wait_for(lambda: state(name) == "Succeeded", what=f"{name} Succeeded while idle")
    wait_for(lambda: FINISHED in labels(name), what="the finished label")
    assert IDLE not in labels(name)


def test_an_idle_job_that_is_edited_is_watched_again():
    name = tfjob(unique("edited"), {"Worker": replica()})
    wait_for(lambda: IDLE in labels(name), what=f"{name} labelled idle")
    before = runs(name)
    kubectl("patch", "tfjob", "-n", NS, name, "--type=merge", "-p", '{"spec":{"runPolicy":{"suspend":true}}}')
    wait_for(lambda: state(name) == "Suspended", what=f"{name} suspended while idle")
    assert runs(name) > before
    wait_for(
        lambda: kubectl("get", "pod", "-n", NS, f"{name}-worker-0", check=False).returncode != 0,
        what="its pod deleted",
    )


def pod_uid(name: str) -> str | None:
    found = kubectl("get", "pod", "-n", NS, name, "-o", "jsonpath={.metadata.uid}", check=False)
    return found.stdout or None


def last_wake(name: str) -> str:
    """When the companion last wrote the job (its field manager's time, to the second)."""
    fields = get("tfjob", "-n", NS, name, "--show-managed-fields")["metadata"].get("managedFields") or []
    return max((f["time"] for f in fields if f.get("manager") == WAKE_MANAGER), default="")


def test_an_idle_job_whose_pod_is_force_deleted_is_woken():
    """Even a force delete (grace 0) marks the pod deleted before the API server removes it, and
    that wakes the job. The runtime's own watch on the pods it created would reconcile the job
    here too, but after an operator restart an idle job's pods are in no watch of the runtime's:
    only the companion wakes it."""
    name = tfjob(unique("forced"), {"Worker": replica()})
    wait_for(lambda: IDLE in labels(name), what=f"{name} labelled idle")
    victim = f"{name}-worker-0"
    before = pod_uid(victim)
    assert before, f"{victim} exists"
    # Its pod's wakes are over (the job is idle); a later one is on a later second.
    woken_before = last_wake(name)
    assert woken_before, "the companion woke the job when its pod ran"
    time.sleep(1.1)
    kubectl("delete", "pod", "-n", NS, victim, "--grace-period=0", "--force", "--wait=false")
    wait_for(lambda: last_wake(name) > woken_before, what=f"{name} woken for its vanished pod")
    wait_for(lambda: pod_uid(victim) not in (None, before), what=f"{victim} created again")
    wait_for(lambda: IDLE in labels(name), what=f"{name} idle again")
    assert state(name) == "Running"


def test_a_pending_pod_deleted_while_the_companion_is_down_is_created_again():
    """A pending pod's deletion marks it first, and that wakes its job; while the companion is
    down nothing sees it. The job was never woken (its pods never started) and the pod that is
    left is as created, so only the job's spec says a pod is missing: the companion's first list
    after its restart wakes the job, whose pass creates the pod again."""
    worker = replica()
    worker["template"]["metadata"]["annotations"]["sim.training.ato.dev/start-after"] = "3600s"
    name = tfjob(unique("unseen"), {"Worker": {**worker, "replicas": 2}})
    victim = f"{name}-worker-1"
    wait_for(lambda: pod_uid(f"{name}-worker-0") and pod_uid(victim), what=f"{name}'s two pods")
    before = pod_uid(victim)
    signal_companion("STOP")
    try:
        kubectl("delete", "pod", "-n", NS, victim, "--wait=false")
        wait_for(lambda: pod_uid(victim) != before, what=f"{victim} gone while nobody watched")
    finally:
        signal_companion("KILL")
    wait_for(lambda: pod_uid(victim) not in (None, before), what=f"{victim} created again")


def test_a_finished_job_is_labelled_and_never_reconciled_again():
    name = tfjob(unique("final"), {"Worker": replica(0)})
    wait_for(lambda: state(name) == "Succeeded", what=f"{name} succeeds")
    wait_for(
        lambda: get("tfjob", "-n", NS, name)["metadata"].get("labels", {}).get(FINISHED) == "true",
        what="the finished label",
    )
    before = settled(name)
    assert before > 0, "the operator log counts this job's Ansible runs (else nothing below can fail)"
    # An annotation change reconciles any other job (watchAnnotationsChanges).
    kubectl("annotate", "tfjob", "-n", NS, name, "touched=yes")
    time.sleep(5)
    assert runs(name) == before


def test_a_job_with_a_ttl_is_deleted_on_time_without_the_label():
    name = tfjob(unique("ttl"), {"Worker": replica(0)}, {"ttlSecondsAfterFinished": 2})
    wait_for(
        lambda: kubectl("get", "tfjob", "-n", NS, name, check=False).returncode != 0,
        what=f"{name} deleted by its TTL",
    )


def signal_companion(sig: str) -> None:
    subprocess.run(["pkill", f"-{sig}", "-f", "--", kube.companion_pattern()], check=False)


def test_jobs_end_right_when_the_companion_dies_while_their_pods_change():
    """Nothing polls a job: while the companion is frozen its pod finishes unseen; once it is
    killed, the supervisor (hack/run.sh; the kubelet in a pod) starts it again and its first
    list wakes the job whose annotation is behind."""
    name = tfjob(unique("companion"), {"Worker": replica(policy="Never")})
    wait_for(lambda: state(name) == "Running", what=f"{name} running")
    signal_companion("STOP")
    try:
        finish_pod(NS, f"{name}-worker-0")
        wait_for(
            lambda: get("pod", "-n", NS, f"{name}-worker-0")["status"].get("phase") == "Succeeded",
            what="the pod finished while nobody watched",
        )
        time.sleep(2)
        assert state(name) == "Running", "nothing else woke the job"
    finally:
        signal_companion("KILL")
    wait_for(
        lambda: state(name) == "Succeeded",
        what=f"{name} Succeeded after the companion came back",
    )
    assert subprocess.run(["pgrep", "-f", "--", kube.companion_pattern()], check=False).returncode == 0, (
        "the companion runs again"
    )
