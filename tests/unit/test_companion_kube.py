"""The companion's client (training_companion.kube) against a loopback API server: kubeconfig
users of every kind the kubernetes client knows (here an exec plugin), several kubeconfig files,
exec tokens fetched again, error meanings the wake watcher relies on, watch streams and
keep-alive."""

from __future__ import annotations

import json
import os
import socket
import stat
import sys
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml
from training_companion.kube import KubeClient
from training_kube.client import ApiError, unavailable
from training_wake.signature import ANNOTATION, pod_state, signature
from training_wake.watcher import Watcher

SELECTOR = "training.kubeflow.org/operator-name"
OWNER = {"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "name": "mnist", "controller": True, "uid": "u"}
POD = {
    "metadata": {"name": "mnist-worker-0", "namespace": "team", "ownerReferences": [OWNER]},
    "status": {"phase": "Running"},
}

PLUGIN = """#!{python}
import datetime, json, os, pathlib

calls = pathlib.Path(os.environ["CALLS"])
n = len(calls.read_text().splitlines()) + 1 if calls.exists() else 1
with calls.open("a") as f:
    f.write(os.environ.get("KUBERNETES_EXEC_INFO", "") + "\\n")
status = {{"token": "tok-%d" % n}}
if os.environ.get("EXPIRES_IN"):
    at = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=int(os.environ["EXPIRES_IN"]))
    status["expirationTimestamp"] = at.strftime("%Y-%m-%dT%H:%M:%SZ")
print(json.dumps({{"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", "status": status}}))
"""


class Api:
    """The loopback API server: records each request; ``answer`` decides the response."""

    def __init__(self):
        self.seen: list[dict] = []
        self.answer = self.default
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive

            def log_message(self, *_args):
                pass

            def handle_one(self):
                length = int(self.headers.get("Content-Length") or 0)
                url = urllib.parse.urlsplit(self.path)
                request = {
                    "method": self.command,
                    "target": self.path,
                    "path": url.path,
                    "query": dict(urllib.parse.parse_qsl(url.query)),
                    "headers": {k.lower(): v for k, v in self.headers.items()},
                    "port": self.client_address[1],
                    "body": json.loads(self.rfile.read(length)) if length else None,
                }
                api.seen.append(request)
                status, body, headers = api.answer(request)
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                if isinstance(body, list):  # a watch: chunked events, then the stream ends
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    for event in body:
                        if event == "drop":
                            self.wfile.flush()
                            self.close_connection = True
                            self.connection.shutdown(socket.SHUT_RDWR)
                            return
                        data = json.dumps(event).encode() + b"\n"
                        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                        self.wfile.flush()
                    self.wfile.write(b"0\r\n\r\n")
                    return
                data = json.dumps(body).encode()
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_PATCH = handle_one

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    @staticmethod
    def default(request):
        return 200, {"kind": "List", "items": [], "metadata": {"resourceVersion": "7"}}, {}

    def tokens(self) -> list[str]:
        return [r["headers"].get("authorization", "") for r in self.seen]


@pytest.fixture
def api():
    server = Api()
    yield server
    server.server.shutdown()
    server.server.server_close()


def plugin(tmp_path, **env) -> dict:
    """An exec user whose plugin prints tok-1, tok-2, ... (one per run, logged in CALLS)."""
    script = tmp_path / "plugin.py"
    script.write_text(PLUGIN.format(python=sys.executable))
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    env = {"CALLS": str(tmp_path / "calls"), **env}
    return {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": str(script),
            "env": [{"name": k, "value": v} for k, v in env.items()],
            "interactiveMode": "Never",
        }
    }


