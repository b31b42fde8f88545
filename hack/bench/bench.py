#!/usr/bin/env python3
"""The benchmark: job bursts against the operator run as users run it, the Ansible floor, and
Kubeflow's training-operator on the same cluster, one after the other.

    hack/bench.sh [--profile full|smoke] [--targets floor,ours,upstream] [--out DIR]

(hack/bench.sh starts the benchmark's own cluster and calls this with KUBECONFIG set.)

For every burst: N jobs of five replicas are created at once; KWOK runs every pod for a few
seconds and ends it with exit code 0. Watches on pods and jobs time each job: create -> all pods
created, create -> Running, last pod finished -> job finished. Around each burst the API server's
``apiserver_request_total``, the operator's reconcile histogram, the log's task count and the
CPU of the operator's process tree are read; the peak RSS of the tree is sampled throughout.
Results: ``results.json``, then ``report.py`` writes ``results.md`` and the plots.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[2] / "lib"))
import jobs as joblib
import kueue_bench
import measure
import scale
from kubernetes import client, config, watch
from training_jobs.pod_signature import ANNOTATION as POD_SIGNATURE  # the companion's wake

ROOT = Path(__file__).resolve().parents[2]
FLOOR_DIR = ROOT / "hack" / "bench" / "floor"

# Jobs created together whose pods run longer than a pass but shorter than a busy queue: each job's
# condition history must still hold Running before its final condition (issue 27).
HISTORY = {"jobs": 20, "kinds": ["TFJob", "PyTorchJob"], "run_for": "15s"}

PROFILES = {
    # Bursts of every kind alone and all of them mixed; training-operator with TFJobs.
    "full": {
        "bursts": [1, 10, 50, 100],
        "scenarios": [*joblib.KINDS, "mixed"],
        "upstream_bursts": [1, 10, 50, 100],
        "floor_jobs": 30,
    },
    # TFJob bursts only, on both operators: the quick before/after of a tuning change.
    "tfjob": {
        "bursts": [1, 10, 50, 100],
        "scenarios": ["TFJob"],
        "upstream_bursts": [1, 10, 50, 100],
        "floor_jobs": 30,
    },
    # The smoke run in `make test`: every measurement path once, in a few minutes.
    "smoke": {
        "bursts": [1, 4],
        "scenarios": ["TFJob", "mixed"],
        "upstream_bursts": [1],
        "floor_jobs": 4,
        "scale": {
            "steady": [0, 5],
            "window": 10,
            "restart": [20],
            "outage": 4,
            "down_s": 5,
            "outage_restarts": ["apiserver", "full"],
        },
        "history": HISTORY,
    },
    # The cost with changes (scale.py): steady state, restarts and an outage, this operator only.
    "scale": {
        "bursts": [],
        "scenarios": [],
        "upstream_bursts": [],
        "floor_jobs": 0,
        "scale": {
            "steady": [0, 25, 100, 500],
            "window": 60,
            "restart": [100, 1000],
            "restart_running": [100],
            "outage": 20,
            "down_s": 10,
            "outage_restarts": ["apiserver", "full"],
        },
    },
}
# The control-plane outage alone, a minute or two.
PROFILES["outage"] = {
    "bursts": [],
    "scenarios": [],
    "upstream_bursts": [],
    "floor_jobs": 0,
    "scale": {"outage": 20, "down_s": 10, "outage_restarts": ["apiserver", "full"]},
    # training-operator through the same outages, for comparison.
    "upstream_scale": {"outage": 20, "down_s": 10, "outage_restarts": ["apiserver", "full"]},
}
# Kueue admitting a burst that waited in a held queue (hack/bench/queue.py).
PROFILES["kueue"] = {"bursts": [], "scenarios": [], "upstream_bursts": [], "floor_jobs": 0, "kueue": 20}
# Operator restarts alone: with finished jobs, and with running ones.
PROFILES["restarts"] = {
    "bursts": [],
    "scenarios": [],
    "upstream_bursts": [],
    "floor_jobs": 0,
    "scale": {"restart": [100], "restart_running": [25, 100]},
}
# The full profile ends with the scale scenarios too, and training-operator's outages.
PROFILES["full"]["scale"] = PROFILES["scale"]["scale"]
PROFILES["full"]["upstream_scale"] = PROFILES["outage"]["upstream_scale"]
PROFILES["full"]["kueue"] = PROFILES["kueue"]["kueue"]
for name in ("full", "tfjob"):
    PROFILES[name]["history"] = PROFILES[name]["upstream_history"] = HISTORY
    # Issue 27's large burst, TFJobs only, on both operators.
    PROFILES[name]["large_bursts"] = [500]
    PROFILES[name]["upstream_bursts"] = [*PROFILES[name]["upstream_bursts"], 500]
REPLICAS = 5
RUN_FOR = "5s"
# In every namespace name: runner artifacts of an earlier run (/tmp/ansible-operator) never mix in.
RUN_ID = os.urandom(3).hex()


def log(msg: str) -> None:
    print(f"[bench {datetime.now(UTC):%H:%M:%S}] {msg}", flush=True)


def kubectl(*args: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(ROOT / "bin" / "kubectl"), *args], input=stdin, capture_output=True, text=True, check=check
    )


def clear_earlier_runs() -> None:
    """Delete what an interrupted run left: its jobs would be reconciled by this run's operator
    (a restart re-runs every job it holds) and count in this run's numbers."""
    listed = kubectl("get", "namespaces", "-o", "name", check=False).stdout.split()
    left = [name.removeprefix("namespace/") for name in listed if name.startswith("namespace/bench-")]
    if left:
        log(f"deleting {len(left)} namespace(s) an earlier run left: {' '.join(left)}")
        kubectl("delete", "namespace", *left, "--wait=true", "--timeout=600s", check=False)


