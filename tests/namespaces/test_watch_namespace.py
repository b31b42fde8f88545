"""The operator with WATCH_NAMESPACE, as its own ServiceAccount (hack/test.sh): the namespace of
its identity (OLM's OwnNamespace) and one more (the list a deployment may set) are served; a
job anywhere else is never touched."""

from __future__ import annotations

import uuid

import pytest
from kube import get, namespace_fixture, replica, tfjob, wait_for

pytestmark = pytest.mark.watch_namespace

OWN = "ato-e2e-operator"
WATCHED = "ato-watched"
UNWATCHED = "ato-unwatched"

# ato-e2e-operator and ato-watched are made by hack/test.sh with the operator's identity.
unwatched = namespace_fixture(UNWATCHED)


def conditions(namespace: str, name: str) -> list[dict]:
    return get("tfjob", "-n", namespace, name).get("status", {}).get("conditions") or []


def succeeded(namespace: str, name: str) -> bool:
    return [c["type"] for c in conditions(namespace, name)][-1:] == ["Succeeded"]


@pytest.mark.parametrize("namespace", [OWN, WATCHED])
def test_a_job_in_a_watched_namespace_runs_to_the_end(namespace: str) -> None:
    name = tfjob(f"watched-{uuid.uuid4().hex[:5]}", {"Worker": replica(0)}, namespace)
    wait_for(lambda: succeeded(namespace, name), timeout=90, what=f"{namespace}/{name} Succeeded")


def test_a_job_in_another_namespace_is_left_alone() -> None:
    ignored = tfjob("ignored", {"Worker": replica(0)}, UNWATCHED)
    control = tfjob(f"control-{uuid.uuid4().hex[:5]}", {"Worker": replica(0)}, WATCHED)
    wait_for(lambda: succeeded(WATCHED, control), timeout=90, what="the control job Succeeded")
    assert conditions(UNWATCHED, ignored) == []
    assert get("pods", "-n", UNWATCHED)["items"] == []
