"""Runs a playbook exactly as ansible-operator v1.42.2 runs it (its input dir, event socket,
environment and arguments; internal/ansible/runner in ansible-operator-plugins), through the real
``ansible-runner`` or through the zygote client, and records what the runtime would see.

The event receiver plays the runtime's eventapi: HTTP POSTs on a unix socket. An event that
arrives after the process the runtime started has exited is recorded as late (the runtime would
crash on it: eventapi.go unlocks twice).
"""

from __future__ import annotations

import http.server
import json
import os
import signal
import socket
import socketserver
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = ROOT / ".venv" / "bin"
CLIENT_BIN = ROOT / "lib" / "ansible_zygote" / "bin"
# The per-run fields of an event: ids, times and process numbers differ on every run.
VOLATILE = {"uuid", "parent_uuid", "created", "pid", "runner_ident", "guid"}
VOLATILE_DATA = {
    "playbook_uuid",
    "play_uuid",
    "task_uuid",
    "uuid",
    "start",
    "end",
    "duration",
    "delta",
    "_ansible_delegated_vars",
    "artifact_data",
}


class _Handler(http.server.BaseHTTPRequestHandler):
    # As the runtime's net/http server answers: HTTP/1.1 (connections kept alive), 204.
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.server.sink.add(json.loads(body))  # type: ignore[attr-defined]
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


class _UnixHTTPServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def get_request(self):
        conn, _ = self.socket.accept()
        self.sink.connections += 1  # type: ignore[attr-defined]
        return conn, ("local", 0)


@dataclass
class Sink:
    """The runtime's event receiver for one run."""

    path: str
    events: list = field(default_factory=list)
    late: list = field(default_factory=list)
    closed: bool = False
    connections: int = 0
    # Called with each event while the run waits for its POST to be answered.
    on_event: object = None

    def __post_init__(self):
        self.lock = threading.Lock()
        self.server = _UnixHTTPServer(self.path, _Handler)
        self.server.sink = self  # type: ignore[attr-defined]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def add(self, event: dict) -> None:
        if callable(self.on_event):
            self.on_event(event)
        with self.lock:
            (self.late if self.closed else self.events).append(event)

    def close(self) -> None:
        with self.lock:
            self.closed = True

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def operator_env(socket_path: str, extra: dict | None = None) -> dict:
    """The environment hack/run.sh gives the runtime (which passes it on to ansible-runner)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "PYTEST_"))}
    env.update(
        ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"),
        ANSIBLE_ROLES_PATH=str(ROOT / "roles"),
        ANSIBLE_ACTION_PLUGINS=str(ROOT / "action_plugins"),
        ANSIBLE_FILTER_PLUGINS=str(ROOT / "filter_plugins"),
        ANSIBLE_GATHERING="explicit",
        ANSIBLE_INVENTORY_ENABLED="ini",
        ANSIBLE_ZYGOTE_SOCKET=socket_path,
        VIRTUAL_ENV=str(ROOT / ".venv"),
    )
    env.update(extra or {})
    return env


def write_input_dir(path: Path, sink: str, kubeconfig: str, extravars: dict | None = None) -> None:
    """internal/ansible/runner/internal/inputdir: env/envvars, extravars, settings, an INI host."""
    for sub in ("env", "inventory", "project"):
        (path / sub).mkdir(parents=True, exist_ok=True)
    (path / "env" / "envvars").write_text(
        json.dumps({"K8S_AUTH_KUBECONFIG": kubeconfig, "KUBECONFIG": kubeconfig})
    )
    extravars = {"ansible_operator_meta": {"name": path.name}, **(extravars or {})}
    (path / "env" / "extravars").write_text(json.dumps(extravars))
    (path / "env" / "settings").write_text(
        json.dumps({"runner_http_url": sink, "runner_http_path": "/events/" + path.name})
    )
    python = ROOT / ".venv" / "bin" / "python3"
    (path / "inventory" / "hosts").write_text(
        f"localhost ansible_connection=local ansible_python_interpreter={python}"
    )


@dataclass
class Result:
    rc: int
    output: str
    events: list
    late: list
    # Runs the zygote server handed to a template meanwhile, per program (others' runs included
    # when runs overlap).
    served: dict
    run_dir: Path
    # Connections the run opened to the event socket.
    connections: int = 0

    @property
    def served_by_template(self) -> bool:
        """Both programs of this run came from templates (sequential runs only)."""
        return self.served == dict.fromkeys(("ansible-runner", "ansible-playbook"), 1)

    def normalized(self) -> list:
        return normalized(self.events, self.run_dir)

    def normalized_output(self) -> str:
        """What the process wrote to stdout and stderr, its run's directory and name as
        placeholders."""
        return _strip(self.output, set(), self.run_dir)

    def event_files(self) -> list:
        """The events ansible-runner wrote into the run's artifact directory (job_events/), as
        ``normalized`` reads the posted ones: a template changes how they are written."""
        events = []
        for path in sorted((self.run_dir / "artifacts").glob("*/job_events/*.json")):
            text = path.read_text(encoding="utf-8")
            event = json.loads(text)
            # Written as json.dump writes with its defaults (key order, separators, escapes).
            assert json.dumps(event) == text, f"{path.name} is not as json.dump writes it"
            events.append(event)
        return normalized(events, self.run_dir)


def delta(before: dict, after: dict) -> dict:
    return {program: after.get(program, 0) - before.get(program, 0) for program in after}


def stats(socket_path: str) -> dict:
    """The server's {"stats": true} answer, {} when no server answers."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        sock.connect(socket_path)
    except OSError:
        return {}
    with sock:
        sock.sendall(json.dumps({"stats": True}).encode())
        return json.loads(sock.recv(65536))


