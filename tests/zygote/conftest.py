"""A zygote server of the tests' own, started from lib/ as hack/run.sh starts it."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
import zygote_harness as harness

# Only catches a hang: warming a template takes a few CPU seconds, more on a busy machine.
HANG_S = 300
PLAYBOOKS = Path(__file__).parent / "playbooks"


@pytest.fixture(scope="session")
def work():
    # Unix socket paths are limited to 108 bytes: a short directory of our own, removed after.
    path = Path(tempfile.mkdtemp(prefix="zyg-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def start_server(work: Path, name: str) -> tuple[str, Path, subprocess.Popen]:
    """A zygote server in ``work`` as hack/run.sh starts it, listening."""
    socket_path = str(work / name / "server.sock")
    log = work / f"{name}.log"
    # Templates retire after 3 runs here (200 in the operator): every case also crosses a
    # hand-over to a successor, which must not make any run fall back.
    env = {**os.environ, "PYTHONPATH": str(harness.ROOT / "lib"), "ANSIBLE_ZYGOTE_RETIRE_AFTER": "3"}
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [str(harness.VENV_BIN / "python3"), "-m", "ansible_zygote.server", "--socket", socket_path],
            env=env,
            stderr=out,
        )
    deadline = time.monotonic() + HANG_S
    while not os.path.exists(socket_path):
        assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
        time.sleep(0.05)
    return socket_path, log, proc


def stop_server(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=60)


@pytest.fixture(scope="session")
def server(work: Path):
    socket_path, log, proc = start_server(work, "server")
    yield socket_path, log, proc.pid
    stop_server(proc)


@pytest.fixture(scope="session")
def warm(server, work: Path):
    """The templates for the tests' environment are ready: one run falls back and starts them."""
    socket_path, log, _ = server
    env = harness.operator_env(socket_path)
    harness.run(work, "warm-up", PLAYBOOKS / "success.yml", env, zygote=True)
    deadline = time.monotonic() + HANG_S
    while log.read_text().count("ready") < 2:
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.2)
    return env


def ready_templates(log: Path) -> int:
    return log.read_text().count(" ready")


def wait_for_templates(socket_path: str, log: Path, count: int) -> None:
    """``count`` templates have said ready so far, and none is warming."""
    deadline = time.monotonic() + HANG_S
    while ready_templates(log) < count or harness.stats(socket_path).get("warming"):
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.2)


def own_templates(server, work: Path, case: str, extra: dict | None = None) -> dict:
    """The operator's environment with a variable of the test's own (so a fingerprint, and
    templates, that no other test uses: a test may kill or break them), its templates warm."""
    socket_path, log, _ = server
    env = harness.operator_env(socket_path, {"ZYGOTE_TEST_CASE": case, **(extra or {})})
    ready = ready_templates(log)
    harness.run(work, f"{case}-warm-up", PLAYBOOKS / "success.yml", env, zygote=True)
    wait_for_templates(socket_path, log, ready + 2)
    return env
