"""Every function of ``lib/`` and the Ansible plugins fits on a screen (docs/development.md,
Conventions): one rule, one function. A longer one is split, not exempted."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MAX_LINES = 60
SOURCES = sorted(
    path for folder in ("lib", "action_plugins", "filter_plugins") for path in (ROOT / folder).rglob("*.py")
)


def long_functions(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    return [
        f"{node.name} ({node.end_lineno - node.lineno + 1} lines, line {node.lineno})"
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno is not None
        and node.end_lineno - node.lineno + 1 > MAX_LINES
    ]


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_functions_fit_a_screen(path):
    assert long_functions(path) == []


def test_the_check_sees_a_long_function(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_LINES))
    source = tmp_path / "long.py"
    source.write_text(f"def long():\n{body}\n")
    assert long_functions(source) == [f"long ({MAX_LINES + 1} lines, line 1)"]
