"""Smaller differences from the real programs, each fixed or refused (issue 35, item 7): a
relative path setting makes the template decline, the operator's PYTHONHASHSEED is kept, a
signal that comes before the client can forward it waits for the child, and a child killed
before its ``setsid()`` is killed all the same."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import zygote_harness as harness
from ansible_zygote import client as zygote_client
from ansible_zygote import template as zygote_template
from ansible_zygote import wire
from conftest import PLAYBOOKS, own_templates, ready_templates, wait_for_templates
from test_same_ansible import assert_same


def test_a_relative_path_setting_makes_the_template_decline(server, work):
    """ANSIBLE_LOOKUP_PLUGINS=lookup_plugins: each real run looks in its own project directory,
    a template would have looked in the first run's. The ansible-playbook template declines (and
    says why); ansible-runner's, which reads no such setting, serves."""
    socket_path, log, _ = server
    env = harness.operator_env(
        socket_path, {"ZYGOTE_TEST_CASE": "relative", "ANSIBLE_LOOKUP_PLUGINS": "lookup_plugins"}
    )
    ready = ready_templates(log)
    harness.run(work, "relative-warm-up", PLAYBOOKS / "success.yml", env, zygote=True)
    wait_for_templates(socket_path, log, ready + 1)
    real = harness.run(work, "relative-real", PLAYBOOKS / "success.yml", env, zygote=False)
    zyg = harness.run(work, "relative-zygote", PLAYBOOKS / "success.yml", env, zygote=True)
    assert zyg.served == {"ansible-runner": 1, "ansible-playbook": 0}
    assert zyg.rc == real.rc == 0 and zyg.normalized() == real.normalized()
    assert (
        "ansible-playbook template declines, ANSIBLE_LOOKUP_PLUGINS set to a relative path" in log.read_text()
    )


def test_the_operators_hash_seed_is_kept(server, work):
    """PYTHONHASHSEED set for the operator: every real run hashes with it, and so must the
    template's children (the order of a set of strings shows it)."""
    env = own_templates(server, work, "hash-seed", {"PYTHONHASHSEED": "0"})
    real = harness.run(work, "hash-seed-real", PLAYBOOKS / "hash_order.yml", env, zygote=False)
    zyg = harness.run(work, "hash-seed-zygote", PLAYBOOKS / "hash_order.yml", env, zygote=True)
    assert "alpha" in real.output, real.output
    assert_same(real, zyg)


def test_a_signal_before_the_child_is_known_waits_for_it(tmp_path: Path):
    """SIGTERM reaches the client while the server is still starting its child: the client
    forwards it once the child is there (ansible-runner cancels), instead of dying of it (the
    server would then SIGKILL the run)."""
    path = str(tmp_path / "s.sock")
    listener = wire.seqpacket()
    listener.bind(path)
    listener.listen(1)
    env = {**os.environ, "ANSIBLE_ZYGOTE_SOCKET": path, "PATH": f"{harness.CLIENT_BIN}:{harness.VENV_BIN}"}
    client = subprocess.Popen(["ansible-runner", "--version"], env=env)
    child = subprocess.Popen(["sleep", "600"])
    try:
        listener.settimeout(30)
        conn, _ = listener.accept()
        with conn:
            conn.settimeout(30)
            message, fds = wire.recv(conn)
            for fd in fds:
                os.close(fd)
            assert message and message["program"] == "ansible-runner"
            assert signal.SIGTERM not in message["blocked"], "the child gets the client's own mask"
            client.send_signal(signal.SIGTERM)
            time.sleep(0.5)
            wire.send(conn, {"pid": child.pid})
            forwarded, _ = wire.recv(conn)
            assert forwarded == {"signal": signal.SIGTERM}
            wire.send(conn, {"exit": 0})
        assert client.wait(timeout=30) == 0
    finally:
        for process in (client, child):
            process.kill()
            process.wait()
        listener.close()


def test_a_child_not_yet_a_group_leader_is_killed(tmp_path: Path):
    """The client is gone before the child has called setsid(): there is no group of the
    child's pid yet, and the child itself must go."""
    child = subprocess.Popen(["sleep", "600"])  # in this process's group, not one of its own
    try:
        zygote_template._kill_group(child.pid)
        assert child.wait(timeout=10) == -signal.SIGKILL
    finally:
        child.kill()
        child.wait()


def test_the_client_reports_its_own_mask_when_asked():
    assert zygote_client.request("ansible-runner", "/bin/true", {signal.SIGUSR1})["blocked"] == [
        signal.SIGUSR1
    ]
