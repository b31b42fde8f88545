"""The ansible-playbook template preloads the project's plugins and compiles its roles' template
strings once (``template.preload_project_plugins``, ``precompile_project_templates``): edits
between two runs must take effect as without the zygote. A project of the test's own: a role
whose task templates a string through a filter plugin of the project."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import zygote_harness as harness
from conftest import HANG_S
from test_same_ansible import assert_same

TASK = "- name: Greet\n  ansible.builtin.debug:\n    msg: {msg}\n"
FILTER = """
class FilterModule:
    def filters(self):
        return {{"greeting": lambda name: "{word}, " + name}}
"""
PLAYBOOK = "---\n- hosts: localhost\n  gather_facts: false\n  roles: [greeter]\n"


def write_project(root: Path, msg: str, word: str) -> None:
    """Writes only the files whose text changes (a rewritten plugin is an edited one)."""
    files = {
        "roles/greeter/tasks/main.yml": TASK.format(msg=msg),
        "roles/greeter/defaults/main.yml": "greeter_name: \"{{ 'job' }}\"\n",
        "playbooks/greet.yml": PLAYBOOK,
        "filter_plugins/greeting.py": FILTER.format(word=word),
    }
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text() != text:
            path.write_text(text)


def ready_templates(log: Path) -> int:
    return log.read_text().count(" ready")


@pytest.fixture(scope="module")
def project(server, work: Path):
    """The project and the operator's environment pointing at it, its templates warm."""
    socket_path, log, _ = server
    root = work / "project"
    write_project(root, '"{{ greeter_name | greeting }}"', "hello")
    env = harness.operator_env(
        socket_path,
        {"ANSIBLE_ROLES_PATH": str(root / "roles"), "ANSIBLE_FILTER_PLUGINS": str(root / "filter_plugins")},
    )
    ready = ready_templates(log)
    harness.run(work, "project-warm-up", root / "playbooks" / "greet.yml", env, zygote=True)
    wait_for_templates(log, ready + 2)
    return root, env


def wait_for_templates(log: Path, count: int) -> None:
    deadline = time.monotonic() + HANG_S
    while ready_templates(log) < count:
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.2)


def greet(work: Path, root: Path, env: dict, name: str) -> tuple[harness.Result, harness.Result]:
    playbook = root / "playbooks" / "greet.yml"
    real = harness.run(work, f"{name}-real", playbook, env, zygote=False)
    return real, harness.run(work, f"{name}-zygote", playbook, env, zygote=True)


def test_an_edited_template_string_is_compiled_again(project, work):
    """The task's string was compiled by the template: once edited, the run templates the new
    one (roles are not part of the fingerprint: the same template serves)."""
    root, env = project
    real, zyg = greet(work, root, env, "string-before")
    assert "hello, job" in real.output
    assert_same(real, zyg)
    write_project(root, '"{{ greeter_name | greeting }}, again"', "hello")
    real, zyg = greet(work, root, env, "string-after")
    assert "hello, job, again" in real.output
    assert_same(real, zyg)


def test_an_edited_filter_plugin_takes_effect(project, server, work):
    """The filter plugin was imported by the template: the first run after the edit falls back
    (the server retires the template), the next ones are served by a new template with it."""
    root, env = project
    _, log, _ = server
    real, zyg = greet(work, root, env, "plugin-before")
    assert "hello, job" in real.output
    assert_same(real, zyg)
    ready = ready_templates(log)
    write_project(root, '"{{ greeter_name | greeting }}"', "goodbye")
    real, zyg = greet(work, root, env, "plugin-edited")
    assert "goodbye, job" in real.output
    assert zyg.served == {"ansible-runner": 1, "ansible-playbook": 0}, "it fell back"
    assert zyg.rc == real.rc and not zyg.late
    assert zyg.normalized() == real.normalized()
    wait_for_templates(log, ready + 1)
    real, zyg = greet(work, root, env, "plugin-after")
    assert "goodbye, job" in real.output
    assert_same(real, zyg)


def test_a_broken_plugin_leaves_the_template_serving(project, server, work):
    """An action plugin that cannot be imported (no task uses it, so the real run never loads
    it): preloading it would end the template, so the template does without the preload, and
    still serves every run as the real programs run it."""
    root, env = project
    _, log, _ = server
    broken = root / "broken_action_plugins"
    broken.mkdir(exist_ok=True)
    (broken / "unfinished.py").write_text("def unfinished(:\n")
    env = {**env, "ANSIBLE_ACTION_PLUGINS": f"{broken}:{env['ANSIBLE_ACTION_PLUGINS']}"}
    ready = ready_templates(log)
    harness.run(work, "broken-warm-up", root / "playbooks" / "greet.yml", env, zygote=True)
    wait_for_templates(log, ready + 2)
    real, zyg = greet(work, root, env, "broken-plugin")
    assert real.rc == 0, real.output
    assert_same(real, zyg)


NEW_FILTER = """
class FilterModule:
    def filters(self):
        return {"farewell": lambda name: "farewell, " + name}
"""


def test_a_new_plugin_file_is_seen_in_the_next_pass(project, server, work):
    """A filter plugin added while the operator runs, and a role that uses it: the template had
    listed the plugin directories (its loaders keep what they found), so the next pass falls
    back (the template retires) and the ones after are served by a template that has it."""
    root, env = project
    _, log, _ = server
    real, zyg = greet(work, root, env, "new-plugin-before")
    assert_same(real, zyg)
    ready = ready_templates(log)
    (root / "filter_plugins" / "farewell.py").write_text(NEW_FILTER)
    # (greeting.py as the test before left it: no watched file changes, only the listing.)
    write_project(root, '"{{ greeter_name | farewell }}"', "goodbye")
    real, zyg = greet(work, root, env, "new-plugin")
    assert real.rc == 0 and "farewell, job" in real.output, real.output
    assert zyg.served == {"ansible-runner": 1, "ansible-playbook": 0}, "it fell back"
    assert zyg.rc == real.rc and not zyg.late
    assert zyg.normalized() == real.normalized()
    wait_for_templates(log, ready + 1)
    real, zyg = greet(work, root, env, "new-plugin-after")
    assert_same(real, zyg)
