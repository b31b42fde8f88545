"""The Kueue scenario (issue #25): a burst of TFJobs waits in a held ClusterQueue, then Kueue
admits them all at once. Two latencies that belong to the operator and to Kueue:

- Kueue's unsuspend (the job's ``runPolicy.suspend`` turns false) → the job's first pod: the
  operator's reaction to an admission. A waiting job is parked (``training.ato.dev/idle``), so
  this is also how fast a parked job comes back;
- the job's ``Succeeded`` → its Workload's ``Finished``: Kueue's reaction to the operator's status.

Kueue runs as the tests run it (hack/kueue.sh, the queues of config/kueue/queues.yaml).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import threading
from pathlib import Path
from typing import Any

import jobs as joblib
from kubernetes import client, watch

ROOT = Path(__file__).resolve().parents[2]
QUEUE = "training"
KUEUE = ("kueue.x-k8s.io", "v1beta2")


def kueue(command: str) -> None:
    subprocess.run([str(ROOT / "hack" / "kueue.sh"), command], check=True, env=os.environ.copy())


def hold(bench, stop_policy: str) -> None:
    patch = json.dumps({"spec": {"stopPolicy": stop_policy}})
    bench.kubectl("patch", "clusterqueue", QUEUE, "--type=merge", "-p", patch)


def queued_job(name: str, namespace: str, replicas: int, run_for: str) -> dict[str, Any]:
    """A bench TFJob in the LocalQueue; small CPU requests, so that Kueue counts its pods."""
    body = joblib.job("TFJob", name, namespace, replicas, run_for)
    body["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = QUEUE
    for spec in body["spec"]["tfReplicaSpecs"].values():
        for container in spec["template"]["spec"]["containers"]:
            container["resources"] = {"requests": {"cpu": "10m", "memory": "16Mi"}}
    return body


class Admissions:
    """When each job was unsuspended, and when its Workload finished (monotonic seconds)."""

    def __init__(self, bench, namespace: str):
        self.unsuspended: dict[str, float] = {}
        self.workload_finished: dict[str, float] = {}
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.watches = [watch.Watch(), watch.Watch()]
        lister = client.CustomObjectsApi().list_namespaced_custom_object
        streams = [
            (self._on_job, ("kubeflow.org", "v1", namespace, "tfjobs")),
            (self._on_workload, (*KUEUE, namespace, "workloads")),
        ]
        for w, (handler, args) in zip(self.watches, streams, strict=True):
            target = (self.stopped, w, handler, lister, args)
            threading.Thread(target=bench.follow, args=target, daemon=True).start()

    def _on_job(self, _type: str, job: dict, now: float) -> None:
        if ((job.get("spec") or {}).get("runPolicy") or {}).get("suspend") is False:
            with self.lock:
                self.unsuspended.setdefault(job["metadata"]["name"], now)

    def _on_workload(self, _type: str, workload: dict, now: float) -> None:
        owners = workload["metadata"].get("ownerReferences") or []
        job = next((o["name"] for o in owners if o.get("kind") == "TFJob"), None)
        conditions = (workload.get("status") or {}).get("conditions") or []
        if job and any(c["type"] == "Finished" and c["status"] == "True" for c in conditions):
            with self.lock:
                self.workload_finished.setdefault(job, now)

    def stop(self) -> None:
        self.stopped.set()
        for w in self.watches:
            w.stop()


def _p50_max(values: list[float]) -> tuple[float | None, float | None]:
    if not values:
        return None, None
    return round(statistics.median(values), 2), round(max(values), 2)


def admission(bench, op, n: int, index: int) -> dict[str, Any]:
    """n jobs wait in the held queue, parked; the queue is released; every job runs and ends."""
    ns = f"bench-kueue-{bench.RUN_ID}-{index}"
    bench.kubectl("create", "namespace", ns)
    bench.kubectl("apply", "-n", ns, "-f", str(ROOT / "config" / "kueue" / "queues.yaml"))
    hold(bench, "Hold")
    tracker, admissions = bench.Tracker(ns, {"TFJob"}), Admissions(bench, ns)
    try:
        for i in range(n):
            body = queued_job(f"q{i}", ns, bench.REPLICAS, bench.RUN_FOR)
            bench.kubectl("create", "-f", "-", stdin=json.dumps(body))
        bench.scale.wait(lambda: _parked(bench, ns) >= n, 300, 0.5)
        hold(bench, "None")
        bench.scale.wait(lambda: len(admissions.workload_finished) >= n, 300, 0.5)
    finally:
        tracker.stop()
        admissions.stop()
    with tracker.lock, admissions.lock:
        first_pod = {job: min(pods.values()) for job, pods in tracker.pod_added.items()}
        to_pod = [first_pod[j] - t for j, t in admissions.unsuspended.items() if j in first_pod]
        done = {job: t for job, (t, _) in tracker.job_done.items()}
        to_finished = [t - done[j] for j, t in admissions.workload_finished.items() if j in done]
    result = {
        "scenario": "kueue",
        "target": op.name,
        "jobs": n,
        "admitted": len(admissions.unsuspended),
        "finished": len(admissions.workload_finished),
        "unsuspend_to_first_pod": _p50_max(to_pod),
        "succeeded_to_workload_finished": _p50_max(to_finished),
    }
    bench.kubectl("delete", "namespace", ns, "--wait=true", "--timeout=600s", check=False)
    bench.log(f"kueue x{n}: {result}")
    return result


def _parked(bench, namespace: str) -> int:
    """Jobs that wait suspended and parked (the operator's idle label)."""
    out = bench.kubectl("get", "tfjobs", "-n", namespace, "-l", "training.ato.dev/idle", "-o", "name")
    return len(out.stdout.split())
