"""The client: what the runtime finds first on ``PATH`` as ``ansible-runner`` (and ansible-runner
as ``ansible-playbook``). It hands its argv, environment, working directory, umask, signal state
and stdin/stdout/stderr to the zygote server, forwards the signals it receives, and exits as the
child exited - only once the child has exited, so every event the child posts reaches the runtime
before the process the runtime started is gone (the runtime's event API fails on a late event).

It execs the real program instead - the same process, argv and environment - when
``ANSIBLE_ZYGOTE=false``, when no server answers, or when the server says so (no warm template
for this environment yet, see :mod:`ansible_zygote.server`). Standard library only, started with
``python3 -S``: its own start is part of every run's cost.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import sys

from ansible_zygote import wire

# What a real process would receive and act on; SIGKILL and SIGSTOP cannot be caught, and a client
# killed outright is noticed by the server (the connection closes), which kills the child's group.
FORWARDED = (
    signal.SIGHUP,
    signal.SIGINT,
    signal.SIGQUIT,
    signal.SIGTERM,
    signal.SIGUSR1,
    signal.SIGUSR2,
    signal.SIGALRM,
    signal.SIGWINCH,
    signal.SIGCONT,
)


def real_program(program: str) -> str | None:
    """The first ``program`` on PATH that is not this client's own directory."""
    own = os.path.dirname(os.path.realpath(sys.argv[0]))
    for entry in os.environ.get("PATH", os.defpath).split(os.pathsep):
        path = os.path.join(entry or ".", program)
        if os.path.realpath(entry or ".") == own:
            continue
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def exec_real(real: str | None, program: str) -> None:
    if real is None:
        print(f"{program}: not found on PATH (besides the zygote client)", file=sys.stderr)
        os._exit(127)
    os.execv(real, [real, *sys.argv[1:]])


def ignored_signals() -> list[int]:
    """Signals this process inherited as ignored: the child must ignore them too, as an exec'ed
    program would."""
    return [int(s) for s in FORWARDED if signal.getsignal(s) == signal.SIG_IGN]


def request(program: str, real: str) -> dict:
    umask = os.umask(0o022)
    os.umask(umask)
    return {
        "program": program,
        "real": real,
        "argv": sys.argv[1:],
        "env": dict(os.environ),
        "cwd": os.getcwd(),
        "umask": umask,
        "ignored": ignored_signals(),
        "blocked": [int(s) for s in signal.pthread_sigmask(signal.SIG_BLOCK, [])],
    }


def connect(path: str) -> socket.socket | None:
    sock = wire.seqpacket()
    try:
        sock.connect(path)
    except OSError:
        sock.close()
        return None
    return sock


def start(sock: socket.socket, program: str, real: str) -> int | None:
    """The child's pid, or None when the server tells us to exec the real program."""
    try:
        wire.send(sock, request(program, real), [0, 1, 2])
        reply, _ = wire.recv(sock)
    except OSError:
        return None
    if not reply or "pid" not in reply:
        return None
    return int(reply["pid"])


def forward_signals(sock: socket.socket, pid: int) -> None:
    """Through the server, which knows whether the child is still unreaped; straight to the
    child once the server is gone."""

    def forward(signum, _frame):
        try:
            wire.send(sock, {"signal": signum})
        except OSError:
            with contextlib.suppress(OSError):
                os.kill(pid, signum)

    for signum in FORWARDED:
        if signal.getsignal(signum) != signal.SIG_IGN:
            signal.signal(signum, forward)


def wait_for_orphan(pid: int) -> None:
    """The server went away while the child runs: still return only after the child has gone."""
    try:
        fd = os.pidfd_open(pid)
    except OSError:
        return
    select.select([fd], [], [])
    os.close(fd)


def exit_like(status: dict) -> None:
    if "killed" in status:
        signum = int(status["killed"])
        signal.signal(signum, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [signum])
        os.kill(os.getpid(), signum)
        os._exit(128 + signum)
    os._exit(int(status.get("exit", 1)))


def main(program: str) -> None:
    real = real_program(program)
    path = os.environ.get("ANSIBLE_ZYGOTE_SOCKET", "")
    if real is None or not path or os.environ.get("ANSIBLE_ZYGOTE", "true").lower() == "false":
        exec_real(real, program)
    sock = connect(path)
    pid = start(sock, program, real) if sock else None  # type: ignore[arg-type]
    if pid is None:
        exec_real(real, program)
    forward_signals(sock, pid)  # type: ignore[arg-type]
    while True:
        status, _ = wire.recv(sock)  # type: ignore[arg-type]
        if status is None:
            wait_for_orphan(pid)  # type: ignore[arg-type]
            os._exit(1)
        if "exit" in status or "killed" in status:
            exit_like(status)
