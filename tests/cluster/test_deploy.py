"""`make deploy` / `make undeploy`: the operator as a Deployment, with exactly the RBAC it uses.

On the local cluster the Deployment's pod runs on a KWOK node, so it becomes Running and Ready
without the image being pulled or anything running; what this proves is the manifests: they are
accepted, the Deployment becomes Available, the pod is hardened, and the ServiceAccount may do
exactly what the operator does. Undeploy removes the operator but keeps the CRDs (and every job),
which the other cluster tests use.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from kube import ROOT, get, install_crd, kubeconfig, kubectl, wait_for
from training_jobs.registry import PROFILES
from training_kube.client import RESOURCES

pytestmark = pytest.mark.cluster

NS = "ansible-training-operator-system"
DEPLOYMENT = "ansible-training-operator-controller-manager"
SA = f"system:serviceaccount:{NS}:ansible-training-operator-controller-manager"
SA_GROUPS = ["system:serviceaccounts", f"system:serviceaccounts:{NS}", "system:authenticated"]
CRDS = {
    "tfjobs.kubeflow.org",
    "mxjobs.kubeflow.org",
    "caffe2jobs.kubeflow.org",
    "paddlejobs.batch.paddlepaddle.org",
}
# (API group, resource) of every job kind the operator serves.
JOBS = {(p.api_version.rpartition("/")[0], RESOURCES[(p.api_version, p.kind)]) for p in PROFILES.values()}

# (API group, resource) -> verbs, everything the operator does in a job's namespace.
EXPECTED_IN_JOB_NAMESPACE = {
    **{job: {"get", "list", "watch", "patch", "delete"} for job in JOBS},
    **{(g, f"{r}/status"): {"patch"} for g, r in JOBS},
    **{(g, f"{r}/finalizers"): {"update"} for g, r in JOBS},
    ("", "pods"): {"get", "list", "watch", "create", "delete"},
    ("", "services"): {"list", "watch", "create", "delete"},
    # get: a TrainJob's pass reads its config maps and PodGroup by name.
    ("", "configmaps"): {"get", "list", "watch", "create", "patch", "delete"},
    # An MPIJob's launcher: its ServiceAccount, Role (patched as workers change) and RoleBinding;
    # pods get and pods/exec create because the launcher Role grants them.
    ("", "pods/exec"): {"create"},
    # Kubeflow Trainer v2: TrainJobs as the jobs, their runtimes read, their JobSets, and an MPI
    # TrainJob's SSH key Secret, created only.
    ("trainer.kubeflow.org", "trainjobs"): {"get", "list", "watch", "patch"},
    ("trainer.kubeflow.org", "trainjobs/status"): {"patch"},
    ("trainer.kubeflow.org", "trainjobs/finalizers"): {"update"},
    ("trainer.kubeflow.org", "trainingruntimes"): {"get", "list", "watch"},
    ("trainer.kubeflow.org", "clustertrainingruntimes"): {"get", "list", "watch"},
    ("jobset.x-k8s.io", "jobsets"): {"get", "list", "watch", "create", "patch", "delete"},
    ("", "secrets"): {"create"},
    ("", "serviceaccounts"): {"list", "watch", "create", "delete"},
    ("rbac.authorization.k8s.io", "roles"): {"list", "watch", "create", "patch", "delete"},
    ("rbac.authorization.k8s.io", "rolebindings"): {"list", "watch", "create", "delete"},
    ("apps", "deployments"): {"list", "watch", "create", "delete"},
    ("autoscaling", "horizontalpodautoscalers"): {"list", "watch", "create", "delete"},
    ("scheduling.volcano.sh", "podgroups"): {"get", "list", "watch", "create", "patch", "delete"},
    ("scheduling.x-k8s.io", "podgroups"): {"get", "list", "watch", "create", "patch", "delete"},
    ("scheduling.k8s.io", "priorityclasses"): {"list", "watch"},
    ("", "nodes"): {"get", "list", "watch"},
    ("", "events"): {"create"},
    # Metrics endpoint authentication and authorization (--metrics-require-rbac).
    ("authentication.k8s.io", "tokenreviews"): {"create"},
    ("authorization.k8s.io", "subjectaccessreviews"): {"create"},
}
# In its own namespace the operator also holds its leader-election lease and records events on it.
EXPECTED_IN_OPERATOR_NAMESPACE = {
    **EXPECTED_IN_JOB_NAMESPACE,
    ("coordination.k8s.io", "leases"): {"get", "create", "update"},
    ("", "events"): {"create", "patch"},
}
# Granted to every authenticated user by the cluster's default roles, not by ours.
DEFAULT_FOR_EVERYONE = {
    ("authentication.k8s.io", "selfsubjectreviews"),
    ("authorization.k8s.io", "selfsubjectaccessreviews"),
    ("authorization.k8s.io", "selfsubjectrulesreviews"),
}


def deploy_script(action: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "KUBECONFIG": kubeconfig(), "DEPLOY_TIMEOUT": "45s"}
    return subprocess.run(
        [str(ROOT / "hack" / "deploy.sh"), action],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def crd_names() -> set[str]:
    return {c["metadata"]["name"] for c in get("crd")["items"]}


def rules_of_operator(namespace: str) -> dict[tuple[str, str], set[str]]:
    """What the operator's ServiceAccount may do in a namespace, as the API server computes it."""
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectRulesReview",
        "spec": {"namespace": namespace},
    }
    out = kubectl(
        "create", "--validate=false", "--as", SA, "-o", "json", "-f", "-", stdin=json.dumps(review)
    ).stdout
    status = json.loads(out)["status"]
    assert not status.get("incomplete"), status.get("evaluationError")
    rules: dict[tuple[str, str], set[str]] = {}
    for rule in status["resourceRules"]:
        for group in rule.get("apiGroups", []):
            for resource in rule.get("resources", []):
                rules.setdefault((group, resource), set()).update(rule["verbs"])
    for key in DEFAULT_FOR_EVERYONE:
        rules.pop(key, None)
    return rules


