"""CPU seconds (and wall seconds) per reconcile of the real role (``playbooks/reconcile.yml`` with ``roles/tfjob``),
run exactly as ansible-operator v1.42.2 runs it (input dir, extravars with ``markUnsafe``, event
socket, environment, arguments; ``tests/zygote/zygote_harness.py``), with the Ansible zygote on
and off, alternately in the same session. No operator: the observe task reads a real API server
through ``kubectl proxy`` (plain HTTP on loopback, as the runtime's proxy is).

    hack/bench/reconcile_cost.py [--runs 15] [--profile] [--port 19650] [--checkout DIR] [--noop]

The cluster is the one in ``KUBECONFIG`` (``hack/cluster.sh kubeconfig``), with the CRDs. One
TFJob (5 pods that run for a day) is created in a namespace of its own and reconciled a few times
first, so every measured pass is one that changes nothing (the common pass of a running job).

CPU = user + sys of everything the run costs: without the zygote, ansible-runner's whole tree
(``wait4``); with it, the client's plus what the server's tree gained meanwhile (its templates
reap the runs' children). ``--profile`` also runs the passes with ``reconcile_profile.py`` as
ansible-playbook and prints where its CPU goes per task (ansible-runner then starts without the
zygote: the extra variables are not its template's).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path[:0] = [str(HERE), str(ROOT / "tests" / "zygote")]
import jobs as joblib  # noqa: E402
import measure  # noqa: E402
import zygote_harness as harness  # noqa: E402

NAMESPACE = "ato-reconcile-cost"
JOB = "cost"
# --noop: a play without tasks instead of the role (what the benchmark's floor costs, roughly: the
# floor runs an empty role in the runtime's role mode).
NOOP = "---\n- name: No task\n  hosts: localhost\n  gather_facts: false\n  tasks: []\n"
PLAYBOOK: dict[str, Path | None] = {"path": None}
# The runtime's --ansible-verbosity: hack/run.sh and the Deployment pass 0; ansible-operator's
# default, 2, runs ansible-runner with -vv, which doubles the events of a pass (--verbosity 2).
VERBOSITY = {"level": 0}


def kubectl(*args: str, stdin: str | None = None) -> str:
    return subprocess.run(
        [str(ROOT / "bin" / "kubectl"), *args], input=stdin, capture_output=True, text=True, check=True
    ).stdout


def unsafe(value):
    """ansible-operator's markUnsafe (runner.go): every string as ``{"__ansible_unsafe": s}``."""
    if isinstance(value, dict):
        return {k: unsafe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [unsafe(v) for v in value]
    if isinstance(value, str):
        return {"__ansible_unsafe": value}
    return value


def extravars(cr: dict) -> dict:
    """makeParameters in runner.go, for watches.yaml's TFJob entry (snakeCaseParameters off)."""
    spec = cr.get("spec") or {}
    params = {k: unsafe(v) for k, v in spec.items()}
    meta = cr["metadata"]
    params["ansible_operator_meta"] = {"namespace": meta["namespace"], "name": meta["name"]}
    params["_kubeflow_org_tfjob"] = unsafe(cr)
    params["_kubeflow_org_tfjob_spec"] = unsafe(spec)
    params["training_job_role"] = "tfjob"
    return params


def start_proxy(port: int, work: Path) -> tuple[subprocess.Popen, str]:
    """kubectl proxy on 127.0.0.1:port, and a kubeconfig that points at it (as the runtime's)."""
    proxy = subprocess.Popen(
        [str(ROOT / "bin" / "kubectl"), "proxy", "--address=127.0.0.1", f"--port={port}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    proxy.stdout.readline()  # type: ignore[union-attr]  # "Starting to serve on ..."
    kubeconfig = work / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: proxy\n"
        f"clusters: [{{name: proxy, cluster: {{server: 'http://127.0.0.1:{port}'}}}}]\n"
        "contexts: [{name: proxy, context: {cluster: proxy, user: proxy}}]\n"
        "users: [{name: proxy, user: {}}]\n"
    )
    return proxy, str(kubeconfig)


def start_server(work: Path) -> tuple[subprocess.Popen, str]:
    socket_path = str(work / "zygote.sock")
    env = {**os.environ, "PYTHONPATH": str(harness.ROOT / "lib")}
    log = open(work / "server.log", "wb")  # noqa: SIM115 (the server's whole life)
    server = subprocess.Popen(
        [str(harness.VENV_BIN / "python3"), "-m", "ansible_zygote.server", "--socket", socket_path],
        env=env,
        stderr=log,
    )
    while not os.path.exists(socket_path):
        if server.poll() is not None:
            sys.exit((work / "server.log").read_text())
        time.sleep(0.05)
    return server, socket_path


def template_cpu(server_pid: int) -> dict[str, float]:
    """CPU of the server's tree so far, per program's templates (their children included)."""
    sampler = measure.ProcessSampler(server_pid)
    tree = sampler._tree()
    out: dict[str, float] = defaultdict(float)
    for pid, fields in tree.items():
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        program = next(
            (p for p in ("ansible-runner", "ansible-playbook") if b"template.py\x00" + p.encode() in cmdline),
            None,
        )
        owner = program if program else "server"
        out[owner] += sum(int(x) for x in fields[11:15]) / sampler.tick
    return out


def one_pass(work: Path, name: str, env: dict, cr: dict, path_first: list[str]) -> dict:
    """One reconcile as the runtime starts it; returns its rc, events and the client's CPU."""
    run_dir = work / name
    sink = harness.Sink(str(work / f"{name}.sock"))
    harness.write_input_dir(run_dir, sink.path, env["KUBECONFIG"])
    (run_dir / "env" / "extravars").write_text(json.dumps(extravars(cr)))
    run_env = {**env, "PATH": os.pathsep.join([*path_first, str(harness.VENV_BIN), env["PATH"]])}
    playbook = PLAYBOOK["path"] or harness.ROOT / "playbooks" / "reconcile.yml"
    argv = [
        "ansible-runner",
        "run",
        str(run_dir),
        "--rotate-artifacts",
        "20",
        "-p",
        str(playbook),
        "-i",
        name,
        *(["-" + "v" * VERBOSITY["level"]] if VERBOSITY["level"] else []),
    ]
    started = time.monotonic()
    proc = subprocess.Popen(
        argv, env=run_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=harness.ROOT
    )
    output = proc.stdout.read()  # type: ignore[union-attr]
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    sink.close()
    sink.stop()
    shutil.rmtree(run_dir, ignore_errors=True)
    names = [e.get("event") for e in sink.events]
    if proc.returncode != 0 or "playbook_on_stats" not in names:
        sys.exit(f"{name} failed (rc {proc.returncode}):\n{output.decode(errors='replace')}")
    changed = sum(1 for e in sink.events if (e.get("event_data") or {}).get("res", {}).get("changed"))
    stream = harness.normalized(sink.events, run_dir)
    return {
        "client": usage.ru_utime + usage.ru_stime,
        "wall": wall,
        "events": len(names),
        "changed": changed,
        "stream": stream,
    }


def measured_pass(work: Path, name: str, env: dict, cr: dict, zygote: bool, server_pid: int) -> dict:
    before = template_cpu(server_pid)
    path_first = [str(harness.CLIENT_BIN)] if zygote else []
    result = one_pass(work, name, env, cr, path_first)
    after = template_cpu(server_pid)
    parts = {"process started by the runtime": result["client"]}
    for owner in after:
        parts[f"{owner} tree"] = after[owner] - before.get(owner, 0.0)
    return {**result, "parts": parts, "cpu": sum(parts.values())}


def warm_up(work: Path, env: dict, cr: dict, server_pid: int, log: Path) -> None:
    """Passes until nothing changes (the job's pods exist and run), and both templates are warm."""
    for i in range(10):
        result = one_pass(work, f"warm-{i}", env, cr, [str(harness.CLIENT_BIN)])
        if log.read_text().count("ready") >= 2 and result["changed"] == 0 and i >= 2:
            return
        time.sleep(1)
    sys.exit(f"no steady pass after 10 warm-up passes:\n{log.read_text()}")


def summary(values: list[float]) -> str:
    return f"{min(values):.3f} / {statistics.median(values):.3f}"


def compare(work: Path, env: dict, cr: dict, server_pid: int, runs: int) -> None:
    """Zygote on and off alternately, so both see the same load of a shared machine."""
    results: dict[bool, list[dict]] = {True: [], False: []}
    for i in range(runs):
        for zygote in (False, True):
            results[zygote].append(measured_pass(work, f"run-{i}-{int(zygote)}", env, cr, zygote, server_pid))
    what = "a play without tasks" if PLAYBOOK["path"] else "roles/tfjob, a pass that changes nothing"
    # What the runtime sees must not depend on the zygote (ids, times, pids and the run's name
    # aside, as tests/zygote compares). The baseline is the second pass without it: the first
    # after the warm-up may still write the job's status once.
    baseline = results[False][min(1, runs - 1)]["stream"]
    same = {z: sum(r["stream"] == baseline for r in results[z]) for z in results}
    print(
        f"event streams equal to a pass without the zygote: on {same[True]} of {runs}, off {same[False]} of {runs}"
    )
    print(f"CPU s per reconcile of {what}, min / median of {runs}:")
    for zygote, label in ((False, "ANSIBLE_ZYGOTE=false"), (True, "zygote on")):
        rows = results[zygote]
        print(f"  {label:22} {summary([r['cpu'] for r in rows])}   ({rows[0]['events']} events per pass)")
        print(f"    {'wall seconds from start to exit':40} {summary([r['wall'] for r in rows])}")
        for part in rows[-1]["parts"]:
            values = [r["parts"].get(part, 0.0) for r in rows]
            print(f"    {part:40} {summary(values)}")


def profile(work: Path, env: dict, cr: dict, runs: int) -> None:
    """ansible-playbook's CPU per task and per step, averaged over ``runs`` passes."""
    shim_dir, out = work / "profile-bin", work / "profile"
    shim_dir.mkdir()
    shim = shim_dir / "ansible-playbook"
    shim.write_text(
        f"#!{harness.VENV_BIN / 'python3'}\nimport runpy\nrunpy.run_path({str(HERE / 'reconcile_profile.py')!r}, run_name='__main__')\n"
    )
    shim.chmod(0o755)
    spent: dict[tuple[str, str, str], float] = defaultdict(float)
    calls: dict[tuple[str, str, str], float] = defaultdict(float)
    for i in range(runs):
        out.mkdir()
        prof_env = {
            **env,
            "RECONCILE_PROFILE_DIR": str(out),
            "RECONCILE_PROFILE_REAL": str(harness.VENV_BIN / "ansible-playbook"),
            "RECONCILE_PROFILE_LIB": str(harness.ROOT / "lib"),
        }
        one_pass(work, f"profile-{i}", prof_env, cr, [str(shim_dir), str(harness.CLIENT_BIN)])
        for file in out.glob("*.prof"):
            file.rename(Path(os.environ["RECONCILE_PROFILE_CPROFILE"]) / f"{i}-{file.name}")
        for file in out.glob("*.json"):
            data = json.loads(file.read_text())
            for key, seconds in data["spent"].items():
                task, what = key.split("\t")
                spent[(data["role"], task, what)] += seconds / runs
                calls[(data["role"], task, what)] += data["count"].get(key, 0) / runs
        shutil.rmtree(out)
    print(f"ansible-playbook CPU ms per pass by task and step (mean of {runs}; steps nest):")
    for (role, task, what), seconds in sorted(spent.items()):
        count = calls[(role, task, what)]
        print(f"  {role:6} {task[:45]:45} {what:45} {seconds * 1000:7.1f} ms {count:5.0f} calls")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=15, help="passes per mode")
    parser.add_argument("--port", type=int, default=19650, help="kubectl proxy's port (loopback)")
    parser.add_argument("--profile", action="store_true", help="also profile ansible-playbook per task")
    parser.add_argument(
        "--checkout",
        type=Path,
        default=ROOT,
        help="measure the role, plugins and zygote of another checkout (a git worktree: before/after)",
    )
    parser.add_argument("--noop", action="store_true", help="run a play without tasks instead of the role")
    parser.add_argument(
        "--verbosity", type=int, default=0, help="the runtime's --ansible-verbosity (ansible-runner -v...)"
    )
    args = parser.parse_args()
    # The harness runs the playbook, plugins, lib/ and zygote client of this checkout; kubectl
    # and the virtualenv stay this one's.
    harness.ROOT = args.checkout.resolve()
    harness.CLIENT_BIN = harness.ROOT / "lib" / "ansible_zygote" / "bin"
    work = Path(tempfile.mkdtemp(prefix="rcost-", dir="/tmp"))  # unix socket paths are short
    namespace = f"{NAMESPACE}-{os.getpid()}"
    proxy, kubeconfig = start_proxy(args.port, work)
    VERBOSITY["level"] = args.verbosity
    if args.noop:
        PLAYBOOK["path"] = work / "noop.yml"
        PLAYBOOK["path"].write_text(NOOP)
    server, socket_path = start_server(work)
    try:
        kubectl("create", "namespace", namespace)
        job = joblib.job("TFJob", JOB, namespace, run_for="24h")
        kubectl("apply", "-f", "-", stdin=json.dumps(job))
        env = {
            **harness.operator_env(socket_path),
            "KUBECONFIG": kubeconfig,
            "K8S_AUTH_KUBECONFIG": kubeconfig,
        }
        cr = json.loads(kubectl("get", "tfjob", JOB, "-n", namespace, "-o", "json"))
        warm_up(work, env, cr, server.pid, work / "server.log")
        cr = json.loads(kubectl("get", "tfjob", JOB, "-n", namespace, "-o", "json"))
        compare(work, env, cr, server.pid, args.runs)
        if args.profile:
            profile(work, env, cr, args.runs)
    finally:
        server.terminate()
        proxy.terminate()
        server.wait()
        proxy.wait()
        kubectl("delete", "namespace", namespace, "--wait=false", "--ignore-not-found")
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
