"""What the benchmark reads: Prometheus text, histogram quantiles, the API server's request
counters, and the CPU and memory of an operator's whole process tree from /proc.

Pure functions except :class:`ProcessSampler` (reads /proc) and :func:`scrape` (one HTTP GET).
"""

from __future__ import annotations

import math
import os
import re
import threading
import time
import urllib.request

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')

# Writes an operator makes for a job: its objects and the job's own status. Pod status patches
# (KWOK's simulated kubelet), bindings (the scheduler) and events are someone else's or best
# effort, and are reported apart.
WRITE_VERBS = {"POST", "PUT", "PATCH", "DELETE"}
OWNED_RESOURCES = {"pods", "services", "configmaps", "podgroups", "deployments"}
JOB_RESOURCES = {"tfjobs", "mxjobs", "pytorchjobs", "xgboostjobs", "jaxjobs", "paddlejobs", "caffe2jobs"}


def parse(text: str) -> list[tuple[str, dict[str, str], float]]:
    """Prometheus text format -> ``[(name, labels, value)]``."""
    out = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if not m:
            continue
        labels = dict(_LABEL.findall(m.group(2) or ""))
        try:
            out.append((m.group(1), labels, float(m.group(3))))
        except ValueError:
            continue
    return out


def scrape(url: str, timeout: float = 10) -> list[tuple[str, dict[str, str], float]]:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=timeout) as resp:
        return parse(resp.read().decode())


def histogram(samples, name: str, match: dict[str, str]) -> dict:
    """Buckets, count and sum of one histogram series: ``{"buckets": {le: n}, "count", "sum"}``."""
    buckets: dict[float, float] = {}
    total = count = 0.0
    for n, labels, value in samples:
        if any(labels.get(k) != v for k, v in match.items()):
            continue
        if n == name + "_bucket":
            le = math.inf if labels["le"] == "+Inf" else float(labels["le"])
            buckets[le] = buckets.get(le, 0) + value
        elif n == name + "_count":
            count += value
        elif n == name + "_sum":
            total += value
    return {"buckets": buckets, "count": count, "sum": total}


def histogram_delta(after: dict, before: dict) -> dict:
    return {
        "buckets": {le: n - before["buckets"].get(le, 0) for le, n in after["buckets"].items()},
        "count": after["count"] - before["count"],
        "sum": after["sum"] - before["sum"],
    }


def histogram_quantile(q: float, hist: dict) -> float | None:
    """Prometheus' ``histogram_quantile``: linear interpolation inside the bucket."""
    buckets = sorted(hist["buckets"].items())
    if not buckets or buckets[-1][1] <= 0:
        return None
    rank = q * buckets[-1][1]
    lower_le, lower_n = 0.0, 0.0
    for le, n in buckets:
        if n >= rank:
            if math.isinf(le):
                return lower_le
            if n == lower_n:
                return le
            return lower_le + (le - lower_le) * (rank - lower_n) / (n - lower_n)
        lower_le, lower_n = le, n
    return None


def api_writes(samples) -> dict[str, float]:
    """``apiserver_request_total`` as ``{"VERB resource[/subresource]": n}`` for writes."""
    out: dict[str, float] = {}
    for n, labels, value in samples:
        if n != "apiserver_request_total" or labels.get("verb") not in WRITE_VERBS:
            continue
        key = labels.get("resource", "")
        if labels.get("subresource"):
            key += "/" + labels["subresource"]
        key = f"{labels['verb']} {key}"
        out[key] = out.get(key, 0) + value
    return out


def operator_writes(delta: dict[str, float]) -> dict[str, float]:
    """From a before/after difference of :func:`api_writes`, what an operator wrote for its jobs:
    creates and deletes of the objects jobs own, and writes of the jobs (status included) other
    than the benchmark's own creates."""
    out = {}
    for key, n in delta.items():
        verb, resource = key.split(" ", 1)
        base, _, sub = resource.partition("/")
        if (base in OWNED_RESOURCES and not sub and verb in ("POST", "DELETE")) or (
            base in JOB_RESOURCES and verb != "POST"
        ):
            out[key] = n
    return out


def quantiles(values: list[float]) -> dict:
    """p50/p95/p99/max/mean of a list (nearest rank), or nulls for an empty one."""
    if not values:
        return {"n": 0, "p50": None, "p95": None, "p99": None, "max": None, "mean": None}
    v = sorted(values)

    def rank(q: float) -> float:
        return v[min(len(v) - 1, max(0, math.ceil(q * len(v)) - 1))]

    return {
        "n": len(v),
        "p50": rank(0.50),
        "p95": rank(0.95),
        "p99": rank(0.99),
        "max": v[-1],
        "mean": sum(v) / len(v),
    }


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


