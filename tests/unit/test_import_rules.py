"""Import rules: the engine stays pure and light.

``lib/training_jobs`` (the v1 kinds) and ``lib/trainer_jobs`` (TrainJob) run inside every
reconcile (the plan filters): they may import the standard library and the two engines only,
never a client, Ansible, YAML or anything that reaches the API server.
Heavy libraries (the ``kubernetes`` client) belong to the long-running companion alone.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LIB = ROOT / "lib"

# Standard-library modules the engine may use; anything else is a new dependency to argue for.
ENGINE_STDLIB = {
    "__future__",
    "base64",
    "collections",
    "copy",
    "dataclasses",
    "datetime",
    "decimal",
    "hashlib",
    "json",
    "math",
    "re",
    "typing",
}
# Per-reconcile code outside the engine: the Ansible plugins' shared client and counters.
PER_RECONCILE = ("training_jobs", "trainer_jobs", "training_kube")
ENGINES = ("training_jobs", "trainer_jobs")
# PyYAML is not among them: Ansible has loaded it already when a plugin reads a kubeconfig.
HEAVY = {"kubernetes", "requests", "urllib3", "ansible"}


def imported(path: Path) -> set[str]:
    """Top-level names of every module ``path`` imports, at any depth of the file."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def files(package: str) -> list[Path]:
    return sorted((LIB / package).rglob("*.py"))


@pytest.mark.parametrize(
    "path", [p for e in ENGINES for p in files(e)], ids=lambda p: str(p.relative_to(LIB))
)
def test_the_engine_imports_the_standard_library_and_itself_only(path):
    outside = imported(path) - ENGINE_STDLIB - set(ENGINES)
    assert not outside, f"{path.relative_to(ROOT)} imports {sorted(outside)}"


def test_the_engines_modules_are_the_standard_librarys():
    assert not ENGINE_STDLIB - set(sys.stdlib_module_names)


@pytest.mark.parametrize(
    "path", [p for pkg in PER_RECONCILE for p in files(pkg)], ids=lambda p: str(p.relative_to(LIB))
)
def test_per_reconcile_code_imports_nothing_heavy(path):
    assert not imported(path) & HEAVY, f"{path.relative_to(ROOT)} imports {sorted(imported(path) & HEAVY)}"


def test_the_rule_can_fail(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    import yaml\n    from kubernetes import client\n")
    assert imported(bad) & HEAVY == {"kubernetes"}
    assert imported(bad) - ENGINE_STDLIB == {"yaml", "kubernetes"}


def imported_at_module_level(path: Path) -> set[str]:
    """Top-level names of the modules ``path`` imports when it is itself imported."""
    names = set()
    for node in ast.parse(path.read_text(), str(path)).body:
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("path", sorted(LIB.rglob("*.py")), ids=lambda p: str(p.relative_to(LIB)))
def test_the_kubernetes_client_is_imported_only_when_used(path):
    # The companion imports it when it builds its client: --no-wake and every other lib module never pay.
    assert not imported_at_module_level(path) & {"kubernetes", "urllib3"}


def test_the_lazy_import_rule_can_fail(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import kubernetes.client\n\ndef f():\n    import urllib3\n")
    assert imported_at_module_level(bad) == {"kubernetes"}