def calls(tmp_path) -> list[dict]:
    path = tmp_path / "calls"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def kubeconfig(path, server=None, user=None, context="test", current=True, name="test"):
    config: dict = {"apiVersion": "v1", "kind": "Config", "clusters": [], "contexts": [], "users": []}
    if server:
        config["clusters"].append({"name": name, "cluster": {"server": server}})
        config["contexts"].append({"name": context, "context": {"cluster": name, "user": name}})
    if user:
        config["users"].append({"name": name, "user": user})
    if current:
        config["current-context"] = context
    path.write_text(yaml.safe_dump(config))
    return str(path)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_exec_users_token_is_sent(api, tmp_path):
    kube = KubeClient(kubeconfig(tmp_path / "config", api.url, plugin(tmp_path)))
    result = kube.request(
        "GET", "/api/v1/namespaces/team/pods", owner=False, query={"labelSelector": SELECTOR}
    )
    assert result["metadata"]["resourceVersion"] == "7"
    (seen,) = api.seen
    assert seen["headers"]["authorization"] == "Bearer tok-1"
    assert seen["path"] == "/api/v1/namespaces/team/pods"
    assert seen["query"] == {"labelSelector": SELECTOR}
    assert seen["headers"]["user-agent"] == "training-companion"
    (info,) = calls(tmp_path)
    assert info["kind"] == "ExecCredential" and info["apiVersion"] == "client.authentication.k8s.io/v1"


def test_the_exec_user_is_what_authenticates(api, tmp_path):
    """The counter-check: the same kubeconfig without the user sends no credentials."""
    kube = KubeClient(kubeconfig(tmp_path / "config", api.url))
    kube.request("GET", "/api/v1/pods")
    assert api.tokens() == [""]


def test_a_kubeconfig_of_several_files(api, tmp_path, monkeypatch):
    """The cluster in one file, the user in another; the first file's current context wins (as
    with kubectl and the operator), although a later file names another."""
    clusters = kubeconfig(tmp_path / "clusters", api.url, context="real")
    users = kubeconfig(tmp_path / "users", user=plugin(tmp_path), current=False)
    elsewhere = kubeconfig(
        tmp_path / "elsewhere", f"http://127.0.0.1:{closed_port()}", context="elsewhere", name="other"
    )
    missing = str(tmp_path / "missing")
    monkeypatch.delenv("K8S_AUTH_KUBECONFIG", raising=False)
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join([missing, clusters, users, elsewhere]))
    kube = KubeClient()
    assert kube.server == api.url
    kube.request("GET", "/api/v1/pods")
    assert api.tokens() == ["Bearer tok-1"]


@pytest.mark.parametrize(
    ("expires_in", "tokens", "runs"),
    [
        # no expirationTimestamp: the plugin's token is kept (until a 401, see below)
        (None, ["Bearer tok-1", "Bearer tok-1"], 1),
        # valid for an hour: kept
        ("3600", ["Bearer tok-1", "Bearer tok-1"], 1),
        # expires within the client's 5-minute margin: fetched again before each request
        ("60", ["Bearer tok-2", "Bearer tok-3"], 3),
    ],
)
def test_an_expiring_exec_token_is_fetched_again(api, tmp_path, expires_in, tokens, runs):
    env = {"EXPIRES_IN": expires_in} if expires_in else {}
    kube = KubeClient(kubeconfig(tmp_path / "config", api.url, plugin(tmp_path, **env)))
    kube.request("GET", "/api/v1/pods")
    kube.request("GET", "/api/v1/pods")
    assert api.tokens() == tokens
    assert len(calls(tmp_path)) == runs


def test_a_401_fetches_the_exec_credentials_again(api, tmp_path):
    """A token without expiry the API server no longer takes (or a plugin that failed at start)."""
    api.answer = lambda r: (
        (401, {"kind": "Status", "code": 401, "message": "Unauthorized"}, {})
        if r["headers"].get("authorization") == "Bearer tok-1"
        else Api.default(r)
    )
    kube = KubeClient(kubeconfig(tmp_path / "config", api.url, plugin(tmp_path)))
    kube.reload_interval = 0
    with pytest.raises(ApiError) as err:
        kube.request("GET", "/api/v1/pods")
    assert err.value.status == 401 and not unavailable(err.value)
    kube.request("GET", "/api/v1/pods")
    assert api.tokens() == ["Bearer tok-1", "Bearer tok-2"]


def test_a_401_does_not_run_the_plugin_again_right_away(api, tmp_path):
    api.answer = lambda r: (401, {"kind": "Status", "code": 401, "message": "Unauthorized"}, {})
    kube = KubeClient(kubeconfig(tmp_path / "config", api.url, plugin(tmp_path)))
    for _ in range(3):
        with pytest.raises(ApiError):
            kube.request("GET", "/api/v1/pods")
    assert len(calls(tmp_path)) == 1, "within reload_interval of the last load"


