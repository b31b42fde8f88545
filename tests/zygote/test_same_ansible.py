"""The zygote runs the same Ansible: each case runs through the real ansible-runner and
ansible-playbook and through the zygote (served by a warm template, checked per run), and the
runtime must see the same thing - the same events in the same order with the same data (ids,
times and pids aside), the same exit status, and no event after the process has exited - and
ansible-runner must write the same event files into the artifact directory.
"""

from __future__ import annotations

import json
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import zygote_harness as harness
from conftest import HANG_S, PLAYBOOKS

CASES = [
    # name, playbook, task to SIGTERM the run at, exit status of the real ansible-runner
    ("success", "success.yml", "", 0),
    ("failing-task", "failing.yml", "", 2),
    ("requeue-after", "requeue.yml", "", 0),
    ("sigterm-cancel", "cancel.yml", "Sleep", None),
]


def assert_same(real: harness.Result, zyg: harness.Result, alone: bool = True) -> None:
    assert zyg.served_by_template or not alone, f"not served by templates: {zyg.served}"
    assert not real.late and not zyg.late, "an event arrived after the process exited"
    assert zyg.rc == real.rc
    assert zyg.normalized() == real.normalized()
    assert zyg.normalized_output() == real.normalized_output()
    # In the same order too (json.dumps of the lists: dict equality ignores key order).
    assert json.dumps(zyg.event_files()) == json.dumps(real.event_files())
    assert real.event_files(), "ansible-runner wrote its events into the artifact directory"


@pytest.mark.parametrize(("name", "playbook", "cancel_on", "rc"), CASES, ids=[c[0] for c in CASES])
def test_same_events(warm, work, name, playbook, cancel_on, rc):
    real = harness.run(work, f"{name}-real", PLAYBOOKS / playbook, warm, zygote=False, cancel_on=cancel_on)
    zyg = harness.run(work, f"{name}-zygote", PLAYBOOKS / playbook, warm, zygote=True, cancel_on=cancel_on)
    assert not real.served_by_template
    assert rc is None or real.rc == rc, real.output
    assert_same(real, zyg)


def test_events_posted_over_one_connection(warm, work):
    """The zygote's ansible-runner posts a run's events over one kept-alive connection (the
    real one opens a connection per event): the same events arrive, each once."""
    real = harness.run(work, "connections-real", PLAYBOOKS / "success.yml", warm, zygote=False)
    zyg = harness.run(work, "connections-zygote", PLAYBOOKS / "success.yml", warm, zygote=True)
    assert real.connections == len(real.events) > 1
    assert zyg.connections == 1
    assert_same(real, zyg)


def test_six_at_once(warm, work):
    real = harness.run(work, "six-real", PLAYBOOKS / "success.yml", warm, zygote=False)
    before = harness.served(warm["ANSIBLE_ZYGOTE_SOCKET"])
    with ThreadPoolExecutor(max_workers=6) as pool:
        runs = list(
            pool.map(
                lambda i: harness.run(work, f"six-{i}", PLAYBOOKS / "success.yml", warm, zygote=True),
                range(6),
            )
        )
    served = harness.delta(before, harness.served(warm["ANSIBLE_ZYGOTE_SOCKET"]))
    assert served == {"ansible-runner": 6, "ansible-playbook": 6}
    for zyg in runs:
        assert_same(real, zyg, alone=False)


def test_changed_setting_falls_back(warm, work):
    """A setting Ansible reads at import (the callback's result format) differs from the warm
    template's: the run must not be served by it, and must show the setting's effect."""
    changed = {**warm, "ANSIBLE_CALLBACK_RESULT_FORMAT": "json"}
    default = harness.run(work, "setting-default", PLAYBOOKS / "success.yml", warm, zygote=False)
    real = harness.run(work, "setting-real", PLAYBOOKS / "success.yml", changed, zygote=False)
    zyg = harness.run(work, "setting-zygote", PLAYBOOKS / "success.yml", changed, zygote=True)
    assert real.normalized() != default.normalized(), "the setting shows"
    assert not zyg.served_by_template
    assert not zyg.late
    assert zyg.rc == real.rc
    assert zyg.normalized() == real.normalized()


def runner_children(server_pid: int) -> list[str]:
    """The runs in progress of every ansible-runner template of the server (serving or retiring)."""
    runs = []
    for template in Path(f"/proc/{server_pid}/task/{server_pid}/children").read_text().split():
        try:
            if b"template.py\x00ansible-runner" in Path(f"/proc/{template}/cmdline").read_bytes():
                runs += Path(f"/proc/{template}/task/{template}/children").read_text().split()
        except FileNotFoundError:
            continue
    return runs


def test_client_killed_kills_its_child(warm, server, work):
    """SIGKILL to the process the runtime started (the ansible-runner client) in the middle of a
    run: its server-side child, ansible-runner's main running in a template's fork, goes too (its
    whole group), as the real ansible-runner would have died with it."""
    server_pid = server[2]
    assert not runner_children(server_pid)
    result = harness.run(work, "killed", PLAYBOOKS / "killed.yml", warm, True, "Sleep", signal.SIGKILL)
    assert result.rc == -signal.SIGKILL
    # Had the child lived on, it would have finished the play and posted its stats.
    assert "playbook_on_stats" not in [e.get("event") for e in result.events + result.late]
    deadline = time.monotonic() + HANG_S
    while runner_children(server_pid):
        assert time.monotonic() < deadline, "the killed client's child survived"
        time.sleep(0.1)


def unsafe(value):
    """ansible-operator's markUnsafe (runner.go): every string as ``{"__ansible_unsafe": s}``."""
    if isinstance(value, dict):
        return {k: unsafe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [unsafe(v) for v in value]
    if isinstance(value, str):
        return {"__ansible_unsafe": value}
    return value


TFJOB = {
    "apiVersion": "kubeflow.org/v1",
    "kind": "TFJob",
    "metadata": {"name": "same", "namespace": "zygote", "uid": "0f0e", "generation": 1},
    "spec": {
        "tfReplicaSpecs": {
            "Worker": {
                "replicas": 2,
                "template": {"spec": {"containers": [{"name": "tensorflow", "image": "tf"}]}},
            }
        }
    },
}
# The runtime's proxy, here with nothing behind it (no cluster in these tests): each pass of the
# role meets an API server that refuses, and must meet it the same way through the zygote.
KUBECONFIG = """apiVersion: v1
kind: Config
current-context: proxy
clusters: [{name: proxy, cluster: {server: 'http://127.0.0.1:9'}}]
contexts: [{name: proxy, context: {cluster: proxy, user: proxy}}]
users: [{name: proxy, user: {}}]
"""


def test_the_projects_own_reconcile(warm, work):
    """The project's playbook and roles (playbooks/reconcile.yml with roles/tfjob, its action
    and filter plugins, lib/), with the extra variables the runtime passes for a TFJob."""
    extravars = {
        "training_job_role": "tfjob",
        "_kubeflow_org_tfjob": unsafe(TFJOB),
        "_kubeflow_org_tfjob_spec": unsafe(TFJOB["spec"]),
    }
    runs = []
    for name, zygote in (("reconcile-real", False), ("reconcile-zygote", True)):
        (work / f"{name}.kubeconfig").write_text(KUBECONFIG)
        runs.append(
            harness.run(
                work, name, harness.ROOT / "playbooks" / "reconcile.yml", warm, zygote, extravars=extravars
            )
        )
    real, zyg = runs
    assert real.rc == 0, real.output
    assert "training_job : Plan the pass and apply it" in real.output
    assert_same(real, zyg)
