"""What the server's {"stats": true} answers (the tests and the benchmark read it): runs served
per program, templates, and templates still warming (successors included)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

from ansible_zygote import server as server_module
from ansible_zygote.server import Server, Template


def stats(path: str) -> dict:
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as sock:
        sock.connect(path)
        sock.sendall(json.dumps({"stats": True}).encode())
        return json.loads(sock.recv(65536))


def test_warming_counts_templates_and_successors_not_ready(tmp_path: Path):
    server = Server(str(tmp_path / "s.sock"))
    server.templates = {
        "a": Template("a", None, None, ready=True),  # type: ignore[arg-type]
        "b": Template("b", None, None, ready=False),  # type: ignore[arg-type]
    }
    server.successors = {"a": Template("a", None, None, ready=False)}  # type: ignore[arg-type]
    assert server.warming() == 2
    server.templates["b"].ready = server.successors["a"].ready = True
    assert server.warming() == 0


def test_stats_say_how_many_warm(server):
    socket_path = server[0]
    answer = stats(socket_path)
    assert set(answer) == {"served", "templates", "warming"}
    assert 0 <= answer["warming"] <= answer["templates"] + 2


def test_the_stats_command(server, tmp_path: Path):
    """``python -m ansible_zygote.server --socket PATH --stats`` prints the same answer (what
    hack/test.sh can read after the e2e tests), and fails when no server answers."""
    env = {**os.environ, "PYTHONPATH": str(Path(server_module.__file__).parents[1])}
    argv = [sys.executable, "-m", "ansible_zygote.server", "--stats", "--socket"]
    done = subprocess.run([*argv, server[0]], env=env, capture_output=True, text=True, check=True)
    assert set(json.loads(done.stdout)) == {"served", "templates", "warming"}
    missing = subprocess.run([*argv, str(tmp_path / "none.sock")], env=env, capture_output=True, text=True)
    assert missing.returncode == 1 and "no server on" in missing.stderr