def test_credentials_that_cannot_be_refreshed_are_unavailable(api, tmp_path):
    """An auth provider's refresh that fails (gcp, oidc): an OSError the watcher retries, never
    an exception that would end its write loop."""
    kube = KubeClient(kubeconfig(tmp_path / "config", api.url, plugin(tmp_path)))

    def refresh(_configuration):
        raise RuntimeError("the identity provider is down")

    kube.api.configuration.refresh_api_key_hook = refresh
    with pytest.raises(OSError) as err:
        kube.request("PATCH", "/apis/kubeflow.org/v1/namespaces/team/tfjobs/mnist", {"metadata": {}})
    assert unavailable(err.value) and "identity provider" in str(err.value)
    assert not api.seen


@pytest.mark.parametrize(
    ("status", "retry_after", "is_unavailable"),
    [
        (500, None, True),
        (503, "1", True),
        (504, None, True),
        (429, "1", True),
        (404, None, False),
        (403, None, False),
        (409, None, False),
        (410, None, False),
    ],
)
def test_errors_keep_the_small_clients_meaning(api, tmp_path, status, retry_after, is_unavailable):
    """429 and 5xx are unavailable() and reach the caller at once: no retry, no waiting on
    Retry-After (the watcher has its own schedule)."""
    headers = {"Retry-After": retry_after} if retry_after else {}
    api.answer = lambda r: (status, {"kind": "Status", "code": status, "message": "no luck"}, headers)
    kube = KubeClient(kubeconfig(tmp_path / "config", api.url, plugin(tmp_path)))
    for method, body in (("GET", None), ("PATCH", {"metadata": {}})):
        with pytest.raises(ApiError) as err:
            kube.request(method, "/apis/kubeflow.org/v1/namespaces/team/tfjobs/mnist", body)
        assert err.value.status == status
        assert err.value.message == "no luck"
        assert unavailable(err.value) is is_unavailable
    assert len(api.seen) == 2


def test_an_unreachable_api_server_is_unavailable(tmp_path):
    kube = KubeClient(kubeconfig(tmp_path / "config", f"http://127.0.0.1:{closed_port()}", plugin(tmp_path)))
    with pytest.raises(OSError) as err:
        kube.request("GET", "/api/v1/pods")
    assert unavailable(err.value)
    with pytest.raises(OSError):
        list(kube.stream("/api/v1/pods", {"watch": "true"}, 5))


def test_a_watch_streams_its_events_and_keeps_the_connection(api, tmp_path):
    events = [
        {"type": "MODIFIED", "object": {**POD, "metadata": {**POD["metadata"], "resourceVersion": "8"}}},
        {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "9"}}},
    ]
    api.answer = lambda r: (200, events, {}) if r["query"].get("watch") else Api.default(r)
    kube = KubeClient(kubeconfig(tmp_path / "config", api.url, plugin(tmp_path)))
    watcher = Watcher(kube)
    pods, rv = watcher._list("team", SELECTOR)
    assert (pods, rv) == ([], "7")
    assert list(watcher._stream("team", SELECTOR, rv, 42)) == events
    kube.request("GET", "/api/v1/pods")
    listed, watched, again = api.seen
    assert watched["path"] == "/api/v1/namespaces/team/pods"
    assert watched["query"] == {
        "labelSelector": SELECTOR,
        "watch": "true",
        "resourceVersion": "7",
        "allowWatchBookmarks": "true",
        "timeoutSeconds": "42",
    }
    assert watched["headers"]["authorization"] == "Bearer tok-1"
    assert listed["port"] == watched["port"] == again["port"], "one kept-alive connection"


