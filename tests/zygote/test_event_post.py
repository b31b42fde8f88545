"""The zygote's event POST (lib/ansible_zygote/event_post.py) against servers that close the
connection in each way an HTTP server may: every event arrives exactly once."""

from __future__ import annotations

import json
import socket
import threading
from pathlib import Path

import pytest
from ansible_zygote import event_post
from requests import exceptions


class Server:
    """An HTTP/1.1 server on a unix socket that answers 204 and then, per ``close``: keeps the
    connection ("never"), says it closes it ("announced"), or closes it without a word
    ("silently": the next request on it would find it gone)."""

    def __init__(self, path: str, close: str):
        self.close, self.bodies, self.connections = close, [], 0
        self.closed = threading.Semaphore(0)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(path)
        self.sock.listen()
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self) -> None:
        while True:
            conn, _ = self.sock.accept()
            self.connections += 1
            threading.Thread(target=self.serve, args=(conn,), daemon=True).start()

    def serve(self, conn: socket.socket) -> None:
        with conn, conn.makefile("rb") as reader:
            while head := reader.readline():
                headers = {}
                while (line := reader.readline().decode().strip()) != "":
                    name, value = line.split(":", 1)
                    headers[name.strip().lower()] = value.strip()
                self.bodies.append(
                    (head.decode().split()[1], headers, reader.read(int(headers["content-length"])))
                )
                extra = "Connection: close\r\n" if self.close == "announced" else ""
                conn.sendall(f"HTTP/1.1 204 No Content\r\n{extra}\r\n".encode())
                if self.close != "never":
                    break
        self.closed.release()


@pytest.mark.parametrize(("close", "connections"), [("never", 1), ("announced", 5), ("silently", 5)])
def test_each_event_arrives_once(tmp_path: Path, close: str, connections: int):
    path = str(tmp_path / "events.sock")
    server = Server(path, close)
    events = [{"uuid": str(i), "event": "runner_on_ok", "stdout": "ok: [localhost] é"} for i in range(5)]
    for event in events:
        assert repr(event_post.post(path, event, None, "/events/")) == "<Response [204]>"
        if close != "never":
            # The next request must find the closed connection gone, not write into it.
            assert server.closed.acquire(timeout=60)
    assert [json.loads(body) for _, _, body in server.bodies] == events
    assert server.connections == connections
    path_, headers, body = server.bodies[0]
    assert path_ == "/events/"
    assert headers["content-type"] == "application/json"
    # The bytes requests would send for json=event.
    assert body == json.dumps(events[0], allow_nan=False).encode()


def test_errors_keep_their_types(tmp_path: Path):
    with pytest.raises(exceptions.ConnectionError):
        event_post.post(str(tmp_path / "nobody.sock"), {"uuid": "1"}, None, "/events/")
    with pytest.raises(exceptions.InvalidJSONError):
        event_post.post(str(tmp_path / "nobody.sock"), {"value": float("nan")}, None, "/events/")
