"""The companion's Kubernetes client: the ``kubernetes`` package behind the three calls the wake
watcher makes (a GET of a list, a streaming watch GET, a merge patch of one annotation).

The companion is one long-running process, so it can afford the ``kubernetes`` client's import
(about 0.7 s, once) and gets what the small per-reconcile client (:mod:`training_kube.client`)
leaves out: ``exec`` and ``auth-provider`` users (EKS, GKE, AKS/kubelogin, OIDC), exec tokens
fetched again when they expire, a ``KUBECONFIG`` of several files, and pooled keep-alive
connections (urllib3). The action plugins keep the small client: they would pay that import in
every task.

Errors keep :mod:`training_kube.client`'s meaning, which the watcher's outage handling relies
on: an HTTP answer other than 2xx is an :class:`~training_kube.client.ApiError` with its
status, anything that prevents an answer (refused or dropped connections, timeouts, TLS
failures, credentials that cannot be fetched) is an :class:`OSError`, so
:func:`~training_kube.client.unavailable` holds for 429, 5xx and those.

The ``kubernetes`` package is imported when a :class:`KubeClient` is made, never at import time.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Generator, Mapping
from typing import Any

import yaml
from training_jobs.pod_signature import WAKE_MANAGER
from training_kube.client import ApiError

log = logging.getLogger("training_companion")

# Also its field manager on the jobs it wakes: a pass dates the last wake by it.
USER_AGENT = WAKE_MANAGER


class CredentialsUnavailable(ConnectionError):
    """The kubeconfig's credentials could not be fetched (an auth provider's refresh failed):
    like an unreachable API server, something to retry."""


def kubeconfig_paths(environ: Mapping[str, str]) -> str:
    """The kubeconfig file list, as the small client and kubectl read it (``:``-separated)."""
    return environ.get("K8S_AUTH_KUBECONFIG") or environ.get("KUBECONFIG") or "~/.kube/config"


def _files(paths: str) -> list[str]:
    return [p for p in (os.path.expanduser(p) for p in paths.split(os.pathsep) if p) if os.path.exists(p)]


def current_context(paths: str) -> str | None:
    """The current context of a merged kubeconfig by kubectl's rule: the first file that sets it
    wins. (The ``kubernetes`` package lets the last one win; the operator, a Go program, follows
    kubectl, and the companion must talk to the same cluster.)"""
    for path in _files(paths):
        with open(path, encoding="utf-8") as f:
            config = yaml.safe_load(f) or {}
        if config.get("current-context"):
            return str(config["current-context"])
    return None


class KubeClient:
    """``request`` and ``stream`` for the wake watcher on a ``kubernetes.client.ApiClient``.

    In a pod (``KUBERNETES_SERVICE_HOST`` set and no kubeconfig file) it authenticates as the
    pod's ServiceAccount (the token file is read again every minute); otherwise it loads the
    kubeconfig of ``K8S_AUTH_KUBECONFIG`` or ``KUBECONFIG`` (several files are merged) or
    ``~/.kube/config``. A 401 loads the credentials again (at most every ``reload_interval``
    seconds), as client-go does for exec plugins: a token the plugin gave without an expiry, or
    a plugin that failed at start, is then fetched anew.
    """

    reload_interval = 5.0

    def __init__(
        self, kubeconfig: str | None = None, timeout: float = 30.0, environ: Mapping[str, str] | None = None
    ):
        self.environ = os.environ if environ is None else environ
        self.paths = kubeconfig or kubeconfig_paths(self.environ)
        self.timeout = timeout
        self._lock = threading.Lock()
        self.api = self._connect()
        self._loaded = time.monotonic()

    @property
    def in_cluster(self) -> bool:
        return bool(self.environ.get("KUBERNETES_SERVICE_HOST")) and not _files(self.paths)

    def _connect(self) -> Any:
        import urllib3
        from kubernetes import client, config

        configuration = client.Configuration()
        if self.in_cluster:
            config.load_incluster_config(client_configuration=configuration)
        else:
            config.load_kube_config(
                config_file=self.paths,
                context=current_context(self.paths),
                client_configuration=configuration,
            )
        # No retries inside a call (the small client made none): a refused connection, a 429 or a
        # 503 reaches the watcher at once, which retries on its own schedule and logs it once.
        # urllib3 would otherwise retry three times and wait out a Retry-After.
        configuration.retries = urllib3.Retry(
            total=None, connect=0, read=0, other=0, status=0, redirect=5, respect_retry_after_header=False
        )
        # Every watch holds a connection (two per namespace) and the writes one more; the pool
        # keeps as many as were in use at once instead of discarding them with a warning.
        configuration.connection_pool_maxsize = max(configuration.connection_pool_maxsize, 64)
        # HTTPS_PROXY / NO_PROXY, as the small client (urllib) and kubectl honour them.
        proxies = urllib.request.getproxies()
        proxy = proxies.get(urllib.parse.urlsplit(configuration.host).scheme)
        if proxy:
            configuration.proxy = proxy
            configuration.no_proxy = proxies.get("no", "")
        if not configuration.verify_ssl:
            urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
        api = client.ApiClient(configuration)
        api.user_agent = USER_AGENT
        log.info(
            "Kubernetes API at %s (%s)", configuration.host, "in-cluster" if self.in_cluster else self.paths
        )
        return api

    @property
    def server(self) -> str:
        return str(self.api.configuration.host)

    def _reload(self, api: Any) -> None:
        """After a 401: fetch the credentials again, unless another thread just did."""
        with self._lock:
            if self.api is not api or time.monotonic() - self._loaded < self.reload_interval:
                return
            try:
                self.api = self._connect()
            except Exception as err:
                log.warning("could not load the credentials again: %s", err)
            self._loaded = time.monotonic()

    def _open(
        self,
        method: str,
        path: str,
        query: Mapping[str, str] | None,
        body: Any,
        content_type: str,
        read_timeout: float,
    ) -> Any:
        """Send one request; the urllib3 response of a 2xx answer, not yet read."""
        import urllib3

        api = self.api
        headers = {"Accept": "application/json", **api.default_headers}
        try:
            with self._lock:
                # Runs the refresh hook: an exec token about to expire is fetched again here, an
                # auth provider's (gcp, oidc) refreshed.
                api.update_params_for_auth(headers, [], ["BearerToken"])
        except Exception as err:  # ConfigException, google-auth's or oauthlib's errors: retry later
            raise CredentialsUnavailable(f"{method} {path}: {err}") from None
        url = api.configuration.host + path
        if query:
            url += "?" + urllib.parse.urlencode(query)
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = content_type
        try:
            resp = api.rest_client.pool_manager.request(
                method,
                url,
                body=data,
                headers=headers,
                preload_content=False,
                timeout=urllib3.Timeout(connect=self.timeout, read=read_timeout),
            )
        except urllib3.exceptions.HTTPError as err:
            raise ConnectionError(f"{method} {path}: {err}") from None
        if 200 <= resp.status <= 299:
            return resp
        try:
            text = resp.data.decode(errors="replace")
        except urllib3.exceptions.HTTPError:
            text = ""
        finally:
            resp.release_conn()
        if resp.status == 401:
            self._reload(api)
        raise ApiError(resp.status, text, method, path)

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        content_type: str = "application/json",
        owner: bool = True,
        query: dict[str, str] | None = None,
    ) -> Any:
        """One API call, its JSON answer (``None`` if empty). ``owner`` is the small client's
        proxy identity; the companion talks to the API server directly and ignores it."""
        import urllib3

        resp = self._open(method, path, query, body, content_type, self.timeout)
        try:
            payload = resp.data
        except urllib3.exceptions.HTTPError as err:
            raise ConnectionError(f"{method} {path}: {err}") from None
        finally:
            resp.release_conn()
        return json.loads(payload) if payload else None

    def stream(self, path: str, query: dict[str, str], timeout: float) -> Generator[bytes, None, None]:
        """The lines of a streaming GET (a watch), ``timeout`` being its ``timeoutSeconds``: a
        read waits up to 30 s longer. Closing the generator early drops the connection; a stream
        read to its end leaves it in the pool for the next request."""
        import urllib3

        resp = self._open("GET", path, query, None, "", timeout + 30)
        done = False
        try:
            yield from resp
            done = True
        except urllib3.exceptions.HTTPError as err:
            raise ConnectionError(f"GET {path}: {err}") from None
        finally:
            if not done:
                resp.close()
            resp.release_conn()
