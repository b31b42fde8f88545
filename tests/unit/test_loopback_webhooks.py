"""hack/loopback_webhooks.py: upstream's webhook configurations pointed at a manager on 127.0.0.1."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "hack"))
import loopback_webhooks

URL = "https://127.0.0.1:19463"


def webhook(name: str, path: str, **extra: object) -> dict:
    service = {"name": "webhook-service", "namespace": "system", "path": path}
    return {"name": name, "clientConfig": {"service": service}, "failurePolicy": "Fail", **extra}


SELECTOR = {"matchExpressions": [{"key": "jobset.sigs.k8s.io/jobset-name", "operator": "Exists"}]}
MUTATING = {
    "apiVersion": "admissionregistration.k8s.io/v1",
    "kind": "MutatingWebhookConfiguration",
    "metadata": {"name": "mutating-webhook-configuration", "labels": {"x": "y"}},
    "webhooks": [
        webhook("mjobset.kb.io", "/mutate-jobset-x-k8s-io-v1alpha2-jobset"),
        webhook("mpod.kb.io", "/mutate--v1-pod", objectSelector=SELECTOR),
    ],
}
SERVICE = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "webhook-service"}}
URLS = [f"{URL}/mutate-jobset-x-k8s-io-v1alpha2-jobset", f"{URL}/mutate--v1-pod"]


@pytest.mark.parametrize(
    ("docs", "prefix", "names", "urls"),
    [
        ([MUTATING], "jobset-", ["jobset-mutating-webhook-configuration"], URLS),
        ([SERVICE, None, MUTATING], "", ["mutating-webhook-configuration"], URLS),
        ([SERVICE], "", [], []),
    ],
    ids=["prefixed", "other-kinds-left-out", "no-webhooks"],
)
def test_loopback_keeps_only_webhook_configurations_served_by_url(docs, prefix, names, urls):
    out = loopback_webhooks.loopback(docs, URL, "Q0E=", prefix)
    assert [c["metadata"]["name"] for c in out] == names
    client_configs = [w["clientConfig"] for c in out for w in c["webhooks"]]
    assert client_configs == [{"url": u, "caBundle": "Q0E="} for u in urls]


def test_loopback_keeps_upstream_rules_and_selectors():
    (out,) = loopback_webhooks.loopback([MUTATING], URL, "Q0E=")
    pod = out["webhooks"][1]
    assert (pod["name"], pod["failurePolicy"], pod["objectSelector"]) == ("mpod.kb.io", "Fail", SELECTOR)
    # The input is not changed: the caller may render it again.
    assert "service" in MUTATING["webhooks"][1]["clientConfig"]
