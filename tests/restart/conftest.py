"""The operator the tests of tests/restart start and stop themselves: hack/run.sh, as `make run`
runs it, the only operator on the cluster (hack/test.sh e2e gives these tests a step of their own).
"""

from __future__ import annotations

import os
import signal
import subprocess
import urllib.request
from pathlib import Path

import pytest
from kube import ROOT, wait_for

LOGS = Path(os.environ.get("RESTART_LOG_DIR") or ROOT / ".local" / "test")
READYZ = f"http://127.0.0.1:{os.environ.get('HEALTH_PORT', '6789')}/readyz"
# As `make run` runs it by default: as the caller (KUBECONFIG), not as the operator's own
# ServiceAccount (OPERATOR_KUBECONFIG). The runtime marks a failed run with an *update* of the
# status, which config/rbac/role.yaml does not grant (the operator patches it): as the
# ServiceAccount the runtime's write is refused, and this test would not see the condition.
RUN_ENV = {k: v for k, v in os.environ.items() if k != "OPERATOR_KUBECONFIG"}


def ready() -> bool:
    try:
        with urllib.request.urlopen(READYZ, timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


class Operator:
    """hack/run.sh in a process group of its own: the runtime, its Ansible runs and the companion."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None
        self.log = LOGS / "operator-restart.log"

    def start(self, log_name: str) -> None:
        assert not ready(), f"an operator already answers on {READYZ}: this test needs the only one"
        LOGS.mkdir(parents=True, exist_ok=True)
        self.log = LOGS / log_name
        with self.log.open("w") as out:
            self.proc = subprocess.Popen(
                [str(ROOT / "hack" / "run.sh")],
                cwd=ROOT,
                env=RUN_ENV,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        proc = self.proc
        wait_for(lambda: proc.poll() is not None or ready(), what="the operator ready")
        assert proc.poll() is None, f"the operator exited:\n{self.tail()}"

    def stop(self, sig: signal.Signals) -> None:
        """Send ``sig`` to the whole group (Ctrl-C under make run is SIGINT to the group) and wait
        until every process of it is gone; the runtime's graceful shutdown takes up to 30 s."""
        if self.proc is None:
            return
        proc, self.proc = self.proc, None
        os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=90)
            wait_for(lambda: group_gone(proc.pid), what="every process of the operator gone")
        finally:
            if not group_gone(proc.pid):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

    def tail(self, lines: int = 60) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


def group_gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.fixture
def operator():
    op = Operator()
    yield op
    op.stop(signal.SIGINT)
