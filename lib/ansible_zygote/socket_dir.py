"""Where the zygote's socket lives: a directory of the operator's own that nobody else can write.

A unix socket is reached by its path, so whoever can create that path can pose as the server
(and receive every run's environment, the runtime's proxy kubeconfig among it, and its stdio), or
stop it from binding. In a directory that only the operator's uid may write (mode 0700, not a
symlink, owned by it), no other user can bind, replace or remove the socket; the client checks
the listener's uid as well (``SO_PEERCRED``, :mod:`ansible_zygote.client`).

    python -m ansible_zygote.socket_dir TMPDIR   (hack/run.sh: prints a new socket path)

removes the sockets of operators that are gone (nothing listens) that it may remove, ignoring
the rest (another user's), and makes a new private directory for this operator's socket.
"""

from __future__ import annotations

import contextlib
import os
import socket
import stat
import sys
import tempfile

PREFIX = "ato-zygote."
SOCKET_NAME = "server.sock"
# sun_path holds 108 bytes, the terminating NUL included.
MAX_PATH = 107


class NotPrivate(Exception):
    """The socket's directory is one that another user could write."""


def ensure_private(directory: str) -> None:
    """Create ``directory`` (mode 0700) if missing; refuse one that is a symlink, another user's,
    or open to anyone else (a directory of ours that is, another user may have written in)."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(directory, 0o700)
    st = os.lstat(directory)
    if not stat.S_ISDIR(st.st_mode):
        raise NotPrivate(f"{directory} is not a directory")
    if st.st_uid != os.geteuid():
        raise NotPrivate(f"{directory} belongs to uid {st.st_uid}, not to this uid ({os.geteuid()})")
    if stat.S_IMODE(st.st_mode) & 0o077:
        raise NotPrivate(
            f"{directory} has mode {stat.S_IMODE(st.st_mode):o}: others may use it (0700 wanted)"
        )


def listening(path: str) -> bool:
    """Whether a server answers on ``path`` (a socket nothing listens on refuses)."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        probe.connect(path)
    except ConnectionRefusedError:
        return False
    except OSError:
        return True  # not ours to judge (no access, another socket type): leave it
    finally:
        probe.close()
    return True


def remove_stale(tmpdir: str) -> None:
    """The sockets (and their directories) of operators killed outright, which nothing listens
    on any more; another user's, or anything else that cannot be removed, stays."""
    try:
        names = os.listdir(tmpdir)
    except OSError:
        return
    for name in names:
        if not name.startswith(PREFIX):
            continue
        path = os.path.join(tmpdir, name)
        # Before the private directories: the socket itself in TMPDIR (ato-zygote.XXXXXX.sock).
        sock = path if name.endswith(".sock") else os.path.join(path, SOCKET_NAME)
        with contextlib.suppress(OSError):
            if stat.S_ISSOCK(os.lstat(sock).st_mode) and not listening(sock):
                os.unlink(sock)
        if sock != path:
            with contextlib.suppress(OSError):
                os.rmdir(path)  # only once empty: a live operator's directory is not


def new_socket_path(tmpdir: str) -> str:
    """A socket path in a new private directory under ``tmpdir`` (``mkdtemp``: created by this
    call, mode 0700), or under /tmp when ``tmpdir`` is too long for a socket path."""
    directory = tempfile.mkdtemp(prefix=PREFIX, dir=tmpdir)
    path = os.path.join(directory, SOCKET_NAME)
    if len(os.fsencode(path)) > MAX_PATH:
        os.rmdir(directory)
        path = os.path.join(tempfile.mkdtemp(prefix=PREFIX, dir="/tmp"), SOCKET_NAME)
    return path


def main() -> None:
    tmpdir = sys.argv[1] if len(sys.argv) > 1 else tempfile.gettempdir()
    remove_stale(tmpdir)
    print(new_socket_path(tmpdir))


if __name__ == "__main__":
    main()
