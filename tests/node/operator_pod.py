"""The operator's own pod on the real node, however it was installed: `make deploy`'s path
(tests/node/test_deployment.py, namespace ansible-training-operator-system) or OLM's
(tests/node/test_olm_real_node.py, namespace operators). Both run the Deployment of config/manager,
so its pod's labels, containers, zygote socket and log lines are the same."""

from __future__ import annotations

import json
from pathlib import Path

from kube import get, kubectl

ZYGOTE_SOCKET = "/tmp/ansible-zygote/server.sock"
# The runtime's line for a pass's first task (hack/test.sh zygote_served counts the same).
PASS_START = "Read the objects the job owns"
KUBEFLOW_CONDITIONS = {"Created", "Running", "Restarting", "Succeeded", "Failed", "Suspended"}


def ready(pod: dict) -> bool:
    conditions = pod.get("status", {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


class OperatorPod:
    """The controller-manager pods of the operator's Deployment in ``namespace``."""

    def __init__(self, namespace: str):
        self.namespace = namespace

    def pods(self) -> list[dict]:
        return get("pods", "-n", self.namespace, "-l", "control-plane=controller-manager")["items"]

    def the_pod(self) -> dict:
        pods = [p for p in self.pods() if not p["metadata"].get("deletionTimestamp")]
        assert len(pods) == 1, [p["metadata"]["name"] for p in pods]
        return pods[0]

    def in_manager(self, *command: str) -> str:
        pod = self.the_pod()["metadata"]["name"]
        return kubectl("exec", "-n", self.namespace, pod, "-c", "manager", "--", *command).stdout

    def zygote_stats(self) -> dict:
        out = self.in_manager(
            "sh",
            "-c",
            f"PYTHONPATH=$HOME/lib exec python3 -m ansible_zygote.server --socket {ZYGOTE_SOCKET} --stats",
        )
        return json.loads(out)

    def passes(self) -> int:
        """The passes in the manager's log (its current container's)."""
        pod = self.the_pod()["metadata"]["name"]
        log = kubectl("logs", "-n", self.namespace, pod, "-c", "manager").stdout
        return sum(
            1 for line in log.splitlines() if '"msg":"[playbook task start]"' in line and PASS_START in line
        )

    def assert_the_zygote_served_its_passes(self) -> None:
        stats, passes = self.zygote_stats(), self.passes()
        assert passes, "no pass in the manager's log"
        # As hack/test.sh zygote_served: a pass whose template still warmed runs the real programs.
        assert min(stats["served"].values()) * 2 >= passes, (stats, passes)

    def manager_status(self) -> dict:
        statuses = self.the_pod()["status"]["containerStatuses"]
        return next(s for s in statuses if s["name"] == "manager")

    def container_cgroup(self, controller: str) -> Path:
        """The manager container's cgroup on the node (the node's cgroups are the machine's,
        under ato-real-node: hack/real-node.sh)."""
        container_id = self.manager_status()["containerID"].split("://", 1)[1]
        found = list(
            Path(f"/sys/fs/cgroup/{controller}/ato-real-node").glob(f"kubepods/*/pod*/{container_id}")
        )
        assert len(found) == 1, found
        return found[0]


def owned_pods(namespace: str, owner: str) -> list[dict]:
    """The pods ``owner`` owns directly, whatever labels its kind gives them (Caffe2Job has
    caffe2-operator's)."""
    return [
        pod
        for pod in get("pods", "-n", namespace)["items"]
        if any(ref["name"] == owner for ref in pod["metadata"].get("ownerReferences") or [])
    ]


def uids(pods: list[dict]) -> dict[str, str]:
    return {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods}
