"""A run that fails in a way of its own (killed, its template gone) cannot hang or break the
runs after it, and ends as the real program would have, or says that its end is unknown."""

from __future__ import annotations

import signal
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import zygote_harness as harness
from conftest import HANG_S, PLAYBOOKS, own_templates, start_server, stop_server, wait_for_templates
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


def runner_templates(server_pid: int) -> dict[int, list[int]]:
    """The server's ansible-runner templates (serving or retiring) and the runs each is running."""
    templates = {}
    for pid in Path(f"/proc/{server_pid}/task/{server_pid}/children").read_text().split():
        try:
            if b"template.py\x00ansible-runner" in Path(f"/proc/{pid}/cmdline").read_bytes():
                runs = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
                templates[int(pid)] = [int(run) for run in runs]
        except FileNotFoundError:
            continue
    return templates


def the_run(server_pid: int) -> int:
    """The one ansible-runner run in progress (server-side: the template's child)."""
    runs = [run for runs in runner_templates(server_pid).values() for run in runs]
    assert len(runs) == 1, runs
    return runs[0]


def its_template(server_pid: int) -> int:
    return next(t for t, runs in runner_templates(server_pid).items() if runs)


def test_a_run_killed_by_sigkill_looks_killed(server, work):
    """The OOM killer ends ansible-runner (the template's child) with SIGKILL: the process the
    runtime started dies of SIGKILL too, as the real one would have, without a word of its own."""
    server_pid = server[2]
    env = own_templates(server, work, "sigkill")
    real = harness.run(work, "sigkill-real", PLAYBOOKS / "pause.yml", env, False, "Sleep", signal.SIGKILL)
    zyg = harness.run(
        work,
        "sigkill-zygote",
        PLAYBOOKS / "pause.yml",
        env,
        True,
        "Sleep",
        signal.SIGKILL,
        cancel_pid=lambda: the_run(server_pid),
    )
    assert real.rc == zyg.rc == -signal.SIGKILL
    assert zyg.served == {"ansible-runner": 1, "ansible-playbook": 1}
    assert "Traceback" not in zyg.output and "ansible-zygote" not in zyg.output, zyg.output


def test_a_run_whose_template_died_says_its_status_is_unknown(server, work):
    """Its template is killed while a run is in progress: the run goes on to its end (all its
    events reach the runtime before the client exits), and the client says that its exit status
    is unknown rather than making one up."""
    server_pid = server[2]
    env = own_templates(server, work, "template-death")
    zyg = harness.run(
        work,
        "template-death",
        PLAYBOOKS / "pause.yml",
        env,
        True,
        "Sleep",
        signal.SIGKILL,
        cancel_pid=lambda: its_template(server_pid),
    )
    assert zyg.rc == 1
    assert "ansible-zygote: the template running this ansible-runner" in zyg.output, zyg.output
    assert "its exit status is unknown" in zyg.output
    assert not zyg.late
    assert "playbook_on_stats" in [e.get("event") for e in zyg.events], "the run went on to its end"


def test_a_run_in_progress_when_the_server_stops_looks_killed(work):
    """The operator stops while a run is in progress: the server gives its templates time to
    finish (10 s), then has them kill their runs, which end as killed runs (SIGKILL), not with a
    made-up status, nor left running on their own."""
    socket_path, log, proc = start_server(work, "stopping")
    try:
        env = harness.operator_env(socket_path)
        harness.run(work, "stopping-warm-up", PLAYBOOKS / "success.yml", env, zygote=True)
        wait_for_templates(socket_path, log, 2)
        started = time.monotonic()
        zyg = harness.run(
            work,
            "stopping",
            PLAYBOOKS / "killed.yml",
            env,
            True,
            "Sleep",
            signal.SIGTERM,
            cancel_pid=lambda: proc.pid,
        )
    finally:
        stop_server(proc)
    assert zyg.rc == -signal.SIGKILL, zyg.output
    assert time.monotonic() - started < 25, "killed after the grace, not left to finish its 30 s task"
    assert "Traceback" not in zyg.output and not zyg.late


def test_a_server_restart_in_the_middle_of_a_burst(work):
    """The server stops and starts again (supervise.sh after a crash, an upgrade) while runs
    come in: the runs in progress finish through their templates, those that come meanwhile run
    the real programs, and every run is whole and happens once: its events from the first to
    the stats, each once, none late, the same as a real run's."""
    socket_path, log, proc = start_server(work, "restart")
    try:
        env = harness.operator_env(socket_path)
        harness.run(work, "restart-warm-up", PLAYBOOKS / "success.yml", env, zygote=True)
        wait_for_templates(socket_path, log, 2)
        real = harness.run(work, "burst-real", PLAYBOOKS / "pause.yml", env, zygote=False)
        with ThreadPoolExecutor(max_workers=6) as pool:
            burst = [
                pool.submit(harness.run, work, f"burst-{i}", PLAYBOOKS / "pause.yml", env, True)
                for i in range(4)
            ]
            time.sleep(1.0)
            stop_server(proc)
            burst += [
                pool.submit(harness.run, work, f"burst-between-{i}", PLAYBOOKS / "pause.yml", env, True)
                for i in range(2)
            ]
            socket_path, log, proc = start_server(work, "restart")
            burst += [
                pool.submit(harness.run, work, f"burst-after-{i}", PLAYBOOKS / "pause.yml", env, True)
                for i in range(2)
            ]
            results = [future.result() for future in burst]
    finally:
        stop_server(proc)
    for result in results:
        # (Status events, "starting" and "running", have no counter.)
        counters = [e["counter"] for e in result.events if "counter" in e]
        assert len(counters) == len(set(counters)), f"{result.run_dir.name}: an event twice"
        assert [e.get("event") for e in result.events].count("playbook_on_stats") == 1
        assert_same(real, result, alone=False)