def can_i(verb: str, resource: str, *where: str) -> bool:
    """Ask the API server (a SubjectAccessReview) whether the operator's ServiceAccount may do
    ``verb`` on ``resource`` (``plural.group[/subresource]``). Unlike ``kubectl auth can-i`` this
    needs no discovery, so it also answers for kinds whose CRD is not installed (PodGroups)."""
    resource, _, sub = resource.partition("/")
    plural, _, group = resource.partition(".")
    namespace = where[1] if len(where) == 2 and where[0] == "-n" else ""
    attributes = {"verb": verb, "resource": plural, "group": group, "subresource": sub}
    if namespace:
        attributes["namespace"] = namespace
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {"user": SA, "groups": SA_GROUPS, "resourceAttributes": attributes},
    }
    result = kubectl("create", "-o", "json", "-f", "-", stdin=json.dumps(review))
    return bool(json.loads(result.stdout).get("status", {}).get("allowed"))


@pytest.fixture(scope="module", autouse=True)
def deployed():
    assert crd_names() >= CRDS, "the CRDs are installed first (hack/test.sh e2e, make install)"
    result = deploy_script("deploy")
    assert result.returncode == 0, result.stderr[-3000:]
    yield
    # Also after a failed test; the last test checks what undeploy leaves behind.
    deploy_script("undeploy")


def test_deployment_becomes_available():
    deployment = get("deployment", "-n", NS, DEPLOYMENT)
    available = [c for c in deployment["status"].get("conditions", []) if c["type"] == "Available"]
    assert available and available[0]["status"] == "True", deployment["status"]
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"].startswith(
        "ansible-training-operator:"
    )


