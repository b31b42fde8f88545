"""Events that cross in one wake-up of a template's or the server's loop: one of them may be
about a run or a template that an earlier one in the same batch has already ended. Such events
are skipped; neither loop may die of them (a template's death ends every run in flight)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
import zygote_harness as harness
from ansible_zygote import client as zygote_client
from ansible_zygote import server as zygote_server
from ansible_zygote import wire

TEMPLATE = harness.ROOT / "lib" / "ansible_zygote" / "template.py"
# A run that ends when told to (a line on its stdin), with a status of its own.
EXITS_ON_A_LINE = "import sys\nsys.stdin.readline()\nsys.exit(3)\n"


@pytest.fixture
def template(tmp_path: Path):
    """An ansible-runner template, driven as the server drives it (its control socket)."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    real = str(harness.VENV_BIN / "ansible-runner")
    proc = subprocess.Popen(
        [str(harness.VENV_BIN / "python3"), str(TEMPLATE), "ansible-runner", real, str(theirs.fileno())],
        pass_fds=[theirs.fileno()],
        env={**os.environ, "PYTHONHASHSEED": "1"},
        start_new_session=True,
    )
    theirs.close()
    ready, _ = wire.recv(ours)
    assert ready and ready["ready"], ready
    yield proc, ours
    ours.close()
    proc.wait(timeout=60)


def state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def start_run(control: socket.socket, script: Path) -> tuple[socket.socket, int, int]:
    """A run handed to the template: the client's end of its connection, the run's pid, and
    the write end of its stdin."""
    client, handed = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    stdin_r, stdin_w = os.pipe()
    devnull = os.open(os.devnull, os.O_WRONLY)
    request = {
        "program": "ansible-runner",
        "real": str(script),
        "argv": [],
        "env": {"PATH": os.environ["PATH"]},
        "cwd": str(script.parent),
        "umask": 0o022,
        "ignored": [],
        "blocked": [],
    }
    wire.send(control, request, [handed.fileno(), stdin_r, devnull, devnull])
    for fd in (stdin_r, devnull):
        os.close(fd)
    handed.close()
    reply, _ = wire.recv(client)
    assert reply and "pid" in reply, reply
    return client, int(reply["pid"]), stdin_w


def test_a_signal_forwarded_as_the_run_exits(template, tmp_path: Path):
    """The run exits, then its client forwards a signal (a terminal resize as it ends), and the
    template sees both at once, the exit first: many times, the template lives on and each
    client gets its run's status."""
    proc, control = template
    script = tmp_path / "exits.py"
    script.write_text(EXITS_ON_A_LINE)
    for _ in range(20):
        client, pid, stdin_w = start_run(control, script)
        os.kill(proc.pid, signal.SIGSTOP)  # both events wait for the template's next wake-up
        try:
            os.write(stdin_w, b"end\n")
            deadline = time.monotonic() + 30
            while state(pid) != "Z":
                assert time.monotonic() < deadline, "the run did not exit"
                time.sleep(0.01)
            wire.send(client, {"signal": int(signal.SIGWINCH)})
        finally:
            os.kill(proc.pid, signal.SIGCONT)
        # As the client reads it (lib/ansible_zygote/client.py).
        assert zygote_client.receive(client) == {"exit": 3}
        assert proc.poll() is None, "the template died"
        client.close()
        os.close(stdin_w)


class _Ended:
    pid = 0

    def poll(self) -> int:
        return 0


def test_a_template_retired_earlier_in_the_same_batch(tmp_path: Path):
    """A client's request retires a template (a file it imported changed), and that template's
    own message waits in the same batch: the server skips it instead of reading the socket it
    has just closed."""
    server = zygote_server.Server(str(tmp_path / "s.sock"))
    real = str(harness.VENV_BIN / "ansible-runner")
    request = {"program": "ansible-runner", "real": real, "env": {"PATH": "/bin"}, "cwd": str(tmp_path)}
    key = zygote_server.fingerprint(request)
    assert key
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    changed = str(tmp_path / "plugin.py")
    Path(changed).write_text("")
    stale = zygote_server.Template(
        key, _Ended(), ours, ready=True, watched=[["file", changed, [changed, 0, 0, 0]]]
    )  # type: ignore[arg-type]
    server.templates[key] = stale
    server.selector.register(ours, zygote_server.selectors.EVENT_READ, stale)
    server.declined.add(key)  # no new template for it: the test is about the one batch
    client = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    client.connect(server.path)
    with open(os.devnull, "rb") as devnull:
        socket.send_fds(client, [json.dumps(request).encode()], [devnull.fileno()] * 3)
    wire.send(theirs, {"ready": True})
    wake_ups = iter([True, False])
    server.serve(lambda: next(wake_ups))
    reply, _ = wire.recv(client)
    assert reply == {"exec": "no warm template for this environment"}
    assert key not in server.templates
    client.close()
    theirs.close()
    server.shutdown(grace=0)