def http_ok(url: str) -> bool:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=2) as resp:
            return resp.status == 200
    except OSError:
        return False


class Operator:
    """One operator process tree, started in its own session and stopped with SIGINT."""

    def __init__(self, name, cmd, env, logfile, ready_url, metrics_url, histogram, match, pid_file=None):
        self.name, self.cmd, self.env, self.logfile = name, cmd, env, logfile
        self.ready_url, self.metrics_url = ready_url, metrics_url
        self.histogram, self.match = histogram, match
        self.pid_file = pid_file
        self.proc: subprocess.Popen | None = None
        self.pid = 0
        self.sampler: measure.ProcessSampler | None = None

    def start(self) -> None:
        log(f"starting {self.name}")
        out = open(self.logfile, "ab")  # noqa: SIM115 (kept open for the child's lifetime)
        self.proc = subprocess.Popen(
            self.cmd, env=self.env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, cwd=ROOT
        )
        deadline = time.monotonic() + 180
        while not http_ok(self.ready_url):
            if self.proc.poll() is not None and not self.pid_file:
                raise RuntimeError(f"{self.name} exited; see {self.logfile}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} not ready after 180 s; see {self.logfile}")
            time.sleep(0.5)
        self.pid = int(Path(self.pid_file).read_text()) if self.pid_file else self.proc.pid
        self.sampler = measure.ProcessSampler(self.pid).start()
        log(f"{self.name} ready (pid {self.pid})")
        self.settle()

    def settle(self) -> None:
        """Wait until the operator's Ansible zygote has no template warming (if it runs one): a
        template's warm-up is a one-off cost of a start or a new environment, not of the
        reconciles measured next (the server also warms successors every 200 runs; those stay
        counted)."""
        path = zygote_socket(self.sampler.commands()) if self.sampler else None
        if path is None:
            return
        started, deadline = time.monotonic(), time.monotonic() + 300
        while time.monotonic() < deadline:
            stats = zygote_stats(path)
            if stats and stats.get("templates") and not stats.get("warming"):
                log(f"{self.name}: the zygote's templates are warm after {time.monotonic() - started:.1f} s")
                return
            time.sleep(0.5)
        log(f"{self.name}: the zygote still has templates warming after 300 s; measuring anyway")

    def stop(self, stop_cmd=None) -> None:
        if self.sampler:
            self.sampler.stop()
        if stop_cmd:
            subprocess.run(stop_cmd, env=self.env, check=False, cwd=ROOT)
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGINT)
            try:
                self.proc.wait(timeout=45)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()

    def snapshot(self) -> dict:
        samples = measure.scrape(self.metrics_url)
        return {
            "reconciles": measure.histogram(samples, self.histogram, self.match),
            "cpu": self.sampler.cpu_seconds() if self.sampler else 0.0,
            "cpu_parts": self.sampler.cpu_by_part() if self.sampler else {},
        }


