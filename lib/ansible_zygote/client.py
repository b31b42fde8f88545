"""The client: what the runtime finds first on ``PATH`` as ``ansible-runner`` (and ansible-runner
as ``ansible-playbook``). It hands its argv, environment, working directory, umask, signal state
and stdin/stdout/stderr to the zygote server, forwards the signals it receives, and exits as the
child exited - only once the child has exited, so every event the child posts reaches the runtime
before the process the runtime started is gone (the runtime's event API fails on an event posted
after it).

It execs the real program instead - the same process, argv and environment - when
``ANSIBLE_ZYGOTE=false``, when no server answers, when the one listening runs as another user,
or when the server says so (no warm template
for this environment yet, see :mod:`ansible_zygote.server`).

Started with ``python3 -S`` twice per reconcile, so its own start is part of every run's cost:
it imports only modules built into the interpreter or C extensions (``_socket``, ``_signal``,
``_json``; ``os`` is imported by the script anyway), not ``socket``, ``signal``, ``json`` or
:mod:`ansible_zygote.wire`, whose imports (``enum``, ``re``, ...) cost more than the interpreter's
start. The messages are the same JSON objects :mod:`ansible_zygote.wire` sends and reads.
"""

from __future__ import annotations

import _json
import _signal
import _socket
import os
import sys

# What a real process would receive and act on; SIGKILL and SIGSTOP cannot be caught, and a client
# killed outright is noticed by the server (the connection closes), which kills the child's group.
FORWARDED = (
    _signal.SIGHUP,
    _signal.SIGINT,
    _signal.SIGQUIT,
    _signal.SIGTERM,
    _signal.SIGUSR1,
    _signal.SIGUSR2,
    _signal.SIGALRM,
    _signal.SIGWINCH,
    _signal.SIGCONT,
)
# wire.MAX_MESSAGE: the server's replies are a few bytes.
MAX_MESSAGE = 1 << 20


def encode(value) -> str:
    """JSON text of a request (strings, integers, booleans, null, lists, objects), as
    ``json.dumps`` escapes strings (ASCII only, by the same C function)."""
    if value is None:
        return "null"
    if isinstance(value, str):
        return _json.encode_basestring_ascii(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, dict):
        return "{" + ",".join(f"{encode(k)}:{encode(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(encode(v) for v in value) + "]"
    raise TypeError(f"not a request value: {value!r}")


def _skip_space(text: str, i: int) -> int:
    while text[i] in " \t\n\r":
        i += 1
    return i


def decode(text: str) -> dict:
    """A reply of the server: a JSON object whose values are integers or strings
    ({"pid": 12}, {"exec": "why"}, {"exit": 0}, {"killed": 15}). ValueError otherwise."""
    try:
        reply: dict = {}
        i = _skip_space(text, 0)
        if text[i] != "{":
            raise ValueError("not an object")
        i = _skip_space(text, i + 1)
        while text[i] != "}":
            if reply:
                if text[i] != ",":
                    raise ValueError("expected ','")
                i = _skip_space(text, i + 1)
            if text[i] != '"':
                raise ValueError("expected a key")
            key, i = _json.scanstring(text, i + 1)
            i = _skip_space(text, i)
            if text[i] != ":":
                raise ValueError("expected ':'")
            i = _skip_space(text, i + 1)
            reply[key], i = _value(text, i)
            i = _skip_space(text, i)
        if text[i + 1 :].strip():
            raise ValueError("trailing text")
        return reply
    except IndexError:
        raise ValueError("truncated") from None


def _value(text: str, i: int) -> tuple[int | str, int]:
    if text[i] == '"':
        return _json.scanstring(text, i + 1)
    end = i + 1 if text[i] == "-" else i
    while end < len(text) and text[end].isdigit():
        end += 1
    return int(text[i:end]), end


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
    return [int(s) for s in FORWARDED if _signal.getsignal(s) == _signal.SIG_IGN]


def request(program: str, real: str, blocked: set | None = None) -> dict:
    """``blocked``: the signal mask to give the child (this process's own, by default)."""
    umask = os.umask(0o022)
    os.umask(umask)
    if blocked is None:
        blocked = _signal.pthread_sigmask(_signal.SIG_BLOCK, [])
    return {
        "program": program,
        "real": real,
        "argv": sys.argv[1:],
        "env": dict(os.environ),
        "cwd": os.getcwd(),
        "umask": umask,
        "ignored": ignored_signals(),
        "blocked": sorted(int(s) for s in blocked),
    }


