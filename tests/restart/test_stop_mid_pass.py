"""The operator stopped in the middle of a pass, then started again: no job carries a condition
that is not Kubeflow's, and every job ends as it would have (issue 29, item 6).

An operator stopped while a pass runs can leave the job's ansible-runner ``artifacts/latest``
link pointing at a run directory never created (ansible-operator links it when ansible-runner
exits, even one killed before it made that directory). The job's next pass used to crash in
ansible-runner's artifact rotation, and the runtime wrote ``{type: Failure}`` onto the job's
status, where it stayed once the job was labelled finished. Three things keep that away:
``hack/run.sh`` deletes dangling links before the runtime starts, every pass drops condition
types that are not Kubeflow's, and the companion wakes a finished or idle job that carries one.

The runtime links ``latest`` in a goroutine that races with its own exit after a SIGINT, so a
stop does not always leave the link dangling: the SIGINT test makes sure it dangles before the
restart (and prints whether the stop did it). A SIGKILL leaves no link behind (nothing runs after
it); that test checks the job ends right after a pass killed in the middle of its writes.

This module starts and stops its own operator (``hack/run.sh`` in a process group of its own, as
``make run`` runs it), so it needs the cluster without any other operator: hack/test.sh e2e runs
it in a step of its own (``-m restarts``). It waits on states (an ansible-runner process of
the job still starting, a task's start among its events, the jobs' labels and conditions), never
on timers; the bounds only catch hangs.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from kube import (
    KUBECTL,
    finish_job_pods,
    get,
    job_pods,
    kubeconfig,
    kubectl,
    namespace_fixture,
    replica,
    tfjob,
    wait_for,
)
from training_jobs.conditions import KUBEFLOW_TYPES
from training_jobs.idle import FOREIGN_CONDITIONS, IDLE_LABEL
from training_jobs.plan import FINISHED_LABEL

pytestmark = pytest.mark.restarts

NS = "ato-restart"
# ansible-operator's per-job runner directory (internal/ansible/runner/runner.go):
# /tmp/ansible-operator/runner/<group>/<version>/<kind>/<namespace>/<name>.
RUNNER = Path("/tmp/ansible-operator/runner/kubeflow.org/v1/TFJob") / NS
# What the runtime logs when such a pass crashed, and ansible-runner's error on the link.
CRASH = ("Failed to get ansible-runner stdout", "FileNotFoundError")
# The message of the Failure this module writes itself (not CRASH's, which the log is searched for).
PLANTED = "written by tests/restart/test_stop_mid_pass.py as the runtime's markError writes it"


def clean_runner_dirs() -> None:
    """No operator runs (checked by the fixture) and the namespace is this module's."""
    shutil.rmtree(RUNNER, ignore_errors=True)


namespace = namespace_fixture(NS, before=clean_runner_dirs)


def job(name: str) -> dict:
    return get("tfjob", "-n", NS, name)


def labels(name: str) -> dict:
    return job(name)["metadata"].get("labels") or {}


def conditions(name: str) -> list[dict]:
    return (job(name).get("status") or {}).get("conditions") or []


def kubeflow_only(name: str) -> bool:
    return all(c["type"] in KUBEFLOW_TYPES for c in conditions(name))


def finished_ok(name: str) -> bool:
    """Succeeded as its last condition and labelled finished by its last pass."""
    return [c["type"] for c in conditions(name)][-1:] == ["Succeeded"] and FINISHED_LABEL in labels(name)


