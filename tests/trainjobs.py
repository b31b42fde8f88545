"""TrainJobs on a real JobSet, for the cluster tests that make them (``tests/trainer``,
``tests/queues``): create one, read it and its JobSet, its pods (JobSet's labels), end them."""

from __future__ import annotations

import json

from kube import finish_pod, get, kubectl, wait_for

API = "trainer.kubeflow.org/v1alpha1"


def create(
    namespace: str,
    name: str,
    runtime: str,
    trainer: dict | None = None,
    *,
    metadata_labels: dict | None = None,
    **spec,
) -> None:
    body = {"runtimeRef": {"name": runtime}, **spec}
    if trainer is not None:
        body["trainer"] = trainer
    metadata = {
        "name": name,
        "namespace": namespace,
        **({"labels": metadata_labels} if metadata_labels else {}),
    }
    manifest = {"apiVersion": API, "kind": "TrainJob", "metadata": metadata, "spec": body}
    kubectl("create", "-f", "-", stdin=json.dumps(manifest))


def trainjob(namespace: str, name: str) -> dict:
    return get("trainjobs.trainer.kubeflow.org", "-n", namespace, name)


def jobset(namespace: str, name: str, *flags: str) -> dict | None:
    found = kubectl(
        "get", "jobsets.jobset.x-k8s.io", "-n", namespace, name, "-o", "json", *flags, check=False
    )
    return json.loads(found.stdout) if found.returncode == 0 else None


def pods(namespace: str, name: str, job: str = "") -> list[dict]:
    """The TrainJob's pods not being deleted (of one replicated job if ``job``)."""
    selector = f"jobset.sigs.k8s.io/jobset-name={name}"
    if job:
        selector += f",jobset.sigs.k8s.io/replicatedjob-name={job}"
    items = get("pods", "-n", namespace, "-l", selector)["items"]
    return [p for p in items if not p["metadata"].get("deletionTimestamp")]


def running(namespace: str, name: str, count: int, job: str = "") -> list[dict]:
    def all_running():
        found = pods(namespace, name, job)
        return (
            found
            if len(found) == count and all(p["status"].get("phase") == "Running" for p in found)
            else None
        )

    return wait_for(all_running, what=f"{count} running pod(s) of {name} {job}")


def finish(namespace: str, name: str, job: str = "") -> None:
    for pod in pods(namespace, name, job):
        finish_pod(namespace, pod["metadata"]["name"])
