"""The Grafana dashboard (config/grafana) asks for metrics the running operator really serves."""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.cluster

ROOT = Path(__file__).resolve().parent.parent.parent
DASHBOARD = json.loads((ROOT / "config" / "grafana" / "ansible-training-operator.json").read_text())
# Under make run both endpoints are plain HTTP on loopback (docs/monitoring.md).
ENDPOINTS = ["http://127.0.0.1:8443/metrics", "http://127.0.0.1:8686/metrics"]
METRIC = re.compile(r"\b(training_operator_\w+|controller_runtime_\w+|workqueue_\w+)")


def queried() -> set[str]:
    exprs = [t["expr"] for p in DASHBOARD["panels"] for t in p["targets"]]
    exprs.append(DASHBOARD["templating"]["list"][1]["definition"])
    return {m for e in exprs for m in METRIC.findall(e)}


def test_the_dashboard_is_well_formed():
    ids = [p["id"] for p in DASHBOARD["panels"]]
    assert len(ids) == len(set(ids))
    assert all(p["targets"] and p["title"] for p in DASHBOARD["panels"])
    assert len(queried()) >= 8


def declared(exposition: str) -> set[str]:
    """Metric names an endpoint declares (``# TYPE``), whether or not it has samples yet; a
    histogram's series (``_bucket``, ``_sum``, ``_count``) with it."""
    names = set()
    for name, kind in re.findall(r"^# TYPE (\S+) (\S+)$", exposition, re.MULTILINE):
        names.add(name)
        if kind == "histogram":
            names.update(f"{name}{suffix}" for suffix in ("_bucket", "_sum", "_count"))
    return names


def test_every_metric_the_dashboard_asks_for_is_served():
    served = set().union(
        *(declared(urllib.request.urlopen(url, timeout=10).read().decode()) for url in ENDPOINTS)
    )
    missing = sorted(queried() - served)
    assert not missing, f"the dashboard asks for metrics nobody serves: {missing}"


def test_the_check_can_fail():
    text = "# TYPE a_total counter\n# TYPE t_seconds histogram\n"
    assert declared(text) == {"a_total", "t_seconds", "t_seconds_bucket", "t_seconds_sum", "t_seconds_count"}