def zygote_socket(commands: dict[int, list[str]]) -> str | None:
    """The socket of the zygote server among an operator's processes (hack/run.sh starts it as
    ``python3 -m ansible_zygote --socket PATH ...``)."""
    for args in commands.values():
        if "ansible_zygote" in args and "--socket" in args[:-1]:
            return args[args.index("--socket") + 1]
    return None


def zygote_stats(path: str) -> dict | None:
    """The server's {"stats": true} answer (lib/ansible_zygote/server.py), None if it does not answer."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        sock.settimeout(10)
        sock.connect(path)
        sock.sendall(json.dumps({"stats": True}).encode())
        return json.loads(sock.recv(65536))
    except (OSError, ValueError):
        return None
    finally:
        sock.close()


def apiserver_writes() -> dict[str, float]:
    return measure.api_writes(measure.parse(kubectl("get", "--raw", "/metrics").stdout))


def follow(stopped: threading.Event, w: watch.Watch, handler, lister, args) -> None:
    """handler(type, object, monotonic time) for every watch event until ``stopped``. A watch the
    API server ended (its restart in the outage scenario closes every watch cleanly) or dropped is
    opened again, from a fresh list."""
    while not stopped.is_set():
        try:
            for ev in w.stream(lister, *args, timeout_seconds=3600):
                handler(ev["type"], ev["object"], time.monotonic())
        except Exception:
            time.sleep(0.2)


class Tracker:
    """Watch-event times of one burst's pods and jobs (monotonic seconds)."""

    def __init__(self, namespace: str, kinds: set[str]):
        self.ns = namespace
        self.lock = threading.Lock()
        self.pod_added: dict[str, dict[str, float]] = {}
        self.pod_running: dict[str, dict[str, float]] = {}
        self.pod_finished: dict[str, dict[str, float]] = {}
        self.job_running: dict[str, float] = {}
        self.job_done: dict[str, tuple[float, str]] = {}
        # The condition types of each job when it was first seen finished.
        self.job_history: dict[str, list[str]] = {}
        # When the companion last wrote the job's pod signature (its wake) before it was done.
        self.job_woken: dict[str, float] = {}
        self.wake_seen: dict[str, str] = {}
        self.watches: list[watch.Watch] = []
        self.stopped = threading.Event()
        core, custom = client.CoreV1Api(), client.CustomObjectsApi()
        streams = [(self._on_pod, core.list_namespaced_pod, (namespace,))]
        for kind in kinds:
            group, version, plural = joblib.API[kind]
            streams.append(
                (self._on_job, custom.list_namespaced_custom_object, (group, version, namespace, plural))
            )
        self.threads = []
        for handler, lister, args in streams:
            w = watch.Watch()
            self.watches.append(w)
            t = threading.Thread(target=self._run, args=(w, handler, lister, args), daemon=True)
            t.start()
            self.threads.append(t)

    def _run(self, w, handler, lister, args):
        follow(self.stopped, w, handler, lister, args)

    def _on_pod(self, etype, pod, now):
        owners = pod.metadata.owner_references or []
        job = next((o.name for o in owners if o.controller), None)
        if not job:
            return
        name = pod.metadata.name
        with self.lock:
            self.pod_added.setdefault(job, {}).setdefault(name, now)
            phase = pod.status.phase if pod.status else None
            if phase == "Running":
                self.pod_running.setdefault(job, {}).setdefault(name, now)
            elif phase in ("Succeeded", "Failed"):
                self.pod_finished.setdefault(job, {}).setdefault(name, now)

    def _on_job(self, etype, obj, now):
        name = obj["metadata"]["name"]
        signature = (obj["metadata"].get("annotations") or {}).get(POD_SIGNATURE)
        with self.lock:
            if signature and name not in self.job_done and self.wake_seen.get(name) != signature:
                self.wake_seen[name] = signature
                self.job_woken[name] = now
            for c in (obj.get("status") or {}).get("conditions") or []:
                if c.get("status") != "True":
                    continue
                if c["type"] == "Running":
                    self.job_running.setdefault(name, now)
                elif c["type"] in ("Succeeded", "Failed"):
                    self.job_done.setdefault(name, (now, c["type"]))
            if name in self.job_done:
                history = [c.get("type") for c in (obj.get("status") or {}).get("conditions") or []]
                self.job_history.setdefault(name, history)

    def stop(self):
        self.stopped.set()
        for w in self.watches:
            w.stop()