def connect(path: str) -> _socket.socket | None:
    """A connection to the server, only if it runs as this user (``SO_PEERCRED``): whoever else
    listens on the path would receive the run's environment and stdio, and could answer for it."""
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_SEQPACKET)
    try:
        sock.connect(path)
        # struct ucred: pid, uid, gid (32-bit each).
        cred = sock.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, 12)
    except OSError:
        sock.close()
        return None
    if int.from_bytes(cred[4:8], sys.byteorder) != os.geteuid():
        sock.close()
        return None
    return sock


def send(sock: _socket.socket, message: dict, fds: tuple[int, ...] = ()) -> None:
    """One message; ``fds`` travel with it (``SCM_RIGHTS``, as ``socket.send_fds`` sends them)."""
    data = encode(message).encode()
    rights = b"".join(fd.to_bytes(4, sys.byteorder, signed=True) for fd in fds)
    sock.sendmsg([data], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, rights)] if fds else [])


def receive(sock: _socket.socket) -> dict | None:
    """One message, or None once the server is gone.

    A peer that closes its end with messages of ours unread (a signal forwarded as the child
    exits) resets the connection, and the reset is reported before the messages it had queued
    for us (the child's status): read once more after it."""
    for _ in range(2):
        try:
            data = sock.recv(MAX_MESSAGE)
        except ConnectionResetError:
            continue
        return decode(data.decode()) if data else None
    return None


def start(sock: _socket.socket, program: str, real: str, blocked: set) -> int | None:
    """The child's pid, or None when the server tells us to exec the real program."""
    try:
        send(sock, request(program, real, blocked), (0, 1, 2))
        reply = receive(sock)
    except OSError:
        return None
    if not reply or "pid" not in reply:
        return None
    return int(reply["pid"])


def forward_signals(sock: _socket.socket, pid: int) -> None:
    """Through the server, which knows whether the child is still unreaped; straight to the
    child once the server is gone."""

    def forward(signum, _frame):
        try:
            send(sock, {"signal": signum})
        except OSError:
            try:  # noqa: SIM105 (contextlib costs the client's start more than the rest)
                os.kill(pid, signum)
            except OSError:
                pass

    for signum in FORWARDED:
        if _signal.getsignal(signum) != _signal.SIG_IGN:
            _signal.signal(signum, forward)


def wait_for_orphan(pid: int) -> None:
    """The server went away while the child runs: still return only after the child has gone."""
    import select

    try:
        fd = os.pidfd_open(pid)
    except OSError:
        return
    select.select([fd], [], [])
    os.close(fd)


def exit_like(status: dict) -> None:
    if "killed" in status:
        signum = int(status["killed"])
        if signum != _signal.SIGKILL:  # cannot be caught, so its action is the default already
            _signal.signal(signum, _signal.SIG_DFL)
        _signal.pthread_sigmask(_signal.SIG_UNBLOCK, [signum])
        os.kill(os.getpid(), signum)
        os._exit(128 + signum)
    os._exit(int(status.get("exit", 1)))


def exit_unknown(program: str, pid: int) -> None:
    """The template that ran the child ended before it (killed, or a fault of its own): the
    child has exited now, but its status went with its parent. Say so, and fail the run (the
    runtime runs the reconcile again)."""
    message = f"ansible-zygote: the template running this {program} (pid {pid}) ended before it: its exit status is unknown\n"
    os.write(2, message.encode(errors="replace"))
    os._exit(1)


def main(program: str) -> None:
    real = real_program(program)
    path = os.environ.get("ANSIBLE_ZYGOTE_SOCKET", "")
    if real is None or not path or os.environ.get("ANSIBLE_ZYGOTE", "true").lower() == "false":
        exec_real(real, program)
    # Until there is a child to forward them to, signals wait (a SIGTERM now would kill this
    # process and so SIGKILL the run, where ansible-runner would have cancelled it); an exec'ed
    # real program gets them as it starts, as if they had come a moment later.
    blocked = _signal.pthread_sigmask(_signal.SIG_BLOCK, FORWARDED)
    sock = connect(path)
    pid = start(sock, program, real, blocked) if sock else None  # type: ignore[arg-type]
    if pid is None:
        _signal.pthread_sigmask(_signal.SIG_SETMASK, blocked)
        exec_real(real, program)
    forward_signals(sock, pid)  # type: ignore[arg-type]
    _signal.pthread_sigmask(_signal.SIG_SETMASK, blocked)
    while True:
        status = receive(sock)  # type: ignore[arg-type]
        if status is None:
            wait_for_orphan(pid)  # type: ignore[arg-type]
            exit_unknown(program, pid)  # type: ignore[arg-type]
        elif "exit" in status or "killed" in status:
            exit_like(status)
