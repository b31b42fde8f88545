"""The operator as users install it, running on the real node (issue 38 §2): the image assembled
here, the Deployment of config/default through `make deploy`'s path with the test overlay
config/testing/real-node, its ServiceAccount and ClusterRole only. hack/real-node-operator.sh
deploys it before these tests (`hack/test.sh real-node`, after the real node's own tests) and no
other operator runs meanwhile, so every pass these tests see is the container's."""

from __future__ import annotations

import json
import ssl
import subprocess
import time
import urllib.error
import urllib.request
import uuid

import pytest
import yaml
from kube import (
    REAL_NODE,
    ROOT,
    finish_pod,
    finish_the_unfinished,
    get,
    kubectl,
    namespace_fixture,
    replica,
    tfjob,
    wait_for,
)
from operator_pod import KUBEFLOW_CONDITIONS, OperatorPod, ready, uids
from operator_pod import owned_pods as pods_owned_by

pytestmark = pytest.mark.real_node_deployment

OPERATOR_NS = "ansible-training-operator-system"
DEPLOYMENT = "ansible-training-operator-controller-manager"
SERVICE_ACCOUNT = "ansible-training-operator-controller-manager"
METRICS_READER = "ansible-training-operator-metrics-reader"
NS = "ato-deployment"
OPERATOR = OperatorPod(OPERATOR_NS)

# One sample of each of the nine kinds (config/samples), as molecule's cases finish them.
SAMPLES = [
    "tfjob_dist.yaml",
    "mxjob_linear_dist.yaml",
    "pytorchjob_simple.yaml",
    "xgboostjob_iris.yaml",
    "jaxjob_simple.yaml",
    "kubeflow_paddlejob_simple_cpu.yaml",
    "mpijob_tensorflow_mnist.yaml",
    "paddlejob_wide_and_deep.yaml",
    "caffe2job_resnet50_redis.yaml",
]

namespace = namespace_fixture(NS)


operator_pods, the_operator_pod, in_manager = OPERATOR.pods, OPERATOR.the_pod, OPERATOR.in_manager
manager_status, container_cgroup = OPERATOR.manager_status, OPERATOR.container_cgroup


def sample_job(sample: str) -> tuple[str, str, str]:
    """(resource, name, apiVersion) of a sample."""
    doc = yaml.safe_load((ROOT / "config/samples" / sample).read_text())
    group = doc["apiVersion"].split("/")[0]
    return f"{doc['kind'].lower()}.{group}", doc["metadata"]["name"], doc["apiVersion"]


def true_conditions(resource: str, name: str) -> set[str]:
    found = get(resource, "-n", NS, name).get("status", {}).get("conditions") or []
    return {c["type"] for c in found if c.get("status") == "True"}


def all_conditions(resource: str, name: str) -> set[str]:
    return {c["type"] for c in get(resource, "-n", NS, name).get("status", {}).get("conditions") or []}


def owned_pods(name: str) -> list[dict]:
    return pods_owned_by(NS, name)


def succeeded_after_finishing_its_pods(resource: str, name: str, nodes: dict[str, str]) -> bool:
    """Ends every pod of the job (the KWOK exit-code annotation), noting the node each runs on in
    ``nodes`` (a clean-pod policy deletes them once the job succeeded); a kind whose pods come in
    steps (the MPI launcher, paddle-operator's workers) gets the rest on a later poll."""
    if "Succeeded" in true_conditions(resource, name):
        return True
    pods = owned_pods(name)
    nodes.update((pod["metadata"]["name"], pod["spec"].get("nodeName", "")) for pod in pods)
    finish_the_unfinished(pods)
    return False


def test_the_operator_pod_becomes_ready_on_the_real_node_through_its_probes():
    deployment = get("deployment", "-n", OPERATOR_NS, DEPLOYMENT)
    containers = {c["name"]: c for c in deployment["spec"]["template"]["spec"]["containers"]}
    # The probes of config/manager, unchanged by the overlay: the kubelet dials the pod.
    for name in ("manager", "companion"):
        assert "httpGet" in containers[name]["readinessProbe"], name
        assert "httpGet" in containers[name]["livenessProbe"], name
    pod = wait_for(
        lambda: next((p for p in operator_pods() if ready(p)), None), what="the operator pod Ready"
    )
    assert pod["spec"]["nodeName"] == REAL_NODE
    assert pod["spec"]["serviceAccountName"] == SERVICE_ACCOUNT
    for status in pod["status"]["containerStatuses"]:
        assert status["ready"], status["name"]
        assert status["containerID"].startswith("containerd://")
        assert status["imageID"], status["name"]


