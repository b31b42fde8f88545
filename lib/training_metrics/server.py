"""Serve the job counters of :mod:`training_metrics.counters` over HTTP (run by
:mod:`training_companion`).

  ``GET /metrics``   Prometheus text format, for any caller that can reach the port;
  ``GET /healthz``   ``ok``;
  ``POST /observe``  one reconcile's counts (JSON, see :func:`counters.parse_observation`),
                     accepted only from loopback: the operator's reconciles run in the same pod
                     (or, under ``make run``, on the same machine).
"""

from __future__ import annotations

import ipaddress
import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from training_metrics.counters import Counters, ObservationError, parse_observation

DEFAULT_BIND = "127.0.0.1:8686"
MAX_BODY = 64 * 1024


def _is_loopback(host: str) -> bool:
    try:
        addr = ipaddress.ip_address(host)
    except ValueError:
        return False
    mapped = getattr(addr, "ipv4_mapped", None)
    return (mapped or addr).is_loopback


def make_handler(counters: Counters) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "training-metrics"

        def _send(self, code: int, body: str, content_type: str = "text/plain; charset=utf-8") -> None:
            data = body.encode()
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                self._send(200, counters.render(), "text/plain; version=0.0.4; charset=utf-8")
            elif path in ("/healthz", "/readyz"):
                self._send(200, "ok\n")
            else:
                self._send(404, "not found\n")

        def do_POST(self) -> None:
            if self.path != "/observe":
                self._send(404, "not found\n")
                return
            if not _is_loopback(self.client_address[0]):
                self._send(403, "observations are accepted from loopback only\n")
                return
            length = int(self.headers.get("Content-Length") or 0)
            if length <= 0 or length > MAX_BODY:
                self._send(400, "a JSON body of at most 64 KiB is required\n")
                return
            try:
                labels, counts = parse_observation(json.loads(self.rfile.read(length)))
            except (ObservationError, ValueError) as err:
                self._send(400, f"{err}\n")
                return
            counters.add(labels, counts)
            self._send(204, "")

        def log_message(self, format, *args) -> None:
            # Scrapes every few seconds would drown the operator's own log.
            pass

    return Handler


def make_server(bind: str = DEFAULT_BIND) -> ThreadingHTTPServer:
    """The counters' HTTP server on ``HOST:PORT`` (``:PORT`` = every address), not yet serving."""
    host, _, port = bind.rpartition(":")
    return ThreadingHTTPServer((host.strip("[]") or "0.0.0.0", int(port)), make_handler(Counters()))
