"""The companion against a kubeconfig whose user is an ``exec`` plugin, as EKS, GKE and AKS
kubeconfigs are: the plugin here asks the API server for a ServiceAccount token (TokenRequest,
``kubectl create token``) and prints it as an ExecCredential. The ServiceAccount holds the
operator's own rules (config/rbac/role.yaml), in the test's namespace only.

The companion runs as ``make run`` starts it, with that kubeconfig and WATCH_NAMESPACE set to
the test's namespace; its job is one the operator ignores (labelled finished) whose pod is made
by the test, so no operator is needed. The operator's own companion (under hack/test.sh) may
write the same annotation, so the evidence is this companion's log (its pod list, no refused
request, no failed write) together with the wake annotation: a stale one put right at its first
list, a fresh one after a pod change."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from kube import (
    KUBECTL,
    ROOT,
    companion_pattern,
    get,
    kubeconfig,
    kubectl,
    namespace_fixture,
    replica,
    wait_for,
)
from test_lifecycle import unique
from training_wake.signature import ANNOTATION, pod_key, pod_state, signature

pytestmark = pytest.mark.cluster

# Its own name each run: a namespace deleted by an earlier run may still be terminating.
NS = unique("ato-companion-auth")
SA = "companion-auth"
WAKE_LABEL = "training.kubeflow.org/operator-name"
FINISHED = "training.ato.dev/finished"

namespace = namespace_fixture(NS)

PLUGIN = """#!{python}
# An exec credential plugin: a ServiceAccount token by TokenRequest, as an ExecCredential.
import datetime, json, os, subprocess

with open({calls!r}, "a") as f:
    f.write(os.environ.get("KUBERNETES_EXEC_INFO", "") + "\\n")
token = subprocess.run(
    [{kubectl!r}, "--kubeconfig", {admin!r}, "create", "token", {sa!r}, "-n", {ns!r}, "--duration=10m"],
    check=True, capture_output=True, text=True,
).stdout.strip()
expires = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(minutes=10)
status = {{"token": token, "expirationTimestamp": expires.strftime("%Y-%m-%dT%H:%M:%SZ")}}
print(json.dumps({{"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", "status": status}}))
"""


def apply(obj: dict) -> None:
    kubectl("apply", "-f", "-", stdin=json.dumps(obj))


def service_account() -> None:
    """The ServiceAccount with the operator's rules, bound in the test's namespace only."""
    rules = yaml.safe_load((ROOT / "config" / "rbac" / "role.yaml").read_text())["rules"]
    meta = {"name": SA, "namespace": NS}
    apply({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta})
    apply({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta, "rules": rules})
    apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": meta,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": SA},
            "subjects": [{"kind": "ServiceAccount", "name": SA, "namespace": NS}],
        }
    )


def exec_kubeconfig(tmp_path: Path, user: dict | None) -> Path:
    """The test cluster's server and CA with ``user`` (None: no credentials at all)."""
    admin = json.loads(kubectl("config", "view", "--raw", "--minify", "-o", "json").stdout)
    cluster = dict(admin["clusters"][0]["cluster"])
    ca = cluster.get("certificate-authority")
    if ca and not os.path.isabs(ca):
        cluster["certificate-authority"] = str(Path(kubeconfig()).resolve().parent / ca)
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "test", "cluster": cluster}],
        "contexts": [{"name": "companion", "context": {"cluster": "test", "user": "companion"}}],
        "users": [{"name": "companion", "user": user}] if user else [],
        "current-context": "companion",
    }
    path = tmp_path / ("exec-kubeconfig" if user else "anonymous-kubeconfig")
    path.write_text(yaml.safe_dump(config))
    return path


def exec_user(tmp_path: Path) -> dict:
    script = tmp_path / "token-plugin"
    script.write_text(
        PLUGIN.format(
            python=sys.executable,
            calls=str(tmp_path / "plugin-calls"),
            kubectl=KUBECTL,
            admin=str(Path(kubeconfig()).resolve()),
            sa=SA,
            ns=NS,
        )
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": str(script),
            "interactiveMode": "Never",
        }
    }


