"""A failing warm-up backs off, and a failing server does not multiply Ansible runs: a template
that crashes while warming is not started again for its fingerprint at every request (each try
is a full Ansible import), a fork that fails does not end the server, and prewarm.py runs
nothing unless a server listens."""

from __future__ import annotations

import errno
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import zygote_harness as harness
from ansible_zygote import server as zygote_server
from ansible_zygote import wire

REAL = str(harness.VENV_BIN / "ansible-runner")
LIB = harness.ROOT / "lib" / "ansible_zygote"


@pytest.fixture
def server(tmp_path: Path, monkeypatch):
    """A server in this process whose templates crash at once, counting the templates started."""
    crash = tmp_path / "crash.py"
    crash.write_text("raise SystemExit('warming failed')\n")
    monkeypatch.setattr(zygote_server, "TEMPLATE", str(crash))
    server = zygote_server.Server(str(tmp_path / "s.sock"), retire_after=1)
    started: list[str] = []
    original = zygote_server.start_template

    def counted(key: str, request: dict):
        started.append(key)
        return original(key, request)

    monkeypatch.setattr(zygote_server, "start_template", counted)
    yield server, started
    server.shutdown(grace=5)


def request(tmp_path: Path) -> dict:
    return {"program": "ansible-runner", "real": REAL, "env": {"PATH": "/bin"}, "cwd": str(tmp_path)}


def ask(
    server: zygote_server.Server, tmp_path: Path, answered_on: socket.socket | None = None
) -> dict | None:
    """One client's request; the server serves until it has answered (the client, or the
    template ``answered_on`` that it hands the run to) and no template is left warming (the one
    it started has crashed and been reaped)."""
    client = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    client.connect(server.path)
    with open(os.devnull, "rb") as devnull, client:
        socket.send_fds(client, [json.dumps(request(tmp_path)).encode()], [devnull.fileno()] * 3)
        deadline = time.monotonic() + 60

        def busy() -> bool:
            answered = select.select([answered_on or client], [], [], 0)[0]
            return not answered or server.warming() > 0 or bool(server.retired)

        while busy():
            assert time.monotonic() < deadline, "the server did not settle"
            server.serve(iter([True, False]).__next__)  # one wake-up (at most 1 s), one reap
        return None if answered_on else wire.recv(client)[0]


def test_a_template_that_crashes_while_warming_is_not_started_at_every_request(server, tmp_path):
    zygote, started = server
    for _ in range(4):
        assert ask(zygote, tmp_path) == {"exec": "no warm template for this environment"}
    assert len(started) == 1


def test_after_the_pause_it_is_tried_again(server, tmp_path, monkeypatch):
    zygote, started = server
    monkeypatch.setattr(zygote_server, "BACKOFF_S", 2.0)
    key = zygote_server.fingerprint(request(tmp_path))
    ask(zygote, tmp_path)
    assert len(started) == 1
    time.sleep(max(0.0, zygote.failures[key][1] - time.monotonic()) + 0.1)
    ask(zygote, tmp_path)
    assert len(started) == 2
    failures, until = zygote.failures[key]
    assert failures == 2 and until - time.monotonic() > 2.0, "the second pause is longer (4 s)"


def test_a_successor_that_keeps_failing_is_not_restarted_at_every_request(server, tmp_path):
    """The serving template has had its runs (retire_after=1): its successor crashes while
    warming; the template keeps serving, and no new successor is started at every request."""
    zygote, started = server
    key = zygote_server.fingerprint(request(tmp_path))
    assert key
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    # A ready template standing in for a real one (this test takes its hand-overs).
    process = subprocess.Popen(["sleep", "600"], start_new_session=True)
    serving = zygote_server.Template(key, process, ours, ready=True)
    zygote.templates[key] = serving
    zygote.selector.register(ours, zygote_server.selectors.EVENT_READ, serving)
    for _ in range(4):
        ask(zygote, tmp_path, answered_on=theirs)
        handed, fds = wire.recv(theirs)
        assert handed and handed["program"] == "ansible-runner"
        for fd in fds:
            os.close(fd)
    theirs.close()
    assert serving.served == 4 and len(started) == 1


def test_a_fork_that_fails_does_not_end_the_server(server, tmp_path, monkeypatch):
    zygote, started = server

    def no_fork(*_args, **_kwargs):
        raise BlockingIOError(errno.EAGAIN, "Resource temporarily unavailable")

    monkeypatch.setattr(zygote_server.subprocess, "Popen", no_fork)
    for _ in range(3):
        assert ask(zygote, tmp_path) == {"exec": "no warm template for this environment"}
    assert len(started) == 1, "backs off as from a crash"


def listens_not(path: Path) -> None:
    """A socket file that nothing listens on (a server that died left it)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    sock.bind(str(path))
    sock.close()


def stub_runner(directory: Path) -> Path:
    """An ``ansible-runner`` first on PATH that only records that it ran."""
    directory.mkdir()
    ran = directory / "ran"
    stub = directory / "ansible-runner"
    stub.write_text(f'#!/bin/sh\necho "$@" >> {ran}\n')
    stub.chmod(0o755)
    return ran


def test_prewarm_runs_nothing_without_a_server(tmp_path: Path):
    """A socket file is left, nothing listens: prewarm waits for a server, and runs no Ansible
    when none comes."""
    listens_not(tmp_path / "s.sock")
    ran = stub_runner(tmp_path / "bin")
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}"}
    prewarm = subprocess.Popen([sys.executable, str(LIB / "prewarm.py"), str(tmp_path / "s.sock")], env=env)
    try:
        prewarm.wait(timeout=3)
    except subprocess.TimeoutExpired:
        pass
    finally:
        prewarm.kill()
        prewarm.wait()
    assert not ran.exists(), "prewarm ran Ansible with no server"


def test_a_server_that_cannot_start_is_started_again_less_and_less_often(tmp_path: Path):
    """supervise.sh with a socket path too long for a unix socket: the server fails at once,
    every time; it is started again after pauses that grow, and no prewarm runs Ansible."""
    operator = subprocess.Popen(["sleep", "600"])
    ran = stub_runner(tmp_path / "bin")
    socket_path = tmp_path / ("d" * 100) / "server.sock"
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}:{harness.VENV_BIN}:{os.environ['PATH']}"}
    supervise = subprocess.Popen(
        ["sh", str(LIB / "supervise.sh"), str(operator.pid), str(socket_path)],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    time.sleep(9)
    os.killpg(supervise.pid, signal.SIGKILL)
    _, stderr = supervise.communicate()
    operator.kill()
    operator.wait()
    assert "cannot serve on" in stderr and "too long" in stderr, stderr
    # Started at 0 s, then after 1, 2 and 4 s of pause (plus each start's own time): at most 4.
    assert stderr.count("cannot serve on") <= 4, stderr
    assert not ran.exists(), "a prewarm ran Ansible with no server"
