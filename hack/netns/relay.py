#!/usr/bin/env python3
"""Relay TCP connections through a unix socket, to reach the API server from a private netns.

hack/olm-test.sh runs OLM's olm and catalog operators and opm in network namespaces of their own,
because they bind fixed wildcard ports (:8080, the opm port) that cannot be set to 127.0.0.1;
hack/test.sh runs a second operator so, whose ports are fixed too. A netns has its own loopback,
so nothing they open is visible outside. They still need the API server, which listens on the
host's 127.0.0.1: the filesystem is shared between namespaces, so a unix socket crosses over.

    relay.py unix-to-tcp SOCKET HOST:PORT   (host netns) accept on SOCKET, connect to HOST:PORT
    relay.py tcp-to-unix HOST:PORT SOCKET   (private netns) accept on HOST:PORT, connect to SOCKET

Bytes are copied unchanged both ways (TLS stays end to end); each direction is half-closed on
its own, as a TCP proxy must.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys


async def pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (ConnectionError, OSError):
        writer.transport.abort()


async def serve(connect, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        up_reader, up_writer = await connect()
    except OSError as err:
        print(f"relay: cannot connect upstream: {err}", file=sys.stderr)
        writer.close()
        return
    await asyncio.gather(pump(reader, up_writer), pump(up_reader, writer))
    for w in (writer, up_writer):
        w.close()
        with contextlib.suppress(ConnectionError, OSError):
            await w.wait_closed()


def host_port(value: str) -> tuple[str, int]:
    host, _, port = value.rpartition(":")
    return host, int(port)


async def main(mode: str, listen: str, target: str) -> None:
    if mode == "unix-to-tcp":
        host, port = host_port(target)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(listen)
        server = await asyncio.start_unix_server(
            lambda r, w: serve(lambda: asyncio.open_connection(host, port), r, w), path=listen
        )
    elif mode == "tcp-to-unix":
        host, port = host_port(listen)
        server = await asyncio.start_server(
            lambda r, w: serve(lambda: asyncio.open_unix_connection(target), r, w), host, port
        )
    else:
        raise SystemExit(f"unknown mode {mode}")
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    if len(sys.argv) != 4:
        raise SystemExit(__doc__)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main(*sys.argv[1:]))
