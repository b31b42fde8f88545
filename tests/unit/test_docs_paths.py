"""The navigation index stays true: every repository path that docs/architecture.md names exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"
# `path/like/this.py` or `dir/` in backticks; placeholders such as <kind> and globs are skipped.
PATH = re.compile(r"`([A-Za-z0-9_.\-]+(?:/[A-Za-z0-9_.\-]*)+)`")


# API groups and label keys (kubeflow.org/v1, training.ato.dev/finished) look like paths too.
API_NAME = re.compile(r"^[a-z0-9.\-]+\.(org|dev|io|com)/")


def named_paths(text: str) -> list[str]:
    return [m for m in PATH.findall(text) if not re.search(r"[<*]", m) and not API_NAME.match(m)]


def test_every_path_in_the_architecture_doc_exists():
    text = DOC.read_text()
    paths = named_paths(text)
    assert len(paths) > 20  # the index and the sections name many; an empty match would pass
    missing = []
    for p in paths:
        # The engine's section names its files relative to lib/training_jobs.
        if not any(c.exists() for c in (ROOT / p, ROOT / "lib" / "training_jobs" / p)):
            missing.append(p)
    assert not missing, f"docs/architecture.md names paths that do not exist: {missing}"


def test_the_check_can_fail():
    text = "see `lib/nowhere/gone.py`, `roles/<kind>/` and `kubeflow.org/v1`"
    assert named_paths(text) == ["lib/nowhere/gone.py"]