def runner_starting(name: str) -> bool:
    """An ansible-runner process runs a pass of the job and has not created its run directory
    (artifacts/<ident>) yet: it is still starting (its imports take most of a second)."""
    job_dir = str(RUNNER / name)
    for proc in Path("/proc").iterdir():
        try:
            args = (proc / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue  # not a process, or gone
        if any(a.endswith("/ansible-runner") for a in args[:3]) and job_dir in args and "-i" in args:
            ident = args[args.index("-i") + 1]
            if not (RUNNER / name / "artifacts" / ident).exists():
                return True
    return False


def poke(name: str) -> subprocess.Popen:
    """Make the runtime start a pass of the job: an annotation change, with the idle label off
    (the runtime's selector drops the events of an idle job). Not waited for: the caller watches
    for the pass meanwhile, since kubectl takes longer than ansible-runner needs to start."""
    patch = {"metadata": {"labels": {IDLE_LABEL: None}, "annotations": {"ato.test/poke": str(time.time())}}}
    args = ["patch", "tfjob", "-n", NS, name, "--type=merge", "-p", json.dumps(patch)]
    return subprocess.Popen([KUBECTL, "--kubeconfig", kubeconfig(), *args], stdout=subprocess.DEVNULL)


def catch_a_pass_starting(name: str) -> subprocess.Popen:
    """Poke the job until one of its passes is seen still starting (a window of about a second,
    longer on a busy machine); the poke that started it. A window missed is no failure: the
    next poke opens another."""
    for _ in range(20):
        poking = poke(name)
        try:
            wait_for(
                lambda: runner_starting(name), timeout=30, interval=0.005, what=f"a pass of {name} starting"
            )
            return poking
        except AssertionError:
            poking.wait(timeout=120)
    raise AssertionError(f"no pass of {name} was seen starting in 20 pokes")


def apply_task_started(name: str) -> bool:
    """ansible-runner recorded the start of the task that creates the job's objects."""
    for path in (RUNNER / name / "artifacts").glob("*/job_events/*.json"):
        try:
            event = json.loads(path.read_text())
        except (OSError, ValueError):
            continue  # being written
        data = event.get("event_data") or {}
        if event.get("event") == "playbook_on_task_start" and data.get("task_action") == "training_job_apply":
            return True
    return False


def latest_link(name: str) -> Path:
    return RUNNER / name / "artifacts" / "latest"


def dangling(link: Path) -> bool:
    return link.is_symlink() and not link.exists()


def plant_dangling_link(name: str) -> bool:
    """Make sure the job's ``latest`` link dangles, as the stop can leave it; True if the stop
    itself left it so (ansible-runner was stopped before it created its run directory)."""
    link = latest_link(name)
    if dangling(link):
        return True
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.is_symlink():
        link.unlink()
    link.symlink_to(link.parent / "never-created")
    return False


def mark_error(name: str) -> None:
    """Write onto the job's status what ansible-operator's ``markError`` writes after such a
    crash (internal/ansible/controller/reconcile.go): every condition without lastUpdateTime,
    ``Running`` turned False and moved last, ``Failure`` appended."""
    keep = ("type", "status", "lastTransitionTime", "reason", "message")
    marked = [{k: c[k] for k in keep if k in c} for c in conditions(name)]
    running = [c for c in marked if c["type"] == "Running" and c["status"] == "True"]
    if running:
        marked = [c for c in marked if c["type"] != "Running"] + [{**running[0], "status": "False"}]
    when = marked[-1]["lastTransitionTime"]
    marked.append(
        {
            "type": "Failure",
            "status": "True",
            "reason": "Failed",
            "message": PLANTED,
            "lastTransitionTime": when,
        }
    )
    patch = json.dumps({"status": {"conditions": marked}})
    kubectl("patch", "tfjob", "-n", NS, name, "--subresource=status", "--type=merge", "-p", patch)
    assert not kubeflow_only(name)


def running_since(name: str) -> str | None:
    """The transition time of the job's Running=True, the last condition; None otherwise."""
    last = conditions(name)[-1:]
    return (
        last[0].get("lastTransitionTime")
        if last and last[0]["type"] == "Running" and last[0]["status"] == "True"
        else None
    )


def assert_ended_right(op, name: str, replicas: int) -> None:
    wait_for(lambda: finished_ok(name), interval=1, what=f"{name} Succeeded and labelled finished")
    types = [c["type"] for c in conditions(name)]
    assert all(t in KUBEFLOW_TYPES for t in types), types
    assert types[0] == "Created" and types[-1] == "Succeeded" and "Failed" not in types, types
    assert len(types) == len(set(types)), types
    assert job(name)["status"]["replicaStatuses"]["Worker"].get("succeeded") == replicas
    log = op.log.read_text(errors="replace")
    assert not [line for line in log.splitlines() if any(c in line for c in CRASH)], op.tail()


def test_sigint_in_a_pass_leaves_no_foreign_condition(operator) -> None:
    operator.start("operator-restart-int-1.log")
    done = tfjob("done", {"Worker": replica(0)}, NS)
    idle = tfjob("idle", {"Worker": replica()}, NS)
    wait_for(lambda: finished_ok(done), interval=1, what="done Succeeded and labelled finished")
    wait_for(
        lambda: IDLE_LABEL in labels(idle) and running_since(idle),
        interval=1,
        what="idle labelled idle",
    )
    since = running_since(idle)
    # Its pods run until the test ends them, after the restart.
    mid = tfjob("mid-int", {"Worker": replica(count=2)}, NS)
    # Not its first pass: the runtime links artifacts/latest only where artifacts/ exists already.
    wait_for(lambda: latest_link(mid).is_symlink(), what=f"a pass of {mid} done")
    poking = catch_a_pass_starting(mid)
    operator.stop(signal.SIGINT)
    assert poking.wait(timeout=120) == 0
    # Shown with -s or on failure: whether the stop itself left the dangling link this time.
    print(f"the SIGINT left {mid}'s artifacts/latest dangling: {plant_dangling_link(mid)}")
    # Jobs the runtime no longer watches, marked by a crash of an earlier operator's pass.
    mark_error(done)
    mark_error(idle)

    operator.start("operator-restart-int-2.log")
    finish_job_pods(NS, mid)
    assert_ended_right(operator, mid, 2)
    wait_for(
        lambda: kubeflow_only(done) and finished_ok(done),
        interval=1,
        what="done woken, its Failure dropped, labelled finished again",
    )
    assert FOREIGN_CONDITIONS in job(done)["metadata"]["annotations"]
    wait_for(
        lambda: kubeflow_only(idle) and IDLE_LABEL in labels(idle),
        interval=1,
        what="idle woken, its Failure dropped, labelled idle again",
    )
    assert running_since(idle) == since, "Running is True again, since it first was"


def test_sigkill_in_a_pass_leaves_no_foreign_condition(operator) -> None:
    operator.start("operator-restart-kill-1.log")
    mid = tfjob("mid-kill", {"Worker": replica(count=2)}, NS)
    wait_for(lambda: apply_task_started(mid), interval=0.01, what=f"{mid}'s apply task started")
    # A container killed (a Deployment's rollout past its grace period, an OOM kill): no shutdown.
    operator.stop(signal.SIGKILL)
    operator.start("operator-restart-kill-2.log")
    wait_for(lambda: len(job_pods(NS, mid)) == 2, what=f"{mid}'s two pods")
    finish_job_pods(NS, mid)
    assert_ended_right(operator, mid, 2)