def test_many_watches_at_once_keep_their_connections(api, tmp_path, caplog):
    """Two watches per namespace and the writes: more than urllib3's default pool of 5 per CPU,
    each connection kept for the next request rather than discarded with a warning."""
    streams = 24
    together = threading.Barrier(streams, timeout=10)

    def answer(r):
        together.wait()  # every watch is open at once
        return 200, [{"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "9"}}}], {}

    api.answer = answer
    kube = KubeClient(kubeconfig(tmp_path / "config", api.url, plugin(tmp_path)))
    results: list[list[bytes]] = []
    threads = [
        threading.Thread(target=lambda: results.append(list(kube.stream("/api/v1/pods", {}, 5))))
        for _ in range(streams)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=20)
    assert len(results) == streams
    assert not [r for r in caplog.records if "pool is full" in r.getMessage()]


def test_a_dropped_watch_is_an_oserror(api, tmp_path):
    api.answer = lambda r: (200, [{"type": "ADDED", "object": POD}, "drop"], {})
    kube = KubeClient(kubeconfig(tmp_path / "config", api.url, plugin(tmp_path)))
    lines = kube.stream("/api/v1/pods", {"watch": "true"}, 5)
    assert json.loads(next(lines)) == {"type": "ADDED", "object": POD}
    with pytest.raises(OSError):
        next(lines)


def test_the_watcher_wakes_a_job_through_the_client(api, tmp_path):
    """List the pods and the jobs, find the job's annotation behind, patch it: every call the
    watcher makes, authenticated by the exec plugin."""
    tfjob = {"metadata": {"name": "mnist", "namespace": "team", "annotations": {ANNOTATION: "old"}}}

    def answer(r):
        if r["method"] == "PATCH":
            return 200, tfjob, {}
        if r["path"] == "/api/v1/namespaces/team/pods":
            return 200, {"items": [POD], "metadata": {"resourceVersion": "7"}}, {}
        if r["path"] == "/apis/kubeflow.org/v1/namespaces/team/tfjobs":
            return 200, {"items": [tfjob], "metadata": {"resourceVersion": "7"}}, {}
        return 404, {"kind": "Status", "code": 404, "message": "not found"}, {}

    api.answer = answer
    kube = KubeClient(kubeconfig(tmp_path / "config", api.url, plugin(tmp_path)))
    watcher = Watcher(kube, namespaces=["team"])
    pods, _ = watcher._list("team", SELECTOR)
    watcher._catch_up("team", SELECTOR, pods)
    assert watcher.flush() == 1
    patch = api.seen[-1]
    assert patch["method"] == "PATCH"
    assert patch["path"] == "/apis/kubeflow.org/v1/namespaces/team/tfjobs/mnist"
    assert patch["headers"]["content-type"] == "application/merge-patch+json"
    assert patch["body"] == {
        "metadata": {
            # Computed from the pod by the signature module, not read back from the watcher.
            "annotations": {ANNOTATION: signature({"mnist-worker-0": pod_state(POD)})},
            # The same write brings an idle job back to the runtime's watch.
            "labels": {"training.ato.dev/idle": None},
        }
    }
    assert set(api.tokens()) == {"Bearer tok-1"}


def test_in_a_pod_without_a_kubeconfig_the_service_account_is_used(tmp_path, monkeypatch):
    from kubernetes.config import incluster_config

    (tmp_path / "token").write_text("sa-token")
    (tmp_path / "ca.crt").write_text("not checked before a connection")
    monkeypatch.setattr(incluster_config, "SERVICE_TOKEN_FILENAME", str(tmp_path / "token"))
    monkeypatch.setattr(incluster_config, "SERVICE_CERT_FILENAME", str(tmp_path / "ca.crt"))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    monkeypatch.delenv("K8S_AUTH_KUBECONFIG", raising=False)
    kube = KubeClient()
    assert kube.in_cluster and kube.server == "https://10.96.0.1:443"
    assert kube.api.configuration.auth_settings()["BearerToken"]["value"] == "bearer sa-token"


def test_a_kubeconfig_wins_over_the_pods_service_account(api, tmp_path, monkeypatch):
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    monkeypatch.delenv("K8S_AUTH_KUBECONFIG", raising=False)
    monkeypatch.setenv("KUBECONFIG", kubeconfig(tmp_path / "config", api.url, plugin(tmp_path)))
    kube = KubeClient()
    assert not kube.in_cluster and kube.server == api.url


def test_a_proxy_from_the_environment_is_used(api, tmp_path, monkeypatch):
    monkeypatch.setenv("http_proxy", api.url)
    for name in ("no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    kube = KubeClient(kubeconfig(tmp_path / "config", "http://kube.invalid:6443", plugin(tmp_path)))
    kube.request("GET", "/api/v1/pods")
    (seen,) = api.seen
    assert seen["target"] == "http://kube.invalid:6443/api/v1/pods"
    assert seen["headers"]["authorization"] == "Bearer tok-1"