def run_burst(
    op: Operator, scenario: str, n: int, index: int, kinds: list[str] | None = None, run_for: str = RUN_FOR
) -> dict:
    kinds = kinds or (list(joblib.KINDS) if scenario == "mixed" else [scenario])
    ns = f"bench-{op.name}-{RUN_ID}-{index}"
    kubectl("create", "namespace", ns)
    plan = [(kinds[i % len(kinds)], f"j{i}") for i in range(n)]
    tracker = Tracker(ns, {k for k, _ in plan})
    time.sleep(1.0)  # the watches are open before the first job exists
    writes_before = apiserver_writes()
    before = op.snapshot()
    # What the operator's tree holds between bursts (the first burst's: idle since its start,
    # the zygote's warm templates included).
    rss_before, pss_before = op.sampler.memory_bytes()
    op.sampler.reset_peak()
    custom = client.CustomObjectsApi()
    submitted: dict[str, float] = {}

    def submit(item):
        kind, name = item
        group, version, plural = joblib.API[kind]
        body = joblib.job(kind, name, ns, REPLICAS, run_for)
        t = time.monotonic()
        custom.create_namespaced_custom_object(group, version, ns, plural, body)
        submitted[name] = t

    t0 = time.monotonic()
    with ThreadPoolExecutor(max_workers=16) as pool:
        list(pool.map(submit, plan))
    # Only catches a hang (then the burst fails): how long the jobs took is the measurement.
    timeout = 600 + 10 * n
    while len(tracker.job_done) < n and time.monotonic() - t0 < timeout:
        time.sleep(0.5)
    time.sleep(2)  # the last status writes and events land in the counters
    after = op.snapshot()
    writes_after = apiserver_writes()
    peak, peak_pss = op.sampler.peak_rss, op.sampler.peak_pss
    tracker.stop()
    result = summarize(
        op, ns, scenario, n, plan, submitted, tracker, before, after, writes_before, writes_after, t0
    )
    result["run_for"] = run_for
    result["peak_rss_mib"] = round(peak / 2**20, 1)
    result["peak_pss_mib"] = round(peak_pss / 2**20, 1)
    result["rss_before_mib"] = round(rss_before / 2**20, 1)
    result["pss_before_mib"] = round(pss_before / 2**20, 1)
    kubectl("delete", "namespace", ns, "--wait=true", "--timeout=300s", check=False)
    log(
        f"{op.name} {scenario} x{n}: done {result['finished']}/{n}, "
        f"create->pods p50 {fmt(result['create_to_pods']['p50'])}, "
        f"finish->condition p50 {fmt(result['finish_to_condition']['p50'])}, "
        f"writes/job {fmt(result['writes_per_job'])}, reconcile p50 {fmt(result['reconcile']['p50'])}, "
        f"Running recorded by {result['recorded_running']}"
    )
    return result


