"""The `node` parameter of the cluster tests that check what a kubelet does (exit codes, restarts,
graceful deletion, OOM kills, deadlines): `kwok`, the stages of hack/kwok/cluster.yaml, and
`real`, the real node of hack/real-node.sh (kube.node_template turns one into the other)."""

from __future__ import annotations

import pytest
from kube import KWOK, REAL


@pytest.fixture(params=[KWOK, pytest.param(REAL, marks=pytest.mark.real_node)])
def node(request) -> str:
    return request.param


def pytest_collection_modifyitems(config, items):
    """A real variant also carries its module's `cluster` marker, but runs only where the real
    node runs: when the marker expression asks for real_node (hack/test.sh real-node). The
    cluster stage (-m cluster) leaves it out, and so does a run without -m."""
    if "real_node" in (config.getoption("markexpr") or ""):
        return
    real = [
        item for item in items if item.get_closest_marker("real_node") and item.get_closest_marker("cluster")
    ]
    if real:
        config.hook.pytest_deselected(items=real)
        items[:] = [item for item in items if item not in real]
