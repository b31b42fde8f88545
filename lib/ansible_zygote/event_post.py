"""ansible-runner-http's POST of each event, over one kept-alive connection per run.

ansible-runner hands every event and status change to ansible-runner-http, which opens a new
``requests`` Session and a new connection to the runtime's event socket for each one; the
Session's proxy and netrc lookups walk the environment twice per event. In the zygote's
ansible-runner runs, :func:`install` replaces its ``send_request`` for unix-socket URLs (the
only kind the runtime gives) with a stdlib client that keeps one connection per run. What the
runtime receives does not change: the same method, path, ``Content-Type`` and body bytes (the
body encoded as requests encodes ``json=``), one request at a time, each answered before the
event is written to ``job_events/`` (ansible-runner posts before it writes). Errors keep their
types: a connection that fails is requests' ``ConnectionError`` (an ``IOError``, which
ansible-runner's event callback catches), an event that is not JSON its ``InvalidJSONError``.
Any other URL takes the original path.
"""

from __future__ import annotations

import http.client
import os
import select
import socket
import threading

_connections: dict[tuple[int, str], _UnixConnection] = {}
_lock = threading.Lock()


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str):
        super().__init__("localhost")
        self.socket_path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(self.socket_path)
        except OSError:
            sock.close()
            raise
        self.sock = sock

    def dropped(self) -> bool:
        """True when the server has closed the idle connection (readable at EOF), as urllib3
        checks a pooled connection before it reuses one: a request is never sent twice."""
        return self.sock is not None and bool(select.select([self.sock], [], [], 0)[0])


class Posted:
    """What ansible-runner-http's caller keeps of the response: it logs its repr."""

    def __init__(self, status_code: int):
        self.status_code = status_code

    def __repr__(self) -> str:
        return f"<Response [{self.status_code}]>"


def _body(data) -> bytes:
    from requests import exceptions, models

    try:
        body = models.complexjson.dumps(data, allow_nan=False)
    except ValueError as error:
        raise exceptions.InvalidJSONError(error) from error
    return body if isinstance(body, bytes) else body.encode("utf-8")


def _connection(path: str) -> _UnixConnection:
    key = (os.getpid(), path)
    conn = _connections.get(key)
    if conn is None or conn.dropped():
        if conn is not None:
            conn.close()
        conn = _connections[key] = _UnixConnection(path)
    return conn


def post(path: str, data, headers: dict | None, urlpath: str | None) -> Posted:
    """POST ``data`` as JSON to the HTTP server on the unix socket ``path``."""
    from requests import exceptions

    body = _body(data)
    sent = {**(headers or {}), "Content-Length": str(len(body))}
    if not any(name.lower() == "content-type" for name in sent):
        sent["Content-Type"] = "application/json"
    with _lock:
        conn = _connection(path)
        try:
            conn.request("POST", urlpath or "/", body, sent)
            response = conn.getresponse()
            response.read()
        except (OSError, http.client.HTTPException) as error:
            conn.close()
            raise exceptions.ConnectionError(error) from error
    return Posted(response.status)


def install() -> None:
    """Route ansible-runner-http's unix-socket POSTs through :func:`post` (when it is installed)."""
    try:
        from ansible_runner_http import events
    except ImportError:
        return
    original = events.send_request

    def send_request(url, data, headers={}, urlpath=None):  # noqa: B006 (the original's signature)
        if not os.path.exists(url):
            return original(url, data, headers=headers, urlpath=urlpath)
        return post(url, data, headers, urlpath)

    events.send_request = send_request
