"""The benchmark's arithmetic: Prometheus parsing, histogram quantiles, which API writes count."""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "hack" / "bench"))
import measure

TEXT = """
# HELP ansible_operator_reconciles How long in seconds a reconcile takes.
# TYPE ansible_operator_reconciles histogram
ansible_operator_reconciles_bucket{GVK="kubeflow.org/v1, Kind=TFJob",le="1"} 2
ansible_operator_reconciles_bucket{GVK="kubeflow.org/v1, Kind=TFJob",le="2.5"} 8
ansible_operator_reconciles_bucket{GVK="kubeflow.org/v1, Kind=TFJob",le="+Inf"} 10
ansible_operator_reconciles_sum{GVK="kubeflow.org/v1, Kind=TFJob"} 19.5
ansible_operator_reconciles_count{GVK="kubeflow.org/v1, Kind=TFJob"} 10
apiserver_request_total{code="201",resource="pods",subresource="",verb="POST"} 5
apiserver_request_total{code="201",resource="pods",subresource="binding",verb="POST"} 5
apiserver_request_total{code="200",resource="pods",subresource="status",verb="PATCH"} 9
apiserver_request_total{code="200",resource="tfjobs",subresource="status",verb="PATCH"} 3
apiserver_request_total{code="201",resource="tfjobs",subresource="",verb="POST"} 1
apiserver_request_total{code="201",resource="events",subresource="",verb="POST"} 7
apiserver_request_total{code="200",resource="pods",subresource="",verb="GET"} 40
"""


def test_parse_keeps_labels_with_commas_and_spaces():
    samples = measure.parse(TEXT)
    assert ("ansible_operator_reconciles_count", {"GVK": "kubeflow.org/v1, Kind=TFJob"}, 10.0) in samples


def test_histogram_and_quantile_interpolate_like_prometheus():
    hist = measure.histogram(measure.parse(TEXT), "ansible_operator_reconciles", {})
    assert hist["count"] == 10 and hist["sum"] == 19.5
    # rank 5 of 10 lies in (1, 2.5] holding ranks 3-8: 1 + 1.5 * (5-2)/(8-2)
    assert measure.histogram_quantile(0.5, hist) == pytest.approx(1.75)
    assert measure.histogram_quantile(0.1, hist) == pytest.approx(0.5)
    # beyond the last finite bucket Prometheus answers that bucket's bound
    assert measure.histogram_quantile(0.99, hist) == 2.5
    assert measure.histogram_quantile(0.5, {"buckets": {}, "count": 0, "sum": 0}) is None


def test_histogram_delta():
    before = {"buckets": {1.0: 1, math.inf: 2}, "count": 2, "sum": 3.0}
    after = {"buckets": {1.0: 4, math.inf: 6}, "count": 6, "sum": 9.0}
    assert measure.histogram_delta(after, before) == {
        "buckets": {1.0: 3, math.inf: 4},
        "count": 4,
        "sum": 6.0,
    }


def test_operator_writes_leave_out_kubelet_scheduler_events_and_the_benchmarks_creates():
    writes = measure.api_writes(measure.parse(TEXT))
    assert "GET pods" not in writes
    assert measure.operator_writes(writes) == {"POST pods": 5, "PATCH tfjobs/status": 3}


@pytest.mark.parametrize(
    ("values", "p50", "p95", "p99"),
    [
        ([], None, None, None),
        ([3.0], 3.0, 3.0, 3.0),
        ([1.0, 2.0, 3.0, 4.0], 2.0, 4.0, 4.0),
        ([float(i) for i in range(1, 101)], 50.0, 95.0, 99.0),
    ],
)
def test_quantiles_nearest_rank(values, p50, p95, p99):
    q = measure.quantiles(values)
    assert (q["p50"], q["p95"], q["p99"]) == (p50, p95, p99)


def test_process_sampler_counts_cpu_of_exited_children():
    sampler = measure.ProcessSampler(os.getpid())
    before = sampler.cpu_seconds()
    # A child that burns CPU and is waited for: its time must show up in our cutime.
    pid = os.fork()
    if pid == 0:
        start = os.times().user
        while os.times().user - start < 0.3:
            pass
        os._exit(0)
    os.waitpid(pid, 0)
    assert sampler.cpu_seconds() - before >= 0.25
    rss, pss = sampler.memory_bytes()
    assert rss >= pss > 0


def test_process_sampler_counts_a_long_lived_servers_reaped_children():
    """The Ansible zygote's shape: a server (here: a child in a session of its own, like a
    template) forks the runs and reaps them itself, and stays alive. The runs' CPU is in the
    server's cutime, which the tree walk must count while the server lives."""
    sampler = measure.ProcessSampler(os.getpid())
    before = sampler.cpu_seconds()
    ready_r, ready_w = os.pipe()
    stop_r, stop_w = os.pipe()
    server = os.fork()
    if server == 0:
        os.setsid()
        run = os.fork()
        if run == 0:
            start = os.times().user
            while os.times().user - start < 0.3:
                pass
            os._exit(0)
        os.waitpid(run, 0)
        os.write(ready_w, b"x")
        os.read(stop_r, 1)
        os._exit(0)
    try:
        os.read(ready_r, 1)
        assert sampler.cpu_seconds() - before >= 0.25
    finally:
        os.write(stop_w, b"x")
        os.waitpid(server, 0)
        for fd in (ready_r, ready_w, stop_r, stop_w):
            os.close(fd)


@pytest.mark.parametrize(
    ("cmdline", "own", "reaped"),
    [
        ("/repo/bin/ansible-operator run --watches-file w.yaml", "runtime (Go)", "runtime's children"),
        (
            "python3 -S /repo/lib/ansible_zygote/bin/ansible-runner run /tmp/x",
            "runtime's children",
            "runtime's children",
        ),
        (
            "python3 -S /repo/lib/ansible_zygote/bin/ansible-playbook -i h p.yml",
            "ansible-runner runs",
            "ansible-runner runs",
        ),
        (
            "python3 /repo/lib/ansible_zygote/template.py ansible-runner /v/bin/ansible-runner 5",
            "ansible-runner runs",
            "ansible-runner runs",
        ),
        (
            "python3 /repo/lib/ansible_zygote/template.py ansible-playbook /v/bin/ansible-playbook 6",
            "ansible-playbook runs",
            "ansible-playbook runs",
        ),
        (
            "python3 -m ansible_zygote --socket /tmp/s.sock --exit-with-pid 1",
            "zygote server",
            "retired templates' runs",
        ),
        ("python3 /repo/lib/ansible_zygote/prewarm.py /tmp/s.sock", "zygote server", "zygote server"),
        ("/bin/sh /repo/lib/ansible_zygote/supervise.sh 1 /tmp/s.sock", "zygote server", "zygote server"),
        ("python3 -m training_companion --bind 127.0.0.1:8686", "companion", "companion"),
        (
            "/repo/.venv/bin/python3 /repo/.venv/bin/ansible-runner run /tmp/x",
            "runtime's children",
            "runtime's children",
        ),
        ("bash /repo/hack/run.sh", "other", "other"),
    ],
)
def test_process_part_names_each_member_of_the_operator_tree(cmdline, own, reaped):
    assert measure.process_part(cmdline) == (own, reaped)


def test_cpu_by_part_adds_up_to_the_trees_cpu():
    sampler = measure.ProcessSampler(os.getpid())
    total, parts = sampler.cpu_seconds(), sampler.cpu_by_part()
    assert sum(parts.values()) == pytest.approx(total, abs=0.05)
