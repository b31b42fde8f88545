"""The zygote server: answers the clients of one operator on a unix socket and keeps warm
templates (:mod:`ansible_zygote.template`), one per program and *fingerprint*.

    python -m ansible_zygote.server --socket PATH [--exit-with-pid PID]

A fingerprint is everything that shapes a program's import-time state: the program and its real
path (and that file's identity, so an upgrade is seen), the interpreter on its ``#!`` line, the
whole environment except the variables that change on every run and are re-read by the child
(:data:`PER_RUN`), and the identity (path, size, mtime, inode) of every file Ansible may take its
configuration from. A request whose fingerprint has a ready template is handed to it (the
template forks the child); any other request is told to exec the real program, and a template for
its fingerprint starts warming in the background. So a run is never served by a template whose
settings differ from its own: it falls back, exactly as if the zygote were off.

Templates are children of this process, so they and their children stay in the operator's
process tree and cgroup. Each template gets a fresh random hash seed and is retired after
:data:`RETIRE_AFTER` children (a hash seed cannot change inside a running interpreter); it serves
until its successor is warm, so retiring never makes a run fall back.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import selectors
import signal
import socket
import struct
import subprocess
import sys
import time
from dataclasses import dataclass, field

from ansible_zygote import socket_dir, wire

# Set per run (by the runtime's input dir and by ansible-runner) and read only after the child
# starts: by the runtime's kubeconfig users, awx_display at its import, and the fact cache (re-read
# in ansible_zygote.child). Their presence is still part of the fingerprint, their values are not.
PER_RUN = ("KUBECONFIG", "K8S_AUTH_KUBECONFIG", "AWX_ISOLATED_DATA_DIR", "ANSIBLE_CACHE_PLUGIN_CONNECTION")
# Shell bookkeeping that no program reads at import.
IGNORED = ("PWD", "OLDPWD", "_", "SHLVL")
SERVED = ("ansible-runner", "ansible-playbook")
RETIRE_AFTER = 200
MAX_TEMPLATES = 6
# A template that failed to warm (it crashed, or could not be started) is not tried again for
# its fingerprint before this many seconds, doubled after each further failure up to the cap:
# each try is a full Ansible import, and the same environment most likely fails the same way.
BACKOFF_S = 10.0
MAX_BACKOFF_S = 600.0
TEMPLATE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "template.py")


def log(message: str) -> None:
    print(f"ansible-zygote: {message}", file=sys.stderr, flush=True)


def file_identity(path: str) -> list | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [os.path.realpath(path), st.st_size, st.st_mtime_ns, st.st_ino]


# A watched file modified while its template was starting (see template.project_files).
EDITED = "edited"


def listing(path: str) -> list[str] | None:
    """A plugin directory's entries (without Python's bytecode cache), None when absent."""
    try:
        return sorted(name for name in os.listdir(path) if name != "__pycache__")
    except OSError:
        return None


def watched_identity(kind: str, path: str) -> list | None:
    return file_identity(path) if kind == "file" else listing(path)


def config_files(env: dict, cwd: str) -> list[str]:
    """Every file ansible-core's find_ini_config_file may pick, in its order."""
    files = []
    if env.get("ANSIBLE_CONFIG"):
        path = os.path.join(cwd, os.path.expanduser(env["ANSIBLE_CONFIG"]))
        files.append(os.path.join(path, "ansible.cfg") if os.path.isdir(path) else path)
    files.append(os.path.join(cwd, "ansible.cfg"))
    if env.get("HOME"):
        files.append(os.path.join(env["HOME"], ".ansible.cfg"))
    files.append("/etc/ansible/ansible.cfg")
    return files


def interpreter(real: str) -> str | None:
    """The interpreter of a ``#!/path/python`` script (console scripts are written so)."""
    try:
        with open(real, "rb") as f:
            first = f.readline(512).decode(errors="replace").strip()
    except OSError:
        return None
    if not first.startswith("#!") or len(first[2:].split()) != 1:
        return None
    path = first[2:].strip()
    return path if os.path.basename(path).startswith("python") else None


