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


# --- pods read again past the runtime's cache ------------------------------------------------

WAKE_TIME = "2026-11-24T12:00:00Z"
JOB_PODS = {"apiVersion": "v1", "kind": "Pod", "key": "pods"}


def job_pod(phase):
    return {"metadata": {"name": "mnist-worker-0", "uid": "u0"}, "status": {"phase": phase}}


class PodsClient:
    def __init__(self, pods):
        self.pods = pods
        self.lists = []
        self.closed = False

    def list(self, api_version, kind, namespace, selector):
        self.lists.append((api_version, kind, namespace, selector))
        if isinstance(self.pods, Exception):
            raise self.pods
        return self.pods

    def close(self):
        self.closed = True


def observe_args(wake):
    return {"namespace": "team", "selector": {"job": "mnist"}, "kinds": [JOB_PODS], "wake": wake}


def wake_for(phase):
    from training_jobs.pod_signature import pod_key, pod_state, signature

    return {"signature": signature({pod_key(job_pod(phase)): pod_state(job_pod(phase))}), "time": WAKE_TIME}


def freeze(monkeypatch, seconds_after_wake):
    import datetime as real

    import training_job_observe

    class Frozen(real.datetime):
        @classmethod
        def now(cls, tz=None):
            return real.datetime(2026, 11, 24, 12, 0, 0, tzinfo=real.UTC) + real.timedelta(
                seconds=seconds_after_wake
            )

    monkeypatch.setattr(training_job_observe, "datetime", Frozen)


def test_pods_behind_a_recent_wake_are_read_again_from_the_api_server(monkeypatch):
    import training_job_observe

    freeze(monkeypatch, 3)
    direct = PodsClient([job_pod("Succeeded")])
    monkeypatch.setattr(training_job_observe.Client, "past_proxy", classmethod(lambda cls: direct))
    fresh = training_job_observe._pods_past_cache(observe_args(wake_for("Succeeded")), [job_pod("Running")])
    assert fresh == [job_pod("Succeeded")]
    assert direct.lists == [("v1", "Pod", "team", {"job": "mnist"})]
    assert direct.closed


def test_pods_missing_from_the_cache_are_read_again_from_the_api_server(monkeypatch):
    # Created by a pass while the runtime's pod watch was down: the cache has none of them, the
    # wake says they all Succeeded. Planned from the cache, the job would stay Created for good.
    import training_job_observe

    freeze(monkeypatch, 1)
    direct = PodsClient([job_pod("Succeeded")])
    monkeypatch.setattr(training_job_observe.Client, "past_proxy", classmethod(lambda cls: direct))
    assert training_job_observe._pods_past_cache(observe_args(wake_for("Succeeded")), []) == [
        job_pod("Succeeded")
    ]


def test_pods_that_agree_with_the_wake_or_an_old_wake_are_not_read_again(monkeypatch):
    import training_job_observe

    direct = PodsClient([job_pod("Succeeded")])
    monkeypatch.setattr(training_job_observe.Client, "past_proxy", classmethod(lambda cls: direct))
    freeze(monkeypatch, 3)
    agree = observe_args(wake_for("Running"))
    assert training_job_observe._pods_past_cache(agree, [job_pod("Running")]) is None
    assert training_job_observe._pods_past_cache(observe_args(None), [job_pod("Running")]) is None
    assert training_job_observe._pods_past_cache(observe_args(""), [job_pod("Running")]) is None
    freeze(monkeypatch, 600)
    old = observe_args(wake_for("Succeeded"))
    assert training_job_observe._pods_past_cache(old, [job_pod("Running")]) is None
    assert direct.lists == []


def test_without_a_way_past_the_proxy_or_an_answer_the_cached_pods_stand(monkeypatch):
    import training_job_observe

    freeze(monkeypatch, 3)
    args = observe_args(wake_for("Succeeded"))
    monkeypatch.setattr(training_job_observe.Client, "past_proxy", classmethod(lambda cls: None))
    assert training_job_observe._pods_past_cache(args, [job_pod("Running")]) is None
    down = PodsClient(ApiError(429, '{"message": "storage is (re)initializing"}', "GET", "/api/v1/pods"))
    monkeypatch.setattr(training_job_observe.Client, "past_proxy", classmethod(lambda cls: down))
    assert training_job_observe._pods_past_cache(args, [job_pod("Running")]) is None
    assert down.closed


def test_the_way_past_the_proxy_is_the_operators_kubeconfig_then_the_service_account(monkeypatch, tmp_path):
    from training_kube import client as kube

    kubeconfig = tmp_path / "kubeconfig.yaml"
    kubeconfig.write_text(
        "current-context: c\ncontexts: [{name: c, context: {cluster: k, user: u}}]\n"
        "clusters: [{name: k, cluster: {server: 'http://127.0.0.1:6443'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
    )
    monkeypatch.setenv("K8S_AUTH_KUBECONFIG", str(tmp_path / "proxy-kubeconfig"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv(kube.API_KUBECONFIG_ENV, str(kubeconfig))
    direct = kube.Client.past_proxy()
    assert direct is not None and direct.server == "http://127.0.0.1:6443"
    assert direct.headers == {"Authorization": "Bearer t"}
    monkeypatch.delenv(kube.API_KUBECONFIG_ENV)
    assert kube.Client.past_proxy() is None, "no kubeconfig of its own and not in a pod"