def served(socket_path: str) -> dict:
    """How many runs the server has handed to a template so far, per program."""
    return stats(socket_path).get("served", {})


def run(
    work: Path,
    name: str,
    playbook: Path,
    env: dict,
    zygote: bool,
    cancel_on: str = "",
    cancel_signal: int = signal.SIGTERM,
    cancel_once: Path | None = None,
    timeout: float | None = None,
    cancel_pid=None,
    extravars: dict | None = None,
) -> Result:
    """One reconcile's Ansible run as the runtime starts it; ``cancel_on``: send ``cancel_signal``
    to the process when the task of this name starts (SIGTERM: ansible-runner's cancel path),
    once the file ``cancel_once`` exists if given (the task has reached a point of its own). A
    run that takes longer than ``timeout`` seconds is killed and fails the test. ``cancel_pid``:
    a function that names the process to signal instead (one of the zygote's). ``extravars``:
    the runtime's extra variables besides ``ansible_operator_meta``."""
    run_dir = work / name
    sink = Sink(str(work / f"{name}.sock"))
    # A kubeconfig path of each run's own, as the runtime gives each run (a per-run variable the
    # fingerprint leaves out: a template must not keep the first run's).
    write_input_dir(run_dir, sink.path, str(work / f"{name}.kubeconfig"), extravars)
    path = [str(CLIENT_BIN)] if zygote else []
    env = {**env, "PATH": os.pathsep.join([*path, str(VENV_BIN), env["PATH"]])}
    argv = ["ansible-runner", "run", str(run_dir), "--rotate-artifacts", "20", "-p", str(playbook)]
    proc = subprocess.Popen(
        [*argv, "-i", name], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=ROOT
    )

    def cancel(event: dict) -> None:
        task = (event.get("event_data") or {}).get("task", "")
        if cancel_on and event.get("event") == "runner_on_start" and task == cancel_on:
            while cancel_once is not None and not cancel_once.exists() and proc.poll() is None:
                time.sleep(0.05)
            os.kill(cancel_pid() if cancel_pid else proc.pid, cancel_signal)

    sink.on_event = cancel
    before = served(env["ANSIBLE_ZYGOTE_SOCKET"])
    try:
        output, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        sink.stop()
        raise AssertionError(f"{name}: the run hung (still running after {timeout} s)") from None
    after = served(env["ANSIBLE_ZYGOTE_SOCKET"])
    sink.close()
    sink.stop()
    output_text = output.decode(errors="replace")
    served_meanwhile = delta(before, after)
    return Result(
        proc.returncode, output_text, sink.events, sink.late, served_meanwhile, run_dir, sink.connections
    )


def normalized(events: list, run_dir: Path) -> list:
    """What must be equal between two runs: each event without its ids, times and pids, the
    run's own directory and name as placeholders, and the status event's PATH (the zygote's
    client directory is on it by design)."""
    out = []
    for event in sorted(events, key=lambda e: e.get("counter", 0)):
        event = _strip(event, VOLATILE, run_dir)
        if isinstance(event.get("env"), dict):
            event["env"].pop("PATH", None)
        out.append(event)
    return out


def _strip(value, keys: set, run_dir: Path):
    if isinstance(value, dict):
        return {k: _strip(v, VOLATILE_DATA, run_dir) for k, v in value.items() if k not in keys}
    if isinstance(value, list):
        return [_strip(v, VOLATILE_DATA, run_dir) for v in value]
    if isinstance(value, str):
        return value.replace(str(run_dir), "<run>").replace(run_dir.name, "<name>")
    return value
