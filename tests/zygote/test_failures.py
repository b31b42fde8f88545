"""A run that fails in a way of its own (killed, its template gone) cannot hang or break the
runs after it, and ends as the real program would have, or says that its end is unknown."""

from __future__ import annotations

import signal
from pathlib import Path

import zygote_harness as harness
from conftest import HANG_S, PLAYBOOKS, own_templates
from test_same_ansible import assert_same

TESTS_PLUGINS = Path(__file__).parent / "filter_plugins"


def test_a_run_killed_holding_a_write_lock_leaves_the_next_runs_free(server, work):
    """ansible-core makes its module write locks at import, in the template: a run SIGKILLed
    while its worker holds one (building a module) must not leave it taken for every later run
    of the same template that builds a module (the copy action's stat: the generic lock)."""
    filters = f"{TESTS_PLUGINS}:{harness.ROOT / 'filter_plugins'}"
    env = own_templates(server, work, "write-locks", {"ANSIBLE_FILTER_PLUGINS": filters})
    holding = work / "hold-locks" / "inventory" / "holding"
    killed = harness.run(
        work, "hold-locks", PLAYBOOKS / "hold_locks.yml", env, True, "Hold", signal.SIGKILL, holding, HANG_S
    )
    assert holding.exists() and killed.rc == -signal.SIGKILL
    assert killed.served == {"ansible-runner": 1, "ansible-playbook": 1}
    real = harness.run(work, "copy-real", PLAYBOOKS / "copy.yml", env, zygote=False)
    assert real.rc == 0, real.output
    # Served by the same templates (they retire after 3 runs here: the warm-up fell back).
    zyg = harness.run(work, "copy-zygote", PLAYBOOKS / "copy.yml", env, zygote=True, timeout=120)
    assert_same(real, zyg)