def test_samples_of_all_nine_kinds_succeed_with_their_pods_on_kwok_nodes():
    jobs = []
    for sample in SAMPLES:
        kubectl("apply", "-n", NS, "-f", str(ROOT / "config/samples" / sample))
        jobs.append(sample_job(sample))
    for resource, name, _ in jobs:
        nodes: dict[str, str] = {}
        wait_for(
            lambda r=resource, n=name, seen=nodes: succeeded_after_finishing_its_pods(r, n, seen),
            what=f"{name} Succeeded",
        )
        assert all_conditions(resource, name) <= KUBEFLOW_CONDITIONS, (name, all_conditions(resource, name))
        assert nodes, f"{name}: no pod seen"
        assert all(node.startswith("kwok-") for node in nodes.values()), (name, nodes)


def memory_limit(container: str) -> int:
    deployment = get("deployment", "-n", OPERATOR_NS, DEPLOYMENT)
    containers = {c["name"]: c for c in deployment["spec"]["template"]["spec"]["containers"]}
    limit = containers[container]["resources"]["limits"]["memory"]
    units = {"Mi": 2**20, "Gi": 2**30}
    return int(limit[:-2]) * units[limit[-2:]]


def test_the_burst_across_every_kind_stayed_inside_the_memory_limit():
    """The samples test above is the burst: nine kinds at once, each with its own workers
    (--max-concurrent-reconciles per kind). The container's peak (cgroup v1 here: the kernel's
    max_usage_in_bytes, page cache included, which is what the limit holds) stays under the
    Deployment's limit, and the kernel never had to reclaim at the limit (failcnt)."""
    cgroup = container_cgroup("memory")
    peak = int((cgroup / "memory.max_usage_in_bytes").read_text())
    limit = memory_limit("manager")
    print(f"manager container memory peak {peak / 2**20:.0f} MiB of {limit / 2**20:.0f} MiB")
    assert int((cgroup / "memory.limit_in_bytes").read_text()) == limit
    assert manager_status()["restartCount"] == 0, manager_status().get("lastState")
    assert int((cgroup / "memory.failcnt").read_text()) == 0
    assert peak < limit


def test_the_zygote_serves_the_passes_inside_the_container():
    OPERATOR.assert_the_zygote_served_its_passes()


def token_of(service_account: str) -> str:
    kubectl("create", "serviceaccount", "-n", NS, service_account, check=False)
    return kubectl("create", "token", "-n", NS, service_account).stdout.strip()


def get_metrics(token: str | None) -> int:
    """The status of GET /metrics on the pod's HTTPS port, reached over the node's bridge. The
    certificate is the runtime's self-signed one, made in memory: nothing to verify it against."""
    pod = the_operator_pod()
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    request = urllib.request.Request(f"https://{pod['status']['podIP']}:8443/metrics")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, context=context, timeout=30) as response:
            body = response.read().decode()
            assert "controller_runtime_reconcile_total" in body
            return response.status
    except urllib.error.HTTPError as err:
        return err.code


def test_metrics_answer_an_allowed_service_account_and_refuse_one_without_the_role():
    scraper = f"scraper-{uuid.uuid4().hex[:5]}"
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": f"ato-deployment-{scraper}"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": METRICS_READER},
        "subjects": [{"kind": "ServiceAccount", "name": scraper, "namespace": NS}],
    }
    kubectl("apply", "-f", "-", stdin=json.dumps(binding))
    try:
        allowed, stranger = token_of(scraper), token_of("stranger")
        # The binding reaches the authorizer's cache a moment after it was created.
        wait_for(lambda: get_metrics(allowed) == 200, what="/metrics answering the allowed token")
        assert get_metrics(stranger) == 403
        assert get_metrics(None) == 401
    finally:
        kubectl("delete", "clusterrolebinding", binding["metadata"]["name"], check=False)


