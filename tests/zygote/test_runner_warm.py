"""The ansible-runner template's changes to ptyprocess (lib/ansible_zygote/runner_warm.py): a
reaped child's pty closes without ptyprocess's 0.1 s sleep; a live child's as before."""

from __future__ import annotations

import pytest
from ansible_zygote import runner_warm
from ptyprocess import ptyprocess


@pytest.fixture
def sleeps(monkeypatch) -> list[float]:
    original = ptyprocess.PtyProcess.close
    runner_warm.close_reaped_pty_at_once()
    slept: list[float] = []
    sleep = ptyprocess.time.sleep

    def recorded(seconds: float) -> None:
        slept.append(seconds)
        sleep(seconds)

    monkeypatch.setattr(ptyprocess.time, "sleep", recorded)
    yield slept
    ptyprocess.PtyProcess.close = original


def test_a_reaped_childs_pty_closes_without_sleeping(sleeps):
    child = ptyprocess.PtyProcess.spawn(["/bin/sh", "-c", "exit 3"])
    child.wait()
    assert child.terminated and not child.isalive()
    child.close()
    assert not any(sleeps), sleeps
    assert child.closed and child.exitstatus == 3
    assert child.delayafterclose == 0.1


def test_a_live_childs_pty_closes_as_before(sleeps):
    child = ptyprocess.PtyProcess.spawn(["/bin/sleep", "600"])
    child.close(force=True)
    assert sleeps[0] == 0.1
    assert child.closed and not child.isalive()
