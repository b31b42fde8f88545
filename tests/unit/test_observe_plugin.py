"""The observe action plugin's node reads, with a recording fake client: nodes are read only for
pods being deleted, once per node, through paths the client knows, and a gone node reads absent."""

from __future__ import annotations

from training_job_observe import _nodes_of_terminating
from training_kube.client import ApiError


class RecordingClient:
    def __init__(self, nodes):
        self.nodes = nodes
        self.calls = []

    def request(self, method, path, body=None, owner=True, **_kw):
        self.calls.append((method, path, owner))
        name = path.rsplit("/", 1)[1]
        if name not in self.nodes:
            raise ApiError(404, '{"message": "not found"}', method, path)
        return self.nodes[name]


def pod(name, node, deleting=False):
    meta = {"name": name}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-23T10:00:00Z"
    return {"metadata": meta, "spec": {"nodeName": node}}


def test_only_nodes_of_terminating_pods_are_read_once_each():
    ready = {"metadata": {"name": "a"}}
    client = RecordingClient({"a": ready})
    pods = [pod("p0", "a", True), pod("p1", "a", True), pod("p2", "b", False), pod("p3", "gone", True)]
    assert _nodes_of_terminating(client, pods) == [ready]
    assert client.calls == [("GET", "/api/v1/nodes/a", False), ("GET", "/api/v1/nodes/gone", False)]


def test_nothing_is_read_when_no_pod_is_terminating():
    client = RecordingClient({})
    assert _nodes_of_terminating(client, [pod("p0", "a")]) == []
    assert client.calls == []