def test_the_container_runs_as_deployed_read_only_root_and_the_runtimes_user():
    out = in_manager(
        "sh", "-c", "id -u; touch /opt/ansible/x 2>&1 || echo read-only; ls -d /tmp/ansible-zygote"
    )
    uid, *rest = out.splitlines()
    assert uid == "1001"
    assert "read-only" in out, out
    assert rest[-1] == "/tmp/ansible-zygote"


def kill_manager_container() -> None:
    """SIGKILL to every process of the manager container, as the kernel's OOM killer or a crash
    would end it: the kubelet restarts it in place (restartPolicy Always)."""
    procs = (container_cgroup("pids") / "cgroup.procs").read_text().split()
    assert procs
    subprocess.run(["kill", "-KILL", *procs], check=False)


def job_conditions(name: str) -> list[dict]:
    return get("tfjob", "-n", NS, name).get("status", {}).get("conditions") or []


def burst(prefix: str, count: int, workers: int) -> list[str]:
    """``count`` TFJobs of a Chief and ``workers`` Workers, created at once. Their pods stay after
    they succeed (cleanPodPolicy None), so that a recreated one would show."""
    return [
        tfjob(
            f"{prefix}-{i}-{uuid.uuid4().hex[:4]}",
            {
                "Chief": replica(container="tensorflow"),
                "Worker": replica(container="tensorflow", count=workers),
            },
            NS,
            run_policy={"cleanPodPolicy": "None"},
        )
        for i in range(count)
    ]


def pods_of_each(names: list[str], size: int) -> dict[str, dict[str, str]]:
    """Each job's pods (name: uid), once it has all ``size`` of them."""
    for name in names:
        wait_for(lambda n=name: len(owned_pods(n)) == size, what=f"{name}'s {size} pods")
    return {name: uids(owned_pods(name)) for name in names}


def finish_and_check_nothing_was_lost(pods: dict[str, dict[str, str]]) -> None:
    """Ends every pod of each job; each job must succeed with the very pods it had (none
    recreated) and Kubeflow's conditions only, none of them twice."""
    for its_pods in pods.values():
        for pod_name in its_pods:
            finish_pod(NS, pod_name, 0)
    for name, its_pods in pods.items():
        wait_for(lambda n=name: "Succeeded" in true_conditions("tfjob", n), what=f"{name} Succeeded")
        assert uids(owned_pods(name)) == its_pods, f"{name}: a pod was recreated"
        types = [c["type"] for c in job_conditions(name)]
        assert set(types) <= KUBEFLOW_CONDITIONS and len(types) == len(set(types)), (name, types)


def test_the_manager_killed_mid_burst_restarts_in_place_and_loses_nothing():
    pod = the_operator_pod()
    restarts = manager_status()["restartCount"]
    in_manager("sh", "-c", "echo before-the-kill >/tmp/ato-kill-marker")
    names = burst("killed", 6, workers=2)
    # Mid-burst: the first job's pods exist, the others' passes are still under way or queued.
    first = pods_of_each(names[:1], 3)
    kill_manager_container()
    wait_for(lambda: manager_status()["restartCount"] > restarts, what="the manager restarted")
    wait_for(lambda: ready(the_operator_pod()), what="the operator pod Ready again")
    assert the_operator_pod()["metadata"]["uid"] == pod["metadata"]["uid"], "the pod was recreated"
    assert in_manager("cat", "/tmp/ato-kill-marker").strip() == "before-the-kill", "/tmp did not outlive it"
    pods = pods_of_each(names, 3)
    assert pods[names[0]] == first[names[0]], "a pod that existed at the kill was recreated"
    finish_and_check_nothing_was_lost(pods)


