"""What kustomize renders from config/: every object carries the recommended app.kubernetes.io
labels, selectors stay as they were, and the ServiceMonitor scrapes the metrics Service's ports."""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.cluster

ROOT = Path(__file__).resolve().parent.parent.parent
KUSTOMIZE = ROOT / "bin" / "kustomize"
RECOMMENDED = {
    "app.kubernetes.io/name": "ansible-training-operator",
    "app.kubernetes.io/part-of": "ansible-training-operator",
    "app.kubernetes.io/managed-by": "kustomize",
}
COMPONENTS = {"api", "admission", "rbac", "manager", "metrics", "runtimes"}


@functools.cache
def render(directory: str) -> list[dict]:
    out = subprocess.run(
        [KUSTOMIZE, "build", ROOT / "config" / directory], capture_output=True, text=True, check=True
    )
    return [d for d in yaml.load_all(out.stdout, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) if d]


def labelled(obj: dict) -> bool:
    labels = obj["metadata"].get("labels") or {}
    return RECOMMENDED.items() <= labels.items() and labels.get("app.kubernetes.io/component") in COMPONENTS


@pytest.mark.parametrize("directory", ["default", "runtimes", "network-policy", "prometheus"])
def test_every_object_carries_the_recommended_labels(directory: str) -> None:
    unlabelled = [f"{o['kind']}/{o['metadata']['name']}" for o in render(directory) if not labelled(o)]
    assert not unlabelled


def test_the_labels_reach_the_operator_pod_but_not_the_selectors() -> None:
    objects = {o["kind"]: o for o in render("default") if o["kind"] in ("Deployment", "Service")}
    deployment, service = objects["Deployment"], objects["Service"]
    assert labelled(deployment["spec"]["template"])
    # Selectors are immutable on a Deployment: an upgrade must not change them.
    assert deployment["spec"]["selector"]["matchLabels"] == {"control-plane": "controller-manager"}
    assert service["spec"]["selector"] == {"control-plane": "controller-manager"}


def test_the_service_monitor_scrapes_both_metrics_ports_of_the_metrics_service() -> None:
    (monitor,) = render("prometheus")
    service = next(o for o in render("default") if o["kind"] == "Service")
    assert monitor["metadata"]["namespace"] == service["metadata"]["namespace"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    scraped = {e["port"]: e["scheme"] for e in monitor["spec"]["endpoints"]}
    assert scraped == {"https": "https", "job-metrics": "http"}
    assert set(scraped) == {p["name"] for p in service["spec"]["ports"]}
