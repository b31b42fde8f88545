"""The stdlib Kubernetes REST client (lib/training_kube/client.py) against a recording fake API server
on the loopback: kubeconfig loading and authentication, what request() puts on the wire, how refusals
become ApiError, resource paths, list(), and the temporary files of inline certificates."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import socket
import ssl
import subprocess
import tempfile
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml
from training_kube.client import RESOURCES, ApiError, Client, resource_path, unavailable


class FakeApiServer(ThreadingHTTPServer):
    """Answers (method, path) from a table of canned (status, body); records every request."""

    def __init__(self):
        super().__init__(("127.0.0.1", 0), Handler)
        self.answers: dict[tuple[str, str], tuple[int, object]] = {}
        self.requests: list[dict] = []
        self.url = f"http://127.0.0.1:{self.server_address[1]}"

    def answer(self, method, path, status=200, body=None):
        self.answers[(method, path)] = (status, body)


class Handler(BaseHTTPRequestHandler):
    def handle_one(self):
        url = urllib.parse.urlsplit(self.path)
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        headers = {k.lower(): v for k, v in self.headers.items()}
        record = {"method": self.command, "path": url.path, "query": url.query, "headers": headers}
        self.server.requests.append({**record, "body": json.loads(raw) if raw else None})
        status, body = self.server.answers.get((self.command, url.path), (404, {"message": "no answer"}))
        payload = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = handle_one

    def log_message(self, *args):
        pass


@contextlib.contextmanager
def serving(tls: ssl.SSLContext | None = None):
    server = FakeApiServer()
    if tls:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
        server.url = server.url.replace("http:", "https:")
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture(autouse=True)
def no_ambient_config(monkeypatch):
    for name in ("KUBECONFIG", "K8S_AUTH_KUBECONFIG", "KUBERNETES_SERVICE_HOST"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("no_proxy", "*")


@pytest.fixture
def api():
    with serving() as server:
        yield server


def kubeconfig(path, server, user=None, **cluster):
    config = {
        "current-context": "ctx",
        "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}],
        "clusters": [{"name": "c", "cluster": {"server": server, **cluster}}],
        "users": [{"name": "u", "user": user or {}}],
    }
    path.write_text(yaml.safe_dump(config))
    return str(path)


def client_for(tmp_path, server, user=None, **cluster):
    return Client(kubeconfig(tmp_path / "config", server, user, **cluster), timeout=5)


@pytest.mark.parametrize(
    ("server", "expected"),
    [
        ("http://user:pass@127.0.0.1:8888", "http://127.0.0.1:8888"),
        ("https://admin@kube.example:6443/", "https://kube.example:6443"),
        ("http://kube.example/prefix/", "http://kube.example/prefix"),
        ("https://[::1]:6443", "https://[::1]:6443"),
        ("https://tok@[fd00::1]:6443/", "https://[fd00::1]:6443"),
    ],
)
def test_the_server_url_loses_its_userinfo_and_trailing_slash(tmp_path, server, expected):
    assert client_for(tmp_path, server).server == expected


@pytest.mark.parametrize(
    ("user", "owner", "authorization"),
    [
        ({"token": "abc"}, True, "Bearer abc"),
        ({"token": "abc"}, False, "Bearer abc"),
        ({"token": "abc", "username": "job", "password": "pw"}, True, "Bearer abc"),
        ({"username": "job", "password": "pw"}, True, "Basic am9iOnB3"),
        ({"username": "job", "password": "pw"}, False, None),
        ({"username": "job"}, True, "Basic am9iOg=="),
        ({}, True, None),
    ],
)
def test_tokens_always_and_basic_identity_only_on_owner_requests(tmp_path, api, user, owner, authorization):
    api.answer("GET", "/api/v1/pods", body={})
    proxy_url = api.url.replace("http://", "http://user:pass@")
    client_for(tmp_path, proxy_url, user).request("GET", "/api/v1/pods", owner=owner)
    assert api.requests[0]["headers"].get("authorization") == authorization


@pytest.mark.parametrize(("current", "token"), [("a", "ta"), ("b", "tb")])
def test_the_current_context_picks_its_cluster_and_user(tmp_path, current, token):
    config = {
        "current-context": current,
        "contexts": [{"name": n, "context": {"cluster": f"c{n}", "user": f"u{n}"}} for n in "ab"],
        "clusters": [{"name": f"c{n}", "cluster": {"server": f"http://{n}.test"}} for n in "ab"],
        "users": [{"name": f"u{n}", "user": {"token": f"t{n}"}} for n in "ab"],
    }
    (tmp_path / "config").write_text(yaml.safe_dump(config))
    client = Client(str(tmp_path / "config"))
    assert (client.server, client.headers["Authorization"]) == (f"http://{current}.test", f"Bearer {token}")


@pytest.mark.parametrize(
    ("env", "argument", "server"),
    [
        ({"KUBECONFIG": "a"}, None, "http://a.test"),
        ({"KUBECONFIG": "b"}, None, "http://b.test"),
        ({"KUBECONFIG": "a:b"}, None, "http://a.test"),
        ({"KUBECONFIG": "b:a"}, None, "http://b.test"),
        ({"KUBECONFIG": "a", "K8S_AUTH_KUBECONFIG": "b"}, None, "http://b.test"),
        ({"KUBECONFIG": "b", "K8S_AUTH_KUBECONFIG": "a:b"}, None, "http://a.test"),
        ({"KUBECONFIG": "b", "K8S_AUTH_KUBECONFIG": "b"}, "a", "http://a.test"),
    ],
)
def test_the_kubeconfig_is_the_argument_then_k8s_auth_then_the_first_of_kubeconfig(
    tmp_path, monkeypatch, env, argument, server
):
    files = {n: kubeconfig(tmp_path / n, f"http://{n}.test") for n in "ab"}
    for name, value in env.items():
        monkeypatch.setenv(name, os.pathsep.join(files[n] for n in value.split(":")))
    assert Client(files.get(argument)).server == server


JSON, MERGE = "application/json", "application/merge-patch+json"
POD = "/api/v1/namespaces/ns/pods/p"


@pytest.mark.parametrize(
    ("method", "body", "options", "raw_query", "content_type"),
    [
        ("GET", None, {}, "", None),
        ("POST", {"kind": "Pod"}, {"query": {"fieldValidation": "Strict"}}, "fieldValidation=Strict", JSON),
        ("PATCH", {"metadata": {"labels": {"a": "b"}}}, {"content_type": MERGE}, "", MERGE),
        ("DELETE", {"propagationPolicy": "Background"}, {}, "", JSON),
        ("GET", None, {"query": {"labelSelector": "a=1,b=x y"}}, "labelSelector=a%3D1%2Cb%3Dx+y", None),
    ],
)
def test_a_request_sends_its_method_path_query_body_and_headers(
    tmp_path, api, method, body, options, raw_query, content_type
):
    api.answer(method, POD, body={"ok": True})
    assert client_for(tmp_path, api.url).request(method, POD, body, **options) == {"ok": True}
    (sent,) = api.requests
    assert (sent["method"], sent["path"], sent["query"]) == (method, POD, raw_query)
    assert sent["body"] == body
    assert (sent["headers"]["accept"], sent["headers"].get("content-type")) == (JSON, content_type)


@pytest.mark.parametrize(
    ("status", "payload", "result"), [(200, b"", None), (201, b'{"a": [1, null]}', {"a": [1, None]})]
)
def test_a_response_body_is_decoded_and_an_empty_one_is_none(tmp_path, api, status, payload, result):
    api.answer("POST", "/api/v1/nodes", status, payload)
    assert client_for(tmp_path, api.url).request("POST", "/api/v1/nodes", {}) == result


def refusal(status, message, retry):
    return (status, {"kind": "Status", "code": status, "message": message}, message, retry)


@pytest.mark.parametrize(
    ("status", "payload", "message", "retry"),
    [
        refusal(404, 'pods "p" not found', False),
        refusal(409, "the object has been modified", False),
        refusal(422, "spec.containers: Required value", False),
        refusal(429, "too many requests", True),
        refusal(500, "etcdserver: request timed out", True),
        (503, b"404 page not found\n", "404 page not found\n", True),
        (502, b"<html>" + b"x" * 400, "<html>" + "x" * 294, True),
        (404, b'{"kind": "Status"}', '{"kind": "Status"}', False),
        (500, b"null", "null", True),
        (500, b'["x"]', '["x"]', True),
    ],
)
def test_a_refusal_raises_api_error_with_the_status_message_or_the_raw_body(
    tmp_path, api, status, payload, message, retry
):
    api.answer("GET", "/api/v1/pods", status, payload)
    with pytest.raises(ApiError) as caught:
        client_for(tmp_path, api.url).request("GET", "/api/v1/pods")
    assert (caught.value.status, caught.value.message, unavailable(caught.value)) == (status, message, retry)
    assert str(caught.value) == f"GET /api/v1/pods: {status} {message}"


@pytest.mark.parametrize(
    ("err", "retry"), [(ConnectionRefusedError(), True), (TimeoutError(), True), (ValueError(), False)]
)
def test_unavailable_means_overloaded_down_or_unreachable(err, retry):
    assert unavailable(err) is retry


def test_a_closed_port_is_an_unavailable_os_error(tmp_path):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(OSError) as caught:
        client_for(tmp_path, f"http://127.0.0.1:{port}").request("GET", "/api/v1/pods")
    assert unavailable(caught.value)


@pytest.mark.parametrize(
    ("api_version", "kind", "namespace", "name", "path"),
    [
        ("v1", "Pod", "ns", "p", "/api/v1/namespaces/ns/pods/p"),
        ("v1", "Node", None, "n1", "/api/v1/nodes/n1"),
        ("kubeflow.org/v1", "TFJob", "ns", "job", "/apis/kubeflow.org/v1/namespaces/ns/tfjobs/job"),
        ("scheduling.k8s.io/v1", "PriorityClass", None, None, "/apis/scheduling.k8s.io/v1/priorityclasses"),
    ],
)
def test_resource_paths_for_core_and_group_kinds(api_version, kind, namespace, name, path):
    assert resource_path(api_version, kind, namespace, name) == path


@pytest.mark.parametrize(("api_version", "kind"), sorted(RESOURCES))
def test_every_known_kind_is_addressed_by_its_plural(api_version, kind):
    base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    plural = RESOURCES[(api_version, kind)]
    assert plural == plural.lower() and plural.startswith(kind.lower()[:4])
    assert resource_path(api_version, kind, "ns", "x") == f"{base}/namespaces/ns/{plural}/x"
    assert resource_path(api_version, kind, None) == f"{base}/{plural}"


@pytest.mark.parametrize(
    ("api_version", "kind"),
    [("v1", "Deployment"), ("apps/v1", "Pod"), ("kubeflow.org/v2", "TFJob"), ("v1", "pod")],
)
def test_an_unknown_kind_is_a_value_error(api_version, kind):
    with pytest.raises(ValueError, match="unknown kind"):
        resource_path(api_version, kind, "ns")


@pytest.mark.parametrize(
    ("selector", "answer", "raw_query"),
    [
        ({}, {"items": []}, ""),
        ({"app": "x"}, {"items": None}, "labelSelector=app%3Dx"),
        ({"c": "3", "a": "1", "b": "2"}, {}, "labelSelector=a%3D1%2Cb%3D2%2Cc%3D3"),
    ],
)
def test_list_sends_the_label_selector_sorted_and_no_items_is_an_empty_list(
    tmp_path, api, selector, answer, raw_query
):
    api.answer("GET", "/apis/kubeflow.org/v1/namespaces/ns/tfjobs", body=answer)
    assert client_for(tmp_path, api.url).list("kubeflow.org/v1", "TFJob", "ns", selector) == []
    assert api.requests[0]["query"] == raw_query


def test_list_completes_items_and_drops_managed_fields(tmp_path, api):
    items = [
        {"metadata": {"name": "p", "managedFields": [{"manager": "kubelet"}], "uid": "1"}},
        {"apiVersion": "example/v9", "kind": "Other", "metadata": {"name": "q"}},
        {"spec": {}},
    ]
    api.answer("GET", "/api/v1/pods", body={"items": items})
    assert client_for(tmp_path, api.url).list("v1", "Pod", None, {}) == [
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "uid": "1"}},
        {"apiVersion": "example/v9", "kind": "Other", "metadata": {"name": "q"}},
        {"apiVersion": "v1", "kind": "Pod", "spec": {}},
    ]


OPENSSL = (
    "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout key.pem"
    " -out cert.pem -days 1 -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1"
)


@pytest.fixture(scope="module")
def cert(tmp_path_factory):
    if not shutil.which("openssl"):
        pytest.skip("no openssl CLI to make a certificate")
    pki = tmp_path_factory.mktemp("pki")
    subprocess.run(OPENSSL.split(), cwd=pki, check=True, capture_output=True)
    return pki


def test_inline_certificates_work_over_tls_and_close_removes_their_files(tmp_path, monkeypatch, cert):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    data = {name: base64.b64encode((cert / f"{name}.pem").read_bytes()).decode() for name in ("cert", "key")}
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(cert / "cert.pem", cert / "key.pem")
    with serving(tls) as server:
        server.answer("GET", "/version", body={"gitVersion": "v1.30.0"})
        user = {"client-certificate-data": data["cert"], "client-key-data": data["key"]}
        client = client_for(tmp_path, server.url, user, **{"certificate-authority-data": data["cert"]})
        assert client.request("GET", "/version") == {"gitVersion": "v1.30.0"}
    contents = sorted(p.read_bytes()[:16] for p in scratch.iterdir())
    assert contents == [b"-----BEGIN CERTI", b"-----BEGIN CERTI", b"-----BEGIN PRIVA"]
    client.close()
    assert list(scratch.iterdir()) == []


def test_certificate_paths_are_relative_to_the_kubeconfig(tmp_path, monkeypatch, cert):
    shutil.copy(cert / "cert.pem", tmp_path / "ca.pem")
    monkeypatch.chdir(cert)
    client = client_for(tmp_path, "https://127.0.0.1:6443", **{"certificate-authority": "ca.pem"})
    ca = "certificate-authority"
    assert client._file({ca: "ca.pem"}, ca, "/k") == "/k/ca.pem"
    assert client._file({ca: "/etc/ca.pem"}, ca, "/k") == "/etc/ca.pem"
    assert client._file({}, "client-key", "/k") is None
    assert client._tmp == []