def fmt(v) -> str:
    return "-" if v is None else f"{v:.2f}"


RUNNER_DIR = Path("/tmp/ansible-operator/runner")


def ansible_tasks(namespace: str) -> tuple[int, int]:
    """(Ansible runs, tasks started) of the CRs in ``namespace``, from the runs' ansible-runner
    artifacts (``.../<namespace>/<name>/artifacts/<run>/job_events``): every task counts, also
    set_fact and skipped ones, which the runtime's task log leaves out. The runtime keeps the
    last ``--max-runner-artifacts`` (20) runs per CR."""
    runs = tasks = 0
    for events in RUNNER_DIR.glob(f"*/*/*/{namespace}/*/artifacts/*/job_events"):
        runs += 1
        for path in events.glob("*.json"):
            try:
                if json.loads(path.read_text()).get("event") == "playbook_on_task_start":
                    tasks += 1
            except (OSError, ValueError):
                continue
    return runs, tasks


def summarize(
    op, ns, scenario, n, plan, submitted, tr, before, after, writes_before, writes_after, t0
) -> dict:
    create_to_pods, create_to_running, finish_to_condition, create_to_done = [], [], [], []
    create_to_pods_running = []
    last_pod_created = t0
    for _, name in plan:
        t_sub = submitted.get(name)
        added = tr.pod_added.get(name, {})
        if t_sub is not None and len(added) >= REPLICAS:
            create_to_pods.append(max(added.values()) - t_sub)
            last_pod_created = max(last_pod_created, max(added.values()))
        running = tr.pod_running.get(name, {})
        if t_sub is not None and len(running) >= REPLICAS:
            create_to_pods_running.append(max(running.values()) - t_sub)
        if t_sub is not None and name in tr.job_running:
            create_to_running.append(tr.job_running[name] - t_sub)
        finished = tr.pod_finished.get(name, {})
        if name in tr.job_done and finished:
            finish_to_condition.append(tr.job_done[name][0] - max(finished.values()))
        if t_sub is not None and name in tr.job_done:
            create_to_done.append(tr.job_done[name][0] - t_sub)
    hist = measure.histogram_delta(after["reconciles"], before["reconciles"])
    delta = {
        k: v - writes_before.get(k, 0) for k, v in writes_after.items() if v - writes_before.get(k, 0) > 0
    }
    ours = measure.operator_writes(delta)
    creates = sum(v for k, v in ours.items() if k.startswith("POST "))
    writes = sum(ours.values())
    # The fewest writes that can run these jobs: create each object once, and three status
    # writes per job (Created, Running, finished).
    minimum = creates + 3 * n
    runs, tasks = ansible_tasks(ns)
    all_pods_s = last_pod_created - t0 if create_to_pods else None
    return {
        "target": op.name,
        "scenario": scenario,
        "jobs": n,
        "replicas": REPLICAS,
        "finished": len(tr.job_done),
        "succeeded": sum(1 for _, s in tr.job_done.values() if s == "Succeeded"),
        # Jobs whose history holds Running before their final condition (upstream's, when its
        # passes saw the pods run; ours always, when a container started).
        "recorded_running": sum(1 for history in tr.job_history.values() if "Running" in history),
        "create_to_pods": measure.quantiles(create_to_pods),
        "create_to_running": measure.quantiles(create_to_running),
        "create_to_pods_running": measure.quantiles(create_to_pods_running),
        "finish_to_condition": measure.quantiles(finish_to_condition),
        "create_to_done": measure.quantiles(create_to_done),
        "all_pods_created_s": all_pods_s,
        "pods_per_second": (n * REPLICAS / all_pods_s) if all_pods_s else None,
        "samples": {
            "create_to_pods": sorted(create_to_pods),
            "finish_to_condition": sorted(finish_to_condition),
        },
        "reconcile": {
            "count": hist["count"],
            "mean": hist["sum"] / hist["count"] if hist["count"] else None,
            "p50": measure.histogram_quantile(0.5, hist),
            "p95": measure.histogram_quantile(0.95, hist),
        },
        "reconciles_per_job": hist["count"] / n,
        "ansible_runs_counted": runs,
        "tasks_per_reconcile": tasks / runs if runs else None,
        "api_writes": ours,
        "api_writes_other": {k: v for k, v in delta.items() if k not in ours},
        "writes_per_job": writes / n,
        "min_writes_per_job": minimum / n,
        "writes_ratio": writes / minimum if minimum else None,
        "cpu_seconds": round(after["cpu"] - before["cpu"], 2),
        "cpu_parts": cpu_parts(before, after),
    }