def test_pod_is_hardened_and_probed():
    spec = get("deployment", "-n", NS, DEPLOYMENT)["spec"]["template"]["spec"]
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    containers = {c["name"]: c for c in spec["containers"]}
    assert set(containers) == {"manager", "companion"}
    for c in containers.values():
        sc = c["securityContext"]
        assert sc["readOnlyRootFilesystem"] is True
        assert sc["allowPrivilegeEscalation"] is False
        assert sc["capabilities"]["drop"] == ["ALL"]
        assert "add" not in sc["capabilities"]
        assert c["resources"]["limits"] and c["resources"]["requests"]
    manager, companion = containers["manager"], containers["companion"]
    assert companion["command"][:3] == ["python3", "-m", "training_companion"]
    assert companion["readinessProbe"]["httpGet"]["path"] == "/healthz"
    assert manager["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert manager["readinessProbe"]["httpGet"]["path"] == "/readyz"
    args = manager["args"]
    for flag in (
        "--leader-elect",
        "--metrics-secure",
        "--metrics-require-rbac",
        "--reconcile-period=0s",
        "--ansible-verbosity=0",
    ):
        assert flag in args
    # Ansible's work files go to writable emptyDirs, the rest of the filesystem is read-only.
    assert {m["mountPath"] for m in manager["volumeMounts"]} == {"/tmp", "/opt/ansible/.ansible"}
    # The namespace enforces the restricted Pod Security profile, which the pod passes.
    labels = get("namespace", NS)["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    pods = get("pods", "-n", NS, "-l", "control-plane=controller-manager")["items"]
    assert pods and all(p["status"]["phase"] == "Running" for p in pods)


def test_rbac_is_exactly_what_the_operator_uses():
    assert rules_of_operator("default") == EXPECTED_IN_JOB_NAMESPACE
    assert rules_of_operator(NS) == EXPECTED_IN_OPERATOR_NAMESPACE


@pytest.mark.parametrize("verb", ["get", "list", "watch", "update", "patch", "delete"])
def test_cannot_read_or_change_secrets(verb):
    """The operator reads no Secret and changes none: it only creates an MPI TrainJob's SSH key
    Secret once, owned by the TrainJob (the garbage collector deletes it)."""
    assert not can_i(verb, "secrets", "--all-namespaces")
    assert not can_i(verb, "secrets", "-n", NS)


def test_may_only_create_secrets():
    assert can_i("create", "secrets", "-n", NS)


@pytest.mark.parametrize(
    ("verb", "resource"),
    [
        ("create", "pods"),
        ("delete", "pods"),
        ("watch", "pods"),
        ("create", "services"),
        ("delete", "configmaps"),
        ("patch", "tfjobs.kubeflow.org/status"),
        ("patch", "paddlejobs.batch.paddlepaddle.org/status"),
        ("delete", "caffe2jobs.kubeflow.org"),
        ("patch", "mxjobs.kubeflow.org"),  # the wake watcher's annotation
        ("create", "deployments.apps"),
        ("patch", "podgroups.scheduling.volcano.sh"),
        ("create", "events"),
        # An MPIJob's launcher objects; pods/exec because the launcher Role grants it.
        ("create", "roles.rbac.authorization.k8s.io"),
        ("patch", "configmaps"),
        ("create", "pods/exec"),
    ],
)
def test_can_do_what_it_does(verb, resource):
    assert can_i(verb, resource, "-n", "default")


@pytest.mark.parametrize(
    ("verb", "resource"),
    [
        ("update", "pods"),
        ("update", "tfjobs.kubeflow.org"),  # spec is the user's; only status and one annotation
        ("create", "tfjobs.kubeflow.org"),
        ("update", "mxjobs.kubeflow.org/status"),
        ("escalate", "roles.rbac.authorization.k8s.io"),  # it holds what its launcher Roles grant
        ("bind", "roles.rbac.authorization.k8s.io"),
        ("update", "nodes"),
        ("update", "deployments.apps"),
        ("create", "priorityclasses.scheduling.k8s.io"),
        ("create", "customresourcedefinitions.apiextensions.k8s.io"),
    ],
)
def test_cannot_do_anything_else(verb, resource):
    assert not can_i(verb, resource, "-n", "default")


def may(user: str, verb: str, group: str, resource: str, namespace: str) -> bool:
    """A SubjectAccessReview for any user."""
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": user,
            "resourceAttributes": {
                "verb": verb,
                "group": group,
                "resource": resource,
                "namespace": namespace,
            },
        },
    }
    result = kubectl("create", "-o", "json", "-f", "-", stdin=json.dumps(review))
    return bool(json.loads(result.stdout).get("status", {}).get("allowed"))


