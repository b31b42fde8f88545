"""The index of docs/architecture.md ("Where things are") names every module of ``lib/``: a new
module shows up in the table, or this test says which one is missing."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"
# Package plumbing, named through their package: ``python -m`` entry points and package docs.
PLUMBING = {"__init__.py", "__main__.py"}
TOKEN = re.compile(r"`([^`\s]+\.(?:py|sh))`")


def index_section(text: str) -> str:
    start = text.index("## Where things are")
    return text[start : text.index("\n## ", start + 1)]


def modules(root: Path) -> list[str]:
    """Every module and script of ``lib/``, as a path from the repository's root."""
    return sorted(
        str(path.relative_to(root))
        for path in (root / "lib").rglob("*")
        if path.suffix in (".py", ".sh") and path.name not in PLUMBING and "__pycache__" not in path.parts
    )


def named(index: str, files: list[str]) -> set[str]:
    """The files that a backticked token of the index names: a path's tail (``pods.py``,
    ``contracts/mxnet.py``, ``lib/ansible_zygote/wire.py``) that ends exactly one file's path."""
    found = set()
    for token in TOKEN.findall(index):
        matches = [f for f in files if f == token or f.endswith("/" + token)]
        if len(matches) == 1:
            found.add(matches[0])
    return found


def test_the_index_names_every_module_of_lib():
    files = modules(ROOT)
    assert len(files) > 40  # the whole tree, not an empty glob
    missing = sorted(set(files) - named(index_section(DOC.read_text()), files))
    assert not missing, f"docs/architecture.md's index does not name: {missing}"


def test_a_name_that_fits_two_modules_names_neither():
    files = ["lib/a/contracts/mxnet.py", "lib/a/profiles/mxnet.py", "lib/a/pods.py"]
    index = "`mxnet.py`, `profiles/mxnet.py`, `pods.py`, `gone.py`, `<kind>.py`"
    assert named(index, files) == {"lib/a/profiles/mxnet.py", "lib/a/pods.py"}
