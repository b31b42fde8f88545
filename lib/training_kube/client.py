"""A minimal Kubernetes REST client for the operator's own action plugins.

Why not the kubernetes Python client: importing it costs about 0.7 s per task process, more than
the API calls of a whole reconcile. The operator's Ansible runs talk to ansible-operator's local
proxy (plain HTTP, answered from the informer cache), so a few stdlib HTTP calls do the job; the
same client also works against a real API server for the dev loop (TLS, client certificates,
bearer tokens from a kubeconfig).

Requests that carry the proxy's basic-auth identity are attributed to the job being reconciled:
the proxy then starts watching the kinds it returns that the job owns. Creates are sent without
it (``owner=False``) because the proxy would append a second, non-controller owner reference to
objects that already carry the job's controller reference.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import ssl
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

import yaml

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"

# Plural resource paths of the kinds the operator touches; no discovery round-trip needed.
RESOURCES = {
    ("v1", "Pod"): "pods",
    ("v1", "Service"): "services",
    ("v1", "ConfigMap"): "configmaps",
    ("v1", "Secret"): "secrets",
    ("v1", "Event"): "events",
    ("v1", "Node"): "nodes",
    ("v1", "ServiceAccount"): "serviceaccounts",
    ("rbac.authorization.k8s.io/v1", "Role"): "roles",
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): "rolebindings",
    ("kubeflow.org/v1", "TFJob"): "tfjobs",
    ("kubeflow.org/v1", "MXJob"): "mxjobs",
    ("kubeflow.org/v1", "PyTorchJob"): "pytorchjobs",
    ("kubeflow.org/v1", "XGBoostJob"): "xgboostjobs",
    ("kubeflow.org/v1", "JAXJob"): "jaxjobs",
    ("kubeflow.org/v1", "PaddleJob"): "paddlejobs",
    ("kubeflow.org/v1", "MPIJob"): "mpijobs",
    ("batch.paddlepaddle.org/v1", "PaddleJob"): "paddlejobs",
    ("kubeflow.org/v1alpha1", "Caffe2Job"): "caffe2jobs",
    ("apps/v1", "Deployment"): "deployments",
    ("autoscaling/v2", "HorizontalPodAutoscaler"): "horizontalpodautoscalers",
    ("scheduling.k8s.io/v1", "PriorityClass"): "priorityclasses",
    ("scheduling.volcano.sh/v1beta1", "PodGroup"): "podgroups",
    ("scheduling.x-k8s.io/v1alpha1", "PodGroup"): "podgroups",
    ("trainer.kubeflow.org/v1alpha1", "TrainJob"): "trainjobs",
    ("trainer.kubeflow.org/v1alpha1", "TrainingRuntime"): "trainingruntimes",
    ("trainer.kubeflow.org/v1alpha1", "ClusterTrainingRuntime"): "clustertrainingruntimes",
    ("jobset.x-k8s.io/v1alpha2", "JobSet"): "jobsets",
}


class ApiError(Exception):
    def __init__(self, status: int, body: str, method: str, path: str):
        self.status = status
        self.body = body
        try:
            details = json.loads(body)
        except ValueError:
            details = None
        # A Status object; anything else (a proxy's HTML page, null, a list) is only the body.
        self.details = details if isinstance(details, dict) else {}
        message = self.details.get("message") or body[:300]
        super().__init__(f"{method} {path}: {status} {message}")

    @property
    def message(self) -> str:
        return self.details.get("message") or self.body[:300]


def unavailable(err: Exception) -> bool:
    """The API server is down, overloaded or unreachable: retrying soon is the answer."""
    if isinstance(err, ApiError):
        return err.status == 429 or err.status >= 500
    return isinstance(err, OSError)


def resource_path(api_version: str, kind: str, namespace: str | None, name: str | None = None) -> str:
    plural = RESOURCES.get((api_version, kind))
    if plural is None:
        raise ValueError(f"unknown kind {api_version} {kind}")
    base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    path = f"{base}/namespaces/{namespace}/{plural}" if namespace else f"{base}/{plural}"
    return f"{path}/{name}" if name else path


# The operator's own kubeconfig, for the Ansible runs' rare reads past the runtime's proxy (the
# runtime points KUBECONFIG and K8S_AUTH_KUBECONFIG at the proxy); hack/run.sh sets it.
API_KUBECONFIG_ENV = "TRAINING_API_KUBECONFIG"
# libyaml's safe loader where PyYAML has it: a pass reads two or three kubeconfigs, about a
# millisecond each with the pure-Python parser.
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class Client:
    """Talks to the API server or proxy named by a kubeconfig file."""

    def __init__(self, kubeconfig: str | None = None, timeout: float = 30.0, in_cluster: bool = False):
        path = kubeconfig or os.environ.get("K8S_AUTH_KUBECONFIG") or os.environ.get("KUBECONFIG")
        path = os.path.expanduser((path or "~/.kube/config").split(os.pathsep)[0])
        self.timeout = timeout
        self.headers: dict[str, str] = {}
        self.identity: dict[str, str] = {}
        self._tmp: list[str] = []
        self._token_file = ""
        if in_cluster or (not os.path.exists(path) and os.environ.get("KUBERNETES_SERVICE_HOST")):
            self._in_cluster()
            return
        with open(path, encoding="utf-8") as f:
            config = yaml.load(f, Loader=SAFE_LOADER)
        ctx_name = config.get("current-context")
        ctx = next(c["context"] for c in config["contexts"] if c["name"] == ctx_name)
        cluster = next(c["cluster"] for c in config["clusters"] if c["name"] == ctx["cluster"])
        user = next(
            (u.get("user") or {} for u in config.get("users") or [] if u["name"] == ctx.get("user")), {}
        )
        parsed = urllib.parse.urlsplit(cluster["server"])
        # The proxy's kubeconfig also puts the identity into the URL; the header carries it.
        host = parsed.netloc.rpartition("@")[2]
        self.server = urllib.parse.urlunsplit((parsed.scheme, host, parsed.path, "", "")).rstrip("/")
        if user.get("token"):
            self.headers["Authorization"] = f"Bearer {user['token']}"
        elif user.get("username"):
            raw = f"{user['username']}:{user.get('password', '')}".encode()
            self.identity["Authorization"] = "Basic " + base64.b64encode(raw).decode()
        self.context = None
        if parsed.scheme == "https":
            self.context = self._tls(cluster, user, os.path.dirname(path))

    @classmethod
    def past_proxy(cls, timeout: float = 30.0) -> Client | None:
        """The API server itself, not the runtime's proxy and its informer cache: with the
        kubeconfig in :data:`API_KUBECONFIG_ENV`, else in a pod its ServiceAccount; None when
        neither is there."""
        path = os.environ.get(API_KUBECONFIG_ENV, "").split(os.pathsep)[0]
        if path and os.path.exists(path):
            return cls(path, timeout)
        if os.environ.get("KUBERNETES_SERVICE_HOST") and os.path.exists(
            os.path.join(SERVICE_ACCOUNT_DIR, "token")
        ):
            return cls(timeout=timeout, in_cluster=True)
        return None

    def _in_cluster(self) -> None:
        """The pod's ServiceAccount (the companion sidecar has no kubeconfig)."""
        host, port = os.environ["KUBERNETES_SERVICE_HOST"], os.environ.get("KUBERNETES_SERVICE_PORT", "443")
        self.server = f"https://{host}:{port}" if ":" not in host else f"https://[{host}]:{port}"
        self.context = ssl.create_default_context(cafile=os.path.join(SERVICE_ACCOUNT_DIR, "ca.crt"))
        self._token_file = os.path.join(SERVICE_ACCOUNT_DIR, "token")
        self._refresh_token()

    def _refresh_token(self) -> None:
        # The kubelet rotates the projected token file; read it again before each request.
        with open(self._token_file, encoding="utf-8") as f:
            self.headers["Authorization"] = f"Bearer {f.read().strip()}"

    def _file(self, section: dict[str, Any], key: str, base: str) -> str | None:
        if section.get(f"{key}-data"):
            fd, name = tempfile.mkstemp(prefix="kube-")
            with os.fdopen(fd, "wb") as f:
                f.write(base64.b64decode(section[f"{key}-data"]))
            self._tmp.append(name)
            return name
        value = section.get(key)
        return os.path.join(base, value) if value else None

    def _tls(self, cluster, user, base) -> ssl.SSLContext:
        if cluster.get("insecure-skip-tls-verify"):
            ctx = ssl._create_unverified_context()
        else:
            ctx = ssl.create_default_context(cafile=self._file(cluster, "certificate-authority", base))
        cert = self._file(user, "client-certificate", base)
        if cert:
            ctx.load_cert_chain(cert, self._file(user, "client-key", base))
        return ctx

    def close(self) -> None:
        for name in self._tmp:
            with contextlib.suppress(OSError):
                os.unlink(name)

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        content_type: str = "application/json",
        owner: bool = True,
        query: dict[str, str] | None = None,
    ) -> Any:
        return self.send(method, path, body, content_type, owner, query)[1]

    def send(
        self,
        method: str,
        path: str,
        body: Any = None,
        content_type: str = "application/json",
        owner: bool = True,
        query: dict[str, str] | None = None,
    ) -> tuple[int, Any]:
        """:meth:`request`, with the HTTP status of the answer (a server-side apply answers 201
        when it created the object)."""
        if self._token_file:
            self._refresh_token()
        url = self.server + path
        if query:
            url += "?" + urllib.parse.urlencode(query)
        data = None if body is None else json.dumps(body).encode()
        headers = {"Accept": "application/json", **self.headers}
        if owner:
            headers.update(self.identity)
        if data is not None:
            headers["Content-Type"] = content_type
        req = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout, context=self.context) as resp:
                payload = resp.read()
                status = resp.status
        except urllib.error.HTTPError as err:
            raise ApiError(err.code, err.read().decode(errors="replace"), method, path) from None
        return status, (json.loads(payload) if payload else None)

    def apply(self, obj: dict[str, Any], field_manager: str) -> bool:
        """Server-side apply ``obj`` as ``field_manager``, taking over conflicting fields
        (``force``), without the proxy's owner identity (``obj`` carries its owner reference);
        whether it created the object."""
        meta = obj["metadata"]
        path = resource_path(obj["apiVersion"], obj["kind"], meta.get("namespace"), meta["name"])
        query = {"fieldManager": field_manager, "force": "true", "fieldValidation": "Strict"}
        status, _ = self.send(
            "PATCH", path, obj, content_type="application/apply-patch+yaml", owner=False, query=query
        )
        return status == 201

    def list(
        self, api_version: str, kind: str, namespace: str | None, selector: dict[str, str]
    ) -> list[dict]:
        query = (
            {"labelSelector": ",".join(f"{k}={v}" for k, v in sorted(selector.items()))} if selector else None
        )
        result = self.request("GET", resource_path(api_version, kind, namespace), query=query)
        items = result.get("items") or []
        for item in items:
            # List items carry no kind; the planner wants whole objects. managedFields is dropped:
            # nothing reads it, and it is most of a pod's size in every task result.
            item.setdefault("apiVersion", api_version)
            item.setdefault("kind", kind)
            item.get("metadata", {}).pop("managedFields", None)
        return items