# (marker in the command line, part of the process's own CPU, part of what it reaped), first
# match wins. A process's time lands in the same part before and after its parent reaps it: the
# runtime reaps the ansible-runner it starts (the zygote's client, or without the zygote the
# real program and everything below it), a run of the zygote's ansible-runner reaps the
# ansible-playbook client, a template the runs it forked. Not so for a retired template: the
# server reaps it, so its runs leave their program's part (which can go negative over a burst)
# for "retired templates' runs".
_PARTS = [
    ("ansible_zygote/bin/ansible-runner", "runtime's children", "runtime's children"),
    ("ansible_zygote/bin/ansible-playbook", "ansible-runner runs", "ansible-runner runs"),
    ("template.py ansible-runner", "ansible-runner runs", "ansible-runner runs"),
    ("template.py ansible-playbook", "ansible-playbook runs", "ansible-playbook runs"),
    ("ansible_zygote/supervise.sh", "zygote server", "zygote server"),
    ("ansible_zygote/prewarm.py", "zygote server", "zygote server"),
    # The server reaps the templates it retires (every 200 runs): their runs' CPU moves here.
    ("-m ansible_zygote", "zygote server", "retired templates' runs"),
    ("training_companion", "companion", "companion"),
    ("ansible-runner", "runtime's children", "runtime's children"),
    ("ansible-playbook", "runtime's children", "runtime's children"),
    ("ansible-operator", "runtime (Go)", "runtime's children"),
]


def process_part(cmdline: str) -> tuple[str, str]:
    """(part of a process's own CPU, part of its reaped children's) for the operator tree's
    breakdown, from the process's command line."""
    for marker, own, reaped in _PARTS:
        if marker in cmdline:
            return own, reaped
    return "other", "other"


class ProcessSampler:
    """CPU seconds and peak RSS of an operator and every process below it (ansible-runner,
    ansible-playbook, the job-metrics server, the Ansible zygote's server and its templates,
    which fork and reap the runs themselves), found by parent links: ansible-runner starts
    ansible-playbook in a session of its own, and so does the zygote each template and run, so a
    process group would miss them.

    CPU: the sum over the live tree of user+system time plus the children each member has
    already waited for (``cutime``/``cstime``), which is where exited reconciles end up.
    RSS: sampled every ``interval``; the peak is the largest sum seen.
    """

    def __init__(self, root_pid: int, interval: float = 0.2):
        self.root_pid = root_pid
        self.interval = interval
        self.tick = os.sysconf("SC_CLK_TCK")
        self.peak_rss = 0
        self.peak_pss = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def _stats() -> dict[int, list[str]]:
        out = {}
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open(f"/proc/{pid}/stat") as f:
                    stat = f.read()
            except OSError:
                continue
            # Fields after "(comm)": state, ppid, pgrp, ..., utime(11), stime, cutime, cstime.
            out[int(pid)] = stat[stat.rindex(")") + 2 :].split()
        return out

    def _tree(self) -> dict[int, list[str]]:
        stats = self._stats()
        members = {self.root_pid} if self.root_pid in stats else set()
        grew = True
        while grew:
            grew = False
            for pid, f in stats.items():
                if pid not in members and int(f[1]) in members:
                    members.add(pid)
                    grew = True
        return {pid: stats[pid] for pid in members}

    def cpu_seconds(self) -> float:
        ticks = sum(sum(int(x) for x in f[11:15]) for f in self._tree().values())
        return ticks / self.tick

    def commands(self) -> dict[int, list[str]]:
        """The command line of each process of the tree."""
        return {pid: _cmdline(pid).split() for pid in self._tree()}

    def cpu_by_part(self) -> dict[str, float]:
        """The tree's CPU seconds by part (:func:`process_part`): a process's own time goes to
        its part, the time of the children it has reaped to ``part_of_reaped`` (the runtime
        reaps the ansible-runner it starts; a zygote template, the runs it forked)."""
        parts: dict[str, float] = {}
        for pid, f in self._tree().items():
            own, reaped = process_part(_cmdline(pid))
            parts[own] = parts.get(own, 0.0) + (int(f[11]) + int(f[12])) / self.tick
            parts[reaped] = parts.get(reaped, 0.0) + (int(f[13]) + int(f[14])) / self.tick
        return parts

    def memory_bytes(self) -> tuple[int, int]:
        """(RSS, PSS) summed over the tree. RSS counts pages a forked Ansible worker shares with
        its parent once per process; PSS divides shared pages among their sharers, so the PSS
        sum is what the tree really occupies (what a container memory limit sees, roughly)."""
        rss = pss = 0
        for pid in self._tree():
            try:
                with open(f"/proc/{pid}/smaps_rollup") as f:
                    for line in f:
                        if line.startswith("Rss:"):
                            rss += int(line.split()[1]) * 1024
                        elif line.startswith("Pss:"):
                            pss += int(line.split()[1]) * 1024
            except OSError:
                continue
        return rss, pss

    def _run(self):
        while not self._stop.is_set():
            rss, pss = self.memory_bytes()
            self.peak_rss = max(self.peak_rss, rss)
            self.peak_pss = max(self.peak_pss, pss)
            time.sleep(self.interval)

    def start(self) -> ProcessSampler:
        self._thread.start()
        return self

    def reset_peak(self) -> None:
        self.peak_rss = 0
        self.peak_pss = 0

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