def test_the_nodes_containerd_restarted_mid_burst_loses_nothing():
    """containerd stopped and started again under the running operator, as a node's package
    upgrade or a crash restarts it: its shims keep the containers running, so the manager goes on
    (no restart, the same pod) and the kubelet finds every container again."""
    pod = the_operator_pod()
    restarts = {s["name"]: s["restartCount"] for s in pod["status"]["containerStatuses"]}
    names = burst("containerd", 4, workers=1)
    first = pods_of_each(names[:1], 2)
    subprocess.run([str(ROOT / "hack/real-node.sh"), "restart-containerd"], check=True, timeout=120)
    pods = pods_of_each(names, 2)
    assert pods[names[0]] == first[names[0]], "a pod that existed at the restart was recreated"
    finish_and_check_nothing_was_lost(pods)
    after = the_operator_pod()
    assert after["metadata"]["uid"] == pod["metadata"]["uid"], "the operator pod was recreated"
    assert {s["name"]: s["restartCount"] for s in after["status"]["containerStatuses"]} == restarts
    assert ready(after)
    # The kubelet still runs the pod's containers through the new containerd: exec reaches them.
    assert in_manager("true") == ""


def test_the_operator_pod_deleted_mid_burst_its_replacement_loses_nothing():
    """The pod deleted as a drain or a node upgrade deletes it (gracefully): the ReplicaSet makes
    a new one, with a fresh /tmp, which takes the jobs over where they are."""
    old = the_operator_pod()["metadata"]["uid"]
    names = burst("moved", 4, workers=1)
    first = pods_of_each(names[:1], 2)
    kubectl("delete", "pod", "-n", OPERATOR_NS, the_operator_pod()["metadata"]["name"], "--wait=false")
    wait_for(
        lambda: any(ready(p) and p["metadata"]["uid"] != old for p in operator_pods()),
        what="a new operator pod Ready",
    )
    pods = pods_of_each(names, 2)
    assert pods[names[0]] == first[names[0]], "a pod that existed at the deletion was recreated"
    finish_and_check_nothing_was_lost(pods)
    wait_for(lambda: len(operator_pods()) == 1, what="the deleted pod gone")


def lease() -> dict:
    return get("lease", "-n", OPERATOR_NS, "ansible-training-operator")["spec"]


def live_leader() -> str:
    """The holder of the leader-election Lease while it renews it: a killed leader's identity
    stays in the Lease until it expires (nothing released it), renewed no more. The leader renews
    every retry period (2 s)."""
    before = lease()
    time.sleep(3)
    after = lease()
    if after.get("holderIdentity") == before.get("holderIdentity") and after.get("renewTime") != before.get(
        "renewTime"
    ):
        return after.get("holderIdentity") or ""
    return ""


def pod_of(identity: str) -> str:
    """The pod a leader-election identity names (controller-runtime's: the hostname, '_', a UUID)."""
    return identity.partition("_")[0]


def test_leader_election_with_two_replicas_the_other_takes_over_when_the_leader_is_killed():
    kubectl("scale", "deployment", "-n", OPERATOR_NS, DEPLOYMENT, "--replicas=2")
    try:
        wait_for(lambda: sum(ready(p) for p in operator_pods()) == 2, what="two operator pods Ready")
        # After the kill above, the Lease may still name the killed container until it expires.
        leader = wait_for(live_leader, what="a leader renewing the Lease")
        standby = next(
            p["metadata"]["name"] for p in operator_pods() if p["metadata"]["name"] != pod_of(leader)
        )
        pods = pods_of_each(burst("elected", 4, workers=1), 2)
        # Killed, not stopped: it does not hand the lease over, the standby must wait it out.
        kubectl("delete", "pod", "-n", OPERATOR_NS, pod_of(leader), "--grace-period=0", "--force")
        new = wait_for(lambda: (h := live_leader()) != leader and h, what="a new leader renewing the Lease")
        # Whichever live replica acquires the expired Lease first leads: the standby, or the pod
        # the ReplicaSet made in the killed one's place (both wait out the same lease).
        replacements = {p["metadata"]["name"] for p in operator_pods()} - {pod_of(leader)}
        assert pod_of(new) in replacements | {standby}, (new, standby, replacements)
        finish_and_check_nothing_was_lost(pods)
    finally:
        kubectl("scale", "deployment", "-n", OPERATOR_NS, DEPLOYMENT, "--replicas=1")
        wait_for(
            lambda: len(operator_pods()) == 1 and ready(operator_pods()[0]), what="one operator pod again"
        )