def job_with_a_pod(name: str) -> dict:
    """A TFJob the operator ignores (labelled finished) whose annotation is stale, and a pod
    it controls, as the operator would have made it, that no scheduler or kubelet touches."""
    job = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {
            "name": name,
            "namespace": NS,
            "labels": {FINISHED: "true"},
            "annotations": {ANNOTATION: "stale"},
        },
        "spec": {"tfReplicaSpecs": {"Worker": replica()}},
    }
    apply(job)
    uid = get("tfjob", "-n", NS, name)["metadata"]["uid"]
    owner = {"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "name": name, "uid": uid, "controller": True}
    apply(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{name}-worker-0",
                "namespace": NS,
                "labels": {WAKE_LABEL: "ansible-training-operator", "training.kubeflow.org/job-name": name},
                "ownerReferences": [owner],
            },
            "spec": {
                "schedulerName": "nobody",
                # Not "default", which a fresh namespace gets only after a moment.
                "serviceAccountName": SA,
                "automountServiceAccountToken": False,
                "containers": [{"name": "tensorflow", "image": "docker.io/library/busybox:1.36"}],
            },
        }
    )
    return get("pod", "-n", NS, f"{name}-worker-0")


def annotation(name: str) -> str | None:
    return (get("tfjob", "-n", NS, name)["metadata"].get("annotations") or {}).get(ANNOTATION)


def signature_of(pod: dict) -> str:
    return signature({pod_key(pod): pod_state(pod)})


@pytest.fixture
def companion(tmp_path):
    """Start the companion with the exec kubeconfig; yields its log file, stops it after."""
    processes: list[subprocess.Popen] = []

    def start(config: Path) -> Path:
        log = tmp_path / "companion.log"
        env = {
            k: v for k, v in os.environ.items() if k not in ("K8S_AUTH_KUBECONFIG", "KUBERNETES_SERVICE_HOST")
        }
        env.update(KUBECONFIG=str(config), WATCH_NAMESPACE=NS, PYTHONPATH=str(ROOT / "lib"))
        with log.open("wb") as out:
            processes.append(
                subprocess.Popen(
                    [sys.executable, "-m", "training_companion", "--bind", "127.0.0.1:0"],
                    env=env,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                )
            )
        return log

    yield start
    for process in processes:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def failures(log: Path) -> list[str]:
    """Refused requests, failed writes, a failed plugin, crashes. (A watch that restarts on a
    429 or 503 is fine: a CRD's storage answers 429 at its first use.)"""
    bad = (": 401 ", ": 403 ", "pod watch failed", "could not wake", "Traceback", "exec:")
    return [line for line in log.read_text().splitlines() if any(b in line for b in bad)]


@pytest.fixture
def operators_companion_paused():
    """The running operator's companion (hack/run.sh's) watches every namespace and would write
    the same annotations: frozen for the test, so only the exec-authenticated one can."""
    pattern = ["-f", "--", companion_pattern()]
    subprocess.run(["pkill", "-STOP", *pattern], check=False)
    yield
    subprocess.run(["pkill", "-CONT", *pattern], check=False)


def test_the_companion_wakes_jobs_as_an_exec_plugin_user(tmp_path, companion, operators_companion_paused):
    from training_companion.kube import KubeClient
    from training_kube.client import ApiError

    service_account()
    # The counter-check: without the plugin's token the API server refuses the companion's list.
    with pytest.raises(ApiError) as refused:
        KubeClient(str(exec_kubeconfig(tmp_path, None))).request("GET", f"/api/v1/namespaces/{NS}/pods")
    assert refused.value.status in (401, 403)

    name = unique("auth")
    pod = job_with_a_pod(name)
    log = companion(exec_kubeconfig(tmp_path, exec_user(tmp_path)))
    # Its first list finds the job's annotation behind its pod and writes it.
    wait_for(lambda: annotation(name) == signature_of(pod), what="the pod signature on the job")
    assert f"listed 1 pod(s) with {WAKE_LABEL} in {NS}" in log.read_text()
    assert "waking 1 job(s) whose pods changed unwatched" in log.read_text()
    assert (tmp_path / "plugin-calls").read_text().strip(), "the exec plugin was run"

    # A pod change seen by its watch wakes the job again.
    unschedulable = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
    kubectl(
        "patch", "pod", pod["metadata"]["name"], "-n", NS, "--subresource=status", "--type=merge",
        "-p", json.dumps({"status": {"conditions": [unschedulable]}}),
    )  # fmt: skip
    changed = get("pod", "-n", NS, pod["metadata"]["name"])
    assert signature_of(changed) != signature_of(pod)
    wait_for(lambda: annotation(name) == signature_of(changed), what="the new pod signature")
    time.sleep(2)  # a write that failed would be logged within a flush or two
    assert not failures(log), log.read_text()