def differences(key: str, other: str) -> list[str]:
    """What differs between two fingerprints, by name only (values may be secrets): for the log,
    so a template warmed for every run (a per-run variable not in PER_RUN) is easy to see."""
    a, b = json.loads(key), json.loads(other)
    env_a, env_b = dict(a.pop("env")), dict(b.pop("env"))
    names = sorted(k for k in env_a.keys() | env_b.keys() if env_a.get(k) != env_b.get(k))
    return names + sorted(k for k in a if a[k] != b.get(k))


def fingerprint(request: dict) -> str | None:
    """The request's import-time identity, or None when it is not one a template may serve."""
    program, real, env = request.get("program"), request.get("real", ""), request.get("env", {})
    if program not in SERVED or not os.path.isabs(real) or interpreter(real) is None:
        return None
    kept = {k: v for k, v in env.items() if k not in PER_RUN and k not in IGNORED}
    identity = {
        "program": program,
        "real": file_identity(real),
        "interpreter": interpreter(real),
        "env": sorted(kept.items()),
        "per_run": sorted(k for k in PER_RUN if k in env),
        "config": [file_identity(p) for p in config_files(env, request.get("cwd", "/"))],
    }
    return json.dumps(identity, sort_keys=True)


@dataclass
class Template:
    key: str
    proc: subprocess.Popen
    control: socket.socket
    ready: bool = False
    served: int = 0
    # [kind, path, identity] of the project files the template imported (its plugins, lib/) and
    # of the plugin directories it listed: see stale().
    watched: list = field(default_factory=list)
    used: float = field(default_factory=time.monotonic)


def start_template(key: str, request: dict) -> Template:
    """A template process for the request's fingerprint: its environment without the per-run
    variables, a fresh hash seed (unless the environment sets one), a session of its own (terminal signals meant for the operator
    must not reach it), a control socket to this server."""
    env = {k: v for k, v in request["env"].items() if k not in PER_RUN}
    # A seed the operator set (it is in the fingerprint) is the real programs' seed too.
    if env.get("PYTHONHASHSEED", "random") == "random":
        env["PYTHONHASHSEED"] = str(secrets.randbelow(2**32))
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    cwd = request["cwd"] if os.path.isdir(request["cwd"]) else "/"
    proc = subprocess.Popen(
        [interpreter(request["real"]), TEMPLATE, request["program"], request["real"], str(theirs.fileno())],
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        pass_fds=[theirs.fileno()],
        start_new_session=True,
    )
    theirs.close()
    log(f"warming a template for {request['program']} (pid {proc.pid})")
    return Template(key, proc, ours)