def cpu_parts(before: dict, after: dict) -> dict[str, float]:
    """CPU seconds each part of the operator's tree spent between two snapshots."""
    parts = after.get("cpu_parts", {})
    spent = {k: v - before.get("cpu_parts", {}).get(k, 0.0) for k, v in parts.items()}
    return {k: round(v, 2) for k, v in sorted(spent.items()) if round(v, 2)}


def floor_run(env: dict, out: Path, jobs: int) -> dict:
    """The runtime reconciling an empty role: what any Ansible operator pays per reconcile."""
    watches = out / "floor-watches.yaml"
    watches.write_text(
        "---\n"
        "- version: v1\n  group: bench.training.ato.dev\n  kind: Floor\n"
        f"  role: {FLOOR_DIR / 'roles' / 'floor'}\n"
        "  manageStatus: false\n  markUnsafe: true\n  snakeCaseParameters: false\n"
    )
    kubectl("apply", "--server-side", "-f", str(FLOOR_DIR / "crd.yaml"))
    kubectl("wait", "--for=condition=Established", "crd/floors.bench.training.ato.dev", "--timeout=60s")
    op = ours_operator(env, out, "floor", ["--watches-file", str(watches)])
    floor_ns = f"bench-floor-{RUN_ID}"
    op.start()
    try:
        kubectl("create", "namespace", floor_ns)
        # The runtime runs a role with ANSIBLE_ROLES_PATH of its own: a fingerprint the zygote's
        # prewarm (a playbook) has not seen. One reconcile first, then its templates warm.
        floors(op, floor_ns, ["warm-up"])
        op.settle()
        before = op.snapshot()
        floors(op, floor_ns, [f"f{i}" for i in range(jobs)])
        after = op.snapshot()
        hist = measure.histogram_delta(after["reconciles"], before["reconciles"])
        runs, tasks = ansible_tasks(floor_ns)
        result = {
            "reconciles": hist["count"],
            "mean": hist["sum"] / hist["count"] if hist["count"] else None,
            "p50": measure.histogram_quantile(0.5, hist),
            "p95": measure.histogram_quantile(0.95, hist),
            "tasks_per_reconcile": tasks / runs if runs else None,
            "cpu_seconds_per_reconcile": (after["cpu"] - before["cpu"]) / hist["count"]
            if hist["count"]
            else None,
            "cpu_parts_per_reconcile": {
                k: round(v / hist["count"], 4) for k, v in cpu_parts(before, after).items()
            }
            if hist["count"]
            else {},
        }
        log(f"floor: {result}")
        kubectl("delete", "namespace", floor_ns, "--wait=true", "--timeout=120s", check=False)
        return result
    finally:
        op.stop()