USERS = {"edit": "ato-test-editor", "view": "ato-test-viewer"}
# Kubeflow's kubeflow-edit and kubeflow-view (its kubeflow-roles manifests): empty roles that
# aggregate what carries their labels.
KUBEFLOW_ROLES = [
    {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": f"ato-test-kubeflow-{role}"},
        "aggregationRule": {
            "clusterRoleSelectors": [
                {"matchLabels": {f"rbac.authorization.kubeflow.org/aggregate-to-kubeflow-{role}": "true"}}
            ]
        },
        "rules": [],
    }
    for role in ("edit", "view")
] + [
    {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": f"ato-test-kubeflow-{role}", "namespace": "default"},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": f"ato-test-kubeflow-{role}",
        },
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": USERS[role]}],
    }
    for role in ("edit", "view")
]


@pytest.fixture
def kubeflow_roles():
    manifest = json.dumps({"apiVersion": "v1", "kind": "List", "items": KUBEFLOW_ROLES})
    kubectl("apply", "-f", "-", stdin=manifest)
    yield
    kubectl("delete", "--ignore-not-found", "-f", "-", stdin=manifest)


@pytest.mark.parametrize("job", sorted(JOBS))
def test_kubeflow_profile_users_may_run_every_kind(kubeflow_roles, job):
    """training-operator's manifests aggregate its job roles into Kubeflow's; so do ours."""
    group, resource = job

    def allowed():
        return may(USERS["edit"], "create", group, resource, "default")

    # The aggregation controller fills the aggregated role shortly after it is created.
    wait_for(allowed, what=f"kubeflow-edit may create {resource}.{group}")
    assert may(USERS["view"], "get", group, resource, "default")
    assert not may(USERS["view"], "create", group, resource, "default")


def test_the_metrics_network_policy_applies_and_selects_the_operator_pod():
    out = kubectl(
        "apply", "--dry-run=server", "-o", "json", "-k", str(ROOT / "config" / "network-policy")
    ).stdout
    policy = json.loads(out)
    policy = policy["items"][0] if policy.get("kind") == "List" else policy
    assert policy["metadata"]["namespace"] == NS
    pods = get("pods", "-n", NS, "-l", "control-plane=controller-manager")["items"]
    selector = policy["spec"]["podSelector"]["matchLabels"]
    assert pods and all(selector.items() <= p["metadata"]["labels"].items() for p in pods)
    ports = {p["port"] for rule in policy["spec"]["ingress"] for p in rule["ports"]}
    assert ports == {8443, 8686}


def service_monitor_crd() -> str:
    """prometheus-operator's ServiceMonitor CRD, from its Go module source (versions.env)."""
    version = (
        os.environ.get("PROMETHEUS_OPERATOR_VERSION")
        or dict(
            line.split("=", 1)
            for line in (ROOT / "versions.env").read_text().splitlines()
            if line[:1].isupper()
        )["PROMETHEUS_OPERATOR_VERSION"]
    )
    module = subprocess.run(
        ["go", "mod", "download", "-json", f"github.com/prometheus-operator/prometheus-operator@{version}"],
        capture_output=True,
        text=True,
        check=True,
    )
    return os.path.join(
        json.loads(module.stdout)["Dir"],
        "example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml",
    )


def test_the_service_monitor_applies_against_prometheus_operators_crd():
    install_crd(service_monitor_crd(), "servicemonitors.monitoring.coreos.com")
    try:
        # kubectl validates strictly: a field the CRD does not know would be refused, not dropped.
        out = kubectl(
            "apply", "--dry-run=server", "-o", "json", "-k", str(ROOT / "config" / "prometheus")
        ).stdout
        monitor = json.loads(out)
        assert monitor["metadata"]["namespace"] == NS
        assert [e["port"] for e in monitor["spec"]["endpoints"]] == ["https", "job-metrics"]
    finally:
        kubectl("delete", "crd", "servicemonitors.monitoring.coreos.com", "--ignore-not-found", check=False)


def test_undeploy_removes_the_operator_and_keeps_the_crds():
    result = deploy_script("undeploy")
    assert result.returncode == 0, result.stderr[-3000:]
    assert kubectl("get", "namespace", NS, check=False).returncode != 0 or wait_for(
        lambda: kubectl("get", "namespace", NS, check=False).returncode != 0,
        what="namespace gone",
    )
    for kind in ("clusterrole", "clusterrolebinding"):
        names = [o["metadata"]["name"] for o in get(kind)["items"]]
        assert not [n for n in names if n.startswith("ansible-training-operator-")], names
    assert crd_names() >= CRDS
