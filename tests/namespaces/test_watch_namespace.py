"""The operator with WATCH_NAMESPACE, as its own ServiceAccount (hack/test.sh): the namespace of
its identity (OLM's OwnNamespace) and one more (the list a deployment may set) are served; a
job anywhere else is never touched. A second operator beside it serves another namespace, as a
cluster sharded across deployments runs (docs/performance.md): each job is one operator's."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest
from kube import get, namespace_fixture, replica, tfjob, wait_for

pytestmark = pytest.mark.watch_namespace

OWN = "ato-e2e-operator"
WATCHED = "ato-watched"
UNWATCHED = "ato-unwatched"
SHARD = "ato-shard-b"  # the second operator's (hack/test.sh, in a network namespace of its own)

# ato-e2e-operator and ato-watched are made by hack/test.sh with the operator's identity.
unwatched = namespace_fixture(UNWATCHED)


def conditions(namespace: str, name: str) -> list[dict]:
    return get("tfjob", "-n", namespace, name).get("status", {}).get("conditions") or []


def succeeded(namespace: str, name: str) -> bool:
    return [c["type"] for c in conditions(namespace, name)][-1:] == ["Succeeded"]


@pytest.mark.parametrize("namespace", [OWN, WATCHED])
def test_a_job_in_a_watched_namespace_runs_to_the_end(namespace: str) -> None:
    name = tfjob(f"watched-{uuid.uuid4().hex[:5]}", {"Worker": replica(0)}, namespace)
    wait_for(lambda: succeeded(namespace, name), what=f"{namespace}/{name} Succeeded")


def test_a_job_in_another_namespace_is_left_alone() -> None:
    ignored = tfjob("ignored", {"Worker": replica(0)}, UNWATCHED)
    control = tfjob(f"control-{uuid.uuid4().hex[:5]}", {"Worker": replica(0)}, WATCHED)
    wait_for(lambda: succeeded(WATCHED, control), what="the control job Succeeded")
    assert conditions(UNWATCHED, ignored) == []
    assert get("pods", "-n", UNWATCHED)["items"] == []


def reconciled_in(log: str, namespace: str) -> bool:
    """Whether the operator whose log this is ran a playbook for a job in ``namespace``."""
    return f'"namespace":"{namespace}","gvk"' in log


def test_two_operators_on_disjoint_namespaces_each_run_only_their_own_jobs() -> None:
    first = tfjob(f"first-{uuid.uuid4().hex[:5]}", {"Worker": replica(0)}, WATCHED)
    second = tfjob(f"second-{uuid.uuid4().hex[:5]}", {"Worker": replica(0)}, SHARD)
    wait_for(lambda: succeeded(WATCHED, first), what=f"{WATCHED}/{first} Succeeded")
    wait_for(lambda: succeeded(SHARD, second), what=f"{SHARD}/{second} Succeeded")
    first_log = Path(os.environ["OPERATOR_LOG"]).read_text(errors="replace")
    second_log = Path(os.environ["SHARD_OPERATOR_LOG"]).read_text(errors="replace")
    assert reconciled_in(first_log, WATCHED) and reconciled_in(second_log, SHARD)
    assert not reconciled_in(first_log, SHARD), "the first operator reconciled the second's job"
    assert not reconciled_in(second_log, WATCHED), "the second operator reconciled the first's job"
    assert not reconciled_in(second_log, OWN)