def floors(op: Operator, namespace: str, names: list[str]) -> None:
    """Create Floor objects and wait until the operator has reconciled as many times."""
    before = op.snapshot()
    items = "\n".join(
        json.dumps(
            {
                "apiVersion": "bench.training.ato.dev/v1",
                "kind": "Floor",
                "metadata": {"name": name, "namespace": namespace},
                "spec": {},
            }
        )
        for name in names
    )
    kubectl("apply", "-f", "-", stdin=items)
    deadline = time.monotonic() + 60 + 5 * len(names)
    while time.monotonic() < deadline:
        hist = measure.histogram_delta(op.snapshot()["reconciles"], before["reconciles"])
        if hist["count"] >= len(names):
            return
        time.sleep(1)


def ours_operator(env: dict, out: Path, name: str, extra: list[str] | None = None) -> Operator:
    return Operator(
        name,
        [str(ROOT / "hack" / "run.sh"), *(extra or [])],
        env,
        str(out / f"{name}.log"),
        "http://127.0.0.1:6789/readyz",
        "http://127.0.0.1:8443/metrics",
        # Not the runtime's ansible_operator_reconciles: that timer stops when ansible-runner has
        # been *started* (runner.go observes before the run's goroutine ends), so it reads ~1 ms.
        "controller_runtime_reconcile_time_seconds",
        {},
    )


def upstream_operator(env: dict, out: Path, schemes: list[str]) -> Operator:
    """training-operator with the TFJob controller and those of ``schemes`` (lower-case kinds)."""
    script = str(ROOT / "hack" / "bench" / "training-operator.sh")
    return Operator(
        "training-operator",
        # Info logging: upstream's Deployment logs at debug level, which would cost it CPU here.
        [script, "start", "--zap-log-level=info", *(f"--enable-scheme={s}" for s in schemes)],
        {**env, "TRAINING_OPERATOR_LOG": str(out / "training-operator.log")},
        str(out / "training-operator.start.log"),
        "http://127.0.0.1:18081/readyz",
        "http://127.0.0.1:18080/metrics",
        "controller_runtime_reconcile_time_seconds",
        {"controller": "tfjob-controller"},
        pid_file=str(ROOT / ".kwok" / "bench-training-operator" / "pid"),
    )


