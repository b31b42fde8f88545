"""The zygote's messages: one JSON object per ``SOCK_SEQPACKET`` datagram, file descriptors
attached with ``SCM_RIGHTS``. Sequenced packets keep message boundaries and still report a
closed peer (an empty read), which is how each side learns the other is gone.

Only the standard library: the client imports this module in every run.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket

# An environment of a few hundred variables is a few KiB; this bounds a single request.
MAX_MESSAGE = 1 << 20
MAX_FDS = 8


def seqpacket() -> socket.socket:
    return socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)


def send(sock: socket.socket, message: dict, fds: list[int] | tuple[int, ...] = ()) -> None:
    """Send one message; ``fds`` travel with it (the receiver gets its own duplicates)."""
    data = json.dumps(message).encode()
    if fds:
        socket.send_fds(sock, [data], list(fds))
    else:
        sock.sendall(data)


def recv(sock: socket.socket) -> tuple[dict | None, list[int]]:
    """One message and the descriptors that came with it; ``(None, [])`` once the peer is gone."""
    try:
        data, fds, _flags, _addr = socket.recv_fds(sock, MAX_MESSAGE, MAX_FDS)
    except ConnectionResetError:
        return None, []
    if not data:
        for fd in fds:
            _close_quietly(fd)
        return None, []
    return json.loads(data), fds


def _close_quietly(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.close(fd)