class Server:
    def __init__(self, path: str, retire_after: int = RETIRE_AFTER):
        self.path = path
        self.retire_after = retire_after
        # Raises NotPrivate for a directory another user could write (socket_dir).
        socket_dir.ensure_private(os.path.dirname(os.path.abspath(path)))
        self.listener = wire.seqpacket()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        self.listener.bind(path)
        os.chmod(path, 0o600)
        self.listener.listen(64)
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.listener, selectors.EVENT_READ, None)
        # Per fingerprint: the template that serves, and the one warming to replace it.
        self.templates: dict[str, Template] = {}
        self.successors: dict[str, Template] = {}
        self.retired: list[Template] = []
        # Fingerprints whose warm-up printed something: always exec'ed (see template.py).
        self.declined: set[str] = set()
        # Per fingerprint whose templates failed to warm: failures in a row, and when to try again.
        self.failures: dict[str, tuple[int, float]] = {}
        # Runs handed to a template, per program: what {"stats": true} answers (tests, debugging,
        # the benchmark), with the number of templates and of those still warming.
        self.served: dict[str, int] = dict.fromkeys(SERVED, 0)

    def on_client(self) -> None:
        conn, _ = self.listener.accept()
        with conn:
            # The client sends its request right after connecting; the bound only catches a hang.
            conn.settimeout(10)
            try:
                request, fds = wire.recv(conn)
            except (OSError, ValueError):
                return
            try:
                if request is not None:
                    self.dispatch(conn, request, fds)
            finally:
                for fd in fds:
                    os.close(fd)

    def dispatch(self, conn: socket.socket, request: dict, fds: list[int]) -> None:
        if request.get("stats"):
            wire.send(
                conn, {"served": self.served, "templates": len(self.templates), "warming": self.warming()}
            )
            return
        uid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))[1]
        key = fingerprint(request) if uid == os.getuid() and len(fds) == 3 else None
        template = self.templates.get(key) if key else None
        if template is not None and template.ready and self.stale(template):
            template = None
        if template is not None and template.ready and self.hand_over(template, conn, request, fds):
            return
        with contextlib.suppress(OSError):
            wire.send(conn, {"exec": "no warm template for this environment"})
        if key and key not in self.templates and key not in self.declined and not self.backing_off(key):
            self.add_template(key, request)

    def warming(self) -> int:
        """Templates not ready yet, successors included: a benchmark waits for none before it
        measures, so a one-off warm-up is not counted as part of the reconciles."""
        return sum(not t.ready for t in [*self.templates.values(), *self.successors.values()])

    def stale(self, template: Template) -> bool:
        """A project file the template imported has changed since (an edited plugin), or a
        plugin directory it listed has other entries (a new plugin): the template and its warming
        successor are retired, and the run falls back like any other changed fingerprint, so the
        change is seen from this run on."""
        changed = [
            path
            for kind, path, seen in template.watched
            if seen == EDITED or watched_identity(kind, path) != seen
        ]
        if not changed:
            return False
        log(f"retiring template pid {template.proc.pid}: {', '.join(changed)} changed")
        successor = self.successors.get(template.key)
        self.forget(template)
        if successor is not None:
            self.forget(successor)
        return True

    def hand_over(self, template: Template, conn: socket.socket, request: dict, fds: list[int]) -> bool:
        try:
            wire.send(template.control, request, [conn.fileno(), *fds])
        except OSError:
            self.forget(template)
            return False
        template.served += 1
        template.used = time.monotonic()
        self.served[request["program"]] += 1
        if (
            template.served >= self.retire_after
            and template.key not in self.successors
            and not self.backing_off(template.key)
        ):
            # It keeps serving until its successor is ready: no run falls back meanwhile.
            successor = self.start(template.key, request)
            if successor is not None:
                self.successors[template.key] = successor
        return True

    def start(self, key: str, request: dict) -> Template | None:
        """A new template, or None when it cannot be started (no memory or pids left to fork)."""
        try:
            template = start_template(key, request)
        except OSError as err:
            log(f"cannot start a template: {err}")
            self.failed(key)
            return None
        self.selector.register(template.control, selectors.EVENT_READ, template)
        return template

    def backing_off(self, key: str) -> bool:
        return key in self.failures and time.monotonic() < self.failures[key][1]

    def failed(self, key: str) -> None:
        """A template for ``key`` failed to warm: wait before the next try, longer each time."""
        count = self.failures.get(key, (0, 0.0))[0] + 1
        pause = min(BACKOFF_S * 2 ** (count - 1), MAX_BACKOFF_S)
        self.failures[key] = (count, time.monotonic() + pause)
        log(f"no new template for this environment in the next {pause:.0f} s ({count} failed in a row)")

    def add_template(self, key: str, request: dict) -> None:
        if len(self.templates) >= MAX_TEMPLATES:
            oldest = min(self.templates.values(), key=lambda t: t.used)
            log(f"retiring template pid {oldest.proc.pid}: {MAX_TEMPLATES} templates at most")
            self.forget(oldest)
        for other in self.templates:
            if json.loads(other)["program"] == request["program"]:
                log(
                    f"{request['program']}: a new template, its fingerprint differs in {differences(key, other)}"
                )
        template = self.start(key, request)
        if template is not None:
            self.templates[key] = template

    def on_template(self, template: Template) -> None:
        message, fds = wire.recv(template.control)
        for fd in fds:
            os.close(fd)
        if message is None:
            log(f"template pid {template.proc.pid} ended{'' if template.ready else ' while warming'}")
            if not template.ready:
                self.failed(template.key)
            self.forget(template)
        elif not message.get("ready"):
            self.declined.add(template.key)
            self.forget(template)
        else:
            self.failures.pop(template.key, None)
            template.watched = message.get("watched", [])
            template.ready = True
            self.on_ready(template)

    def on_ready(self, template: Template) -> None:
        if self.successors.get(template.key) is not template:
            log(f"template pid {template.proc.pid} ready")
            return
        old = self.templates.get(template.key)
        if old is not None:
            log(f"retiring template pid {old.proc.pid} after {old.served} runs")
            self.forget(old)
        del self.successors[template.key]
        self.templates[template.key] = template
        log(f"template pid {template.proc.pid} ready (a successor)")

    def forget(self, template: Template) -> None:
        """Closing its control socket tells a template to finish its children and exit."""
        for table in (self.templates, self.successors):
            if table.get(template.key) is template:
                del table[template.key]
        self.selector.unregister(template.control)
        template.control.close()
        self.retired.append(template)

    def reap(self) -> None:
        self.retired = [t for t in self.retired if t.proc.poll() is None]

    def serve(self, alive) -> None:
        while alive():
            for key, _ in self.selector.select(timeout=1.0):
                if key.data is None:
                    self.on_client()
                elif key.data.control.fileno() >= 0:
                    # (Closed: forgotten earlier in this batch, its message is of no use now.)
                    self.on_template(key.data)
            self.reap()

    def shutdown(self, grace: float = 10.0) -> None:
        """Stop answering, let the templates finish their children; after ``grace``, have them
        kill their children (each run is then reported as killed, SIGTERM to the template), and
        at last make sure none is left."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        self.listener.close()
        for template in [*self.templates.values(), *self.successors.values()]:
            self.forget(template)
        self.wait_for_retired(grace)
        for template in self.retired:
            with contextlib.suppress(OSError):
                template.proc.terminate()
        self.wait_for_retired(5.0)
        for template in self.retired:
            with contextlib.suppress(OSError):
                os.killpg(template.proc.pid, signal.SIGKILL)
            template.proc.wait()

    def wait_for_retired(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while self.retired and time.monotonic() < deadline:
            self.reap()
            time.sleep(0.1)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def print_stats(path: str) -> None:
    """What {"stats": true} answers, as JSON on stdout (exit status 1 when no server answers):
    ``served`` per program counts the runs handed to a template since the server started."""
    try:
        with wire.seqpacket() as sock:
            sock.settimeout(10)
            sock.connect(path)
            wire.send(sock, {"stats": True})
            answer, _ = wire.recv(sock)
    except OSError as err:
        sys.exit(f"ansible-zygote: no server on {path}: {err}")
    print(json.dumps(answer))


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m ansible_zygote.server")
    parser.add_argument("--socket", required=True)
    parser.add_argument("--exit-with-pid", type=int, default=0)
    parser.add_argument("--stats", action="store_true", help="print the running server's stats and exit")
    args = parser.parse_args()
    if args.stats:
        print_stats(args.socket)
        return
    stopping: list[int] = []

    def stop(signum, _frame):
        stopping.append(signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    # Tests retire templates after a few runs to exercise the hand-over.
    try:
        server = Server(args.socket, int(os.environ.get("ANSIBLE_ZYGOTE_RETIRE_AFTER") or RETIRE_AFTER))
    except (socket_dir.NotPrivate, OSError) as err:
        # The clients exec the real programs meanwhile; supervise.sh tries again later.
        log(f"cannot serve on {args.socket}: {err}")
        sys.exit(1)
    log(f"serving {', '.join(SERVED)} on {args.socket}")

    def alive() -> bool:
        return not stopping and (not args.exit_with_pid or pid_alive(args.exit_with_pid))

    try:
        server.serve(alive)
    finally:
        server.shutdown()


if __name__ == "__main__":
    main()