def bursts(
    op: Operator, scenarios: list[str], sizes: list[int], start_index: int, history: dict | None = None
) -> list[dict]:
    results = []
    index = start_index
    for scenario in scenarios:
        for n in sizes:
            results.append(run_burst(op, scenario, n, index))
            index += 1
    if history:
        scenario = "+".join(history["kinds"]) + " " + history["run_for"]
        results.append(run_burst(op, scenario, history["jobs"], index, history["kinds"], history["run_for"]))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--profile", choices=sorted(PROFILES), default="full")
    parser.add_argument("--targets", default="floor,ours,upstream")
    parser.add_argument("--out", required=True)
    parser.add_argument("--concurrency", default=os.environ.get("MAX_CONCURRENT_RECONCILES", "2"))
    parser.add_argument("--scenarios", help="comma-separated kinds and/or 'mixed' (default: the profile's)")
    args = parser.parse_args()
    profile = dict(PROFILES[args.profile])
    if args.scenarios:
        profile["scenarios"] = args.scenarios.split(",")
    targets = args.targets.split(",")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    config.load_kube_config()
    clear_earlier_runs()
    env = {**os.environ, "MAX_CONCURRENT_RECONCILES": args.concurrency}
    results: dict = {
        "meta": {
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "profile": args.profile,
            "machine": {
                "cpus": os.cpu_count(),
                "python": platform.python_version(),
                "kernel": platform.release(),
            },
            "max_concurrent_reconciles": int(args.concurrency),
            "job_poll_seconds": int(os.environ.get("JOB_POLL_SECONDS") or 0),
            "job_wake": os.environ.get("JOB_WAKE", "true"),
            "replicas": REPLICAS,
            "run_for": RUN_FOR,
            "versions": dict(
                line.split("=", 1)
                for line in (ROOT / "versions.env").read_text().splitlines()
                if "=" in line and not line.startswith("#")
            ),
        },
        "bursts": [],
    }
    if "floor" in targets and profile["floor_jobs"]:
        results["floor"] = floor_run(env, out, profile["floor_jobs"])
    index = 0
    if "ours" in targets:
        op = ours_operator(env, out, "ours")
        op.start()
        try:
            results["bursts"] += bursts(
                op, profile["scenarios"], profile["bursts"], index, profile.get("history")
            )
            if profile.get("large_bursts"):
                results["bursts"] += bursts(op, ["TFJob"], profile["large_bursts"], 50)
            if profile.get("scale"):
                results["scale"] = scale.run(sys.modules[__name__], op, profile["scale"])
            if profile.get("kueue"):
                results.setdefault("scale", []).append(kueue_run(op, profile["kueue"]))
        finally:
            op.stop()
        index = 100
    upstream_scale = profile.get("upstream_scale") or {}
    if "upstream" in targets and (profile["upstream_bursts"] or upstream_scale):
        upstream_bursts, upstream_outages = upstream_run(
            env, out, profile["upstream_bursts"], index, upstream_scale, profile.get("upstream_history")
        )
        results["bursts"] += upstream_bursts
        results.setdefault("scale", []).extend(upstream_outages)
    (out / "results.json").write_text(json.dumps(results, indent=2))
    log(f"results in {out}/results.json")
    unfinished = [b for b in results["bursts"] if b["succeeded"] < b["jobs"]]
    for b in unfinished:
        log(f"{b['target']} {b['scenario']} x{b['jobs']}: only {b['succeeded']} jobs succeeded")
    unrecorded = [
        b
        for b in results["bursts"]
        if b["target"] != "training-operator" and b["recorded_running"] < b["finished"]
    ]
    for b in unrecorded:
        log(
            f"{b['target']} {b['scenario']} x{b['jobs']}: {b['finished'] - b['recorded_running']} jobs ended without Running"
        )
    broken = scale.incomplete(results.get("scale") or [])
    for line in broken:
        log(line)
    for line in scale.within_targets(results.get("scale") or []):
        log(f"target missed: {line}")
    if unfinished or unrecorded or broken:
        sys.exit(1)


def kueue_run(op: Operator, n: int) -> dict:
    """Kueue started as the tests start it, for the scenario only: its webhooks would hold up
    every other scenario's job creates."""
    kueue_bench.kueue("up")
    try:
        return kueue_bench.admission(sys.modules[__name__], op, n, 0)
    finally:
        kueue_bench.kueue("down")


def upstream_run(
    env: dict, out: Path, sizes: list[int], index: int, scale_plan: dict, history: dict | None
) -> tuple[list[dict], list[dict]]:
    """Bursts and outages of training-operator. It owns kubeflow.org's TFJob too: our APIs make
    way for its CRDs during its run and come back afterwards."""
    script = str(ROOT / "hack" / "bench" / "training-operator.sh")
    kubectl("delete", "-k", str(ROOT / "config" / "admission"), "--ignore-not-found", check=False)
    kubectl("delete", "-k", str(ROOT / "config" / "crd"), "--ignore-not-found", "--wait=true")
    subprocess.run([script, "crds"], env=env, check=True, cwd=ROOT)
    others = {kind.lower() for kind in (history or {}).get("kinds", [])} - {"tfjob"}
    op = upstream_operator(env, out, sorted(others))
    op.start()
    try:
        return (
            bursts(op, ["TFJob"], sizes, index, history),
            scale.outages(sys.modules[__name__], op, scale_plan, 10),
        )
    finally:
        op.stop([script, "stop"])
        subprocess.run([script, "delete-crds"], env=env, check=False, cwd=ROOT)
        kubectl("apply", "--server-side", "--force-conflicts", "-k", str(ROOT / "config" / "crd"))


if __name__ == "__main__":
    main()
