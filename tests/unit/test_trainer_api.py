"""Kubeflow Trainer v2's API without a cluster: the three CRDs against upstream v2.3.0's schema
(trainer_v2_3_0_schema.yaml: every field, its keywords and CEL rules), the admission policies
that stand in for upstream's webhooks, and the built-in runtimes (config/runtimes).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_crds import at, rules, violations, walk

FAST = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
ROOT = Path(__file__).resolve().parents[2]
GROUP = "trainer.kubeflow.org"
UPSTREAM = yaml.load(Loader=FAST, stream=(Path(__file__).parent / "trainer_v2_3_0_schema.yaml").read_text())
RUNTIMES = ROOT / "config" / "runtimes"
ADMISSION = ROOT / "config" / "admission"

# (kind, plural, scope, the upstream table its schema is compared with)
KINDS = [
    ("TrainJob", "trainjobs", "Namespaced", "TrainJob"),
    ("TrainingRuntime", "trainingruntimes", "Namespaced", "TrainingRuntime"),
    ("ClusterTrainingRuntime", "clustertrainingruntimes", "Cluster", "TrainingRuntime"),
]
# Where the table stops: the Kubernetes and JobSet types inside, whose schema comes from the pinned
# Kubernetes (gen_crds.podtemplate) and is tested with the v1 kinds' pod templates.
STOP_SUFFIXES = (
    ".env",
    ".volumes",
    ".volumeMounts",
    ".securityContext",
    ".affinity",
    ".tolerations",
    ".resourcesPerNode",
    ".secretRef",
    ".imagePullSecrets",
    ".schedulingGates",
    ".metadata",
    ".networkTopology",
    ".templates",
)
JOB_SPEC = ".spec.template.spec.replicatedJobs[].template.spec"
KEYWORDS_LEFT_OUT = {"description", "properties", "items", "additionalProperties", "x-kubernetes-validations"}


def crd(kind: str) -> dict[str, Any]:
    plural = {k: p for k, p, _, _ in KINDS}[kind]
    path = ROOT / "config" / "crd" / "bases" / f"{GROUP}_{plural}.yaml"
    return yaml.load(Loader=FAST, stream=path.read_text())


def root(kind: str) -> dict[str, Any]:
    return crd(kind)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def table(kind: str) -> dict[str, dict[str, Any]]:
    """Path -> the schema keywords (required sorted) and ``rules`` (CEL), as the upstream table."""
    out: dict[str, dict[str, Any]] = {}

    def visit(node: dict[str, Any], path: str) -> None:
        entry = {k: v for k, v in node.items() if k not in KEYWORDS_LEFT_OUT}
        if "required" in entry:
            entry["required"] = sorted(entry["required"])
        if rules(node):
            entry["rules"] = [r["rule"] for r in rules(node)]
        out[path] = entry
        if path.endswith(STOP_SUFFIXES) or path == JOB_SPEC:
            return
        for name, child in (node.get("properties") or {}).items():
            visit(child, f"{path}.{name}")
        if isinstance(node.get("additionalProperties"), dict):
            visit(node["additionalProperties"], f"{path}.*")
        if "items" in node:
            visit(node["items"], f"{path}[]")

    for part in ("spec", "status"):
        if part in root(kind)["properties"]:
            visit(root(kind)["properties"][part], f".{part}")
    return out


def same_cel(a: str) -> str:
    return re.sub(r"\s+", "", a)


# --- the schema against upstream's ----------------------------------------------------------------


@pytest.mark.parametrize(("kind", "upstream"), [(k, u) for k, _, _, u in KINDS])
def test_every_upstream_field_and_no_other(kind: str, upstream: str) -> None:
    ours, theirs = set(table(kind)), set(UPSTREAM[upstream])
    assert sorted(theirs - ours) == [], "fields upstream has and we lack"
    assert sorted(ours - theirs) == [], "fields we have and upstream lacks"


@pytest.mark.parametrize(("kind", "upstream"), [(k, u) for k, _, _, u in KINDS])
def test_every_field_validated_as_upstream(kind: str, upstream: str) -> None:
    # Types, formats, enums, defaults, bounds, list types and keys, required fields.
    ours = table(kind)
    for path, theirs in UPSTREAM[upstream].items():
        mine = {k: v for k, v in ours[path].items() if k != "rules"}
        assert mine == {k: v for k, v in theirs.items() if k != "rules"}, path


@pytest.mark.parametrize(("kind", "upstream"), [(k, u) for k, _, _, u in KINDS])
def test_every_cel_rule_is_upstreams(kind: str, upstream: str) -> None:
    ours = table(kind)
    for path, theirs in UPSTREAM[upstream].items():
        assert [same_cel(r) for r in ours[path].get("rules", [])] == [
            same_cel(r) for r in theirs.get("rules", [])
        ], path


IMMUTABLE = [
    ".spec.runtimeRef",
    ".spec.initializer",
    ".spec.trainer",
    ".spec.activeDeadlineSeconds",
    ".spec.managedBy",
    ".spec.runtimePatches[].manager",
]


@pytest.mark.parametrize("path", IMMUTABLE)
def test_immutable_trainjob_fields(path: str) -> None:
    assert "self == oldSelf" in table("TrainJob")[path]["rules"]


def test_runtime_patches_are_keyed_by_manager_at_most_16() -> None:
    patches = table("TrainJob")[".spec.runtimePatches"]
    assert (
        patches["maxItems"],
        patches["x-kubernetes-list-type"],
        patches["x-kubernetes-list-map-keys"],
    ) == (
        16,
        "map",
        ["manager"],
    )
    assert table("TrainJob")[".spec.runtimePatches[]"]["required"] == ["manager"]


def test_managed_by() -> None:
    managed_by = at(root("TrainJob"), "spec", "managedBy")
    assert managed_by["default"] == "trainer.kubeflow.org/trainjob-controller"
    allowed = rules(managed_by)[0]["rule"]
    assert (
        "'trainer.kubeflow.org/trainjob-controller'" in allowed and "'kueue.x-k8s.io/multikueue'" in allowed
    )


@pytest.mark.parametrize(("kind", "plural", "scope"), [k[:3] for k in KINDS])
def test_names_scope_subresources_and_columns(kind: str, plural: str, scope: str) -> None:
    spec = crd(kind)["spec"]
    assert crd(kind)["metadata"]["name"] == f"{plural}.{GROUP}"
    assert (spec["group"], spec["scope"]) == (GROUP, scope)
    names = spec["names"]
    assert (names["kind"], names["listKind"], names["plural"], names["singular"]) == (
        kind,
        f"{kind}List",
        plural,
        kind.lower(),
    )
    [version] = spec["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
    if kind == "TrainJob":
        assert version["subresources"] == {"status": {}}
        columns = [(c["name"], c["type"], c["jsonPath"]) for c in version["additionalPrinterColumns"]]
        assert columns == [
            ("State", "string", ".status.conditions[-1:].type"),
            ("Age", "date", ".metadata.creationTimestamp"),
        ]
    else:
        # Upstream's runtimes have no status and no columns beyond kubectl's Name and Age.
        assert "subresources" not in version and "additionalPrinterColumns" not in version


def test_trainjob_name_is_a_dns_label_runtimes_names_free() -> None:
    [name_rule] = rules(root("TrainJob"))
    assert "size() <= 63" in name_rule["rule"] and "^[a-z]([-a-z0-9]*[a-z0-9])?$" in name_rule["rule"]
    assert not rules(root("TrainingRuntime")) and not rules(root("ClusterTrainingRuntime"))
    # spec is optional upstream (it has required fields of its own).
    assert all("required" not in root(k) for k, _, _, _ in KINDS)


@pytest.mark.parametrize("kind", [k for k, _, _, _ in KINDS])
def test_every_field_is_described_and_every_rule_says_what_to_change(kind: str) -> None:
    # kubectl explain is the API reference users reach first; the Kubernetes types inside keep
    # their own text out (gen_crds.podtemplate), as the values of string maps have none.
    ours = table(kind)
    for path, node in walk(root(kind)):
        if path in ours and not path.endswith(".*"):
            assert node.get("description"), f"{kind} {path} has no description"
        for r in rules(node):
            assert ":" in r["message"], f"{kind} {path}: {r['message']}"


# --- admission policies -----------------------------------------------------------------------


def policies(file: str) -> dict[str, dict[str, Any]]:
    """The file's policies and bindings by kind and name."""
    docs = list(yaml.load_all(Loader=FAST, stream=(ADMISSION / f"{file}.yaml").read_text()))
    return {f"{d['kind']}/{d['metadata']['name']}": d for d in docs}


def test_trainjob_policies_and_their_bindings() -> None:
    docs = policies("trainjob")
    assert sorted(docs) == sorted(
        f"{kind}/ato-trainjob{suffix}"
        for kind in ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")
        for suffix in ("", "-clustertrainingruntime", "-trainingruntime", "-deprecated-runtime")
    )
    for name, doc in docs.items():
        if doc["kind"] == "ValidatingAdmissionPolicyBinding":
            action = "Warn" if name.endswith("-deprecated-runtime") else "Deny"
            assert doc["spec"]["validationActions"] == [action], name
            continue
        spec = doc["spec"]
        assert spec["failurePolicy"] == "Fail"
        [resources] = spec["matchConstraints"]["resourceRules"]
        assert resources["resources"] == ["trainjobs"] and resources["operations"] == ["CREATE", "UPDATE"]
        for v in spec["validations"]:
            assert v["message"] and v["messageExpression"] and v["reason"] == "Invalid", v["expression"]


@pytest.mark.parametrize("kind", ["ClusterTrainingRuntime", "TrainingRuntime"])
def test_a_trainjob_is_checked_against_the_runtime_it_names(kind: str) -> None:
    name = f"ato-trainjob-{kind.lower()}"
    docs = policies("trainjob")
    policy, binding = (
        docs[f"ValidatingAdmissionPolicy/{name}"],
        docs[f"ValidatingAdmissionPolicyBinding/{name}"],
    )
    assert policy["spec"]["paramKind"] == {"apiVersion": f"{GROUP}/v1alpha1", "kind": kind}
    # Every runtime is a parameter (a TrainingRuntime's in the TrainJob's namespace: no namespace
    # given); none at all must not refuse TrainJobs of the other kind.
    assert binding["spec"]["paramRef"] == {"selector": {}, "parameterNotFoundAction": "Allow"}
    [names] = [
        c["expression"] for c in policy["spec"]["matchConditions"] if c["name"] == "names-this-runtime"
    ]
    for part in (f"'{kind}'", f"'{GROUP}'", "== params.metadata.name"):
        assert same_cel(part) in same_cel(names), part


# Each framework's variables a TrainJob may not set (upstream's constants.*ReservedEnvNames).
RESERVED = {
    "torch": ["PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT"],
    "mpi": [
        "OMPI_MCA_orte_default_hostfile",
        "OMPI_MCA_plm_rsh_args",
        "OMPI_MCA_orte_keep_fqdn_hostnames",
        "OMPI_MCA_orte_set_default_slots",
    ],
    "xgboost": ["DMLC_TRACKER_URI", "DMLC_TRACKER_PORT", "DMLC_TASK_ID", "DMLC_NUM_WORKER"],
}


def test_reserved_env_names_per_framework() -> None:
    policy = policies("trainjob")["ValidatingAdmissionPolicy/ato-trainjob-clustertrainingruntime"]
    # Compared without whitespace: the generator breaks long CEL over lines.
    variables = {v["name"]: same_cel(v["expression"]) for v in policy["spec"]["variables"]}
    for framework, names in RESERVED.items():
        listed = "[" + ", ".join(f"'{n}'" for n in names) + "]"
        assert same_cel(f"'{framework}': {listed}") in variables["reserved"], framework
        assert same_cel(f"variables.policy.?{framework}.hasValue() ? '{framework}'") in variables["framework"]


def test_what_the_trainjob_policies_check() -> None:
    # One validation per upstream webhook rule; a missing one fails here.
    alone = policies("trainjob")["ValidatingAdmissionPolicy/ato-trainjob"]["spec"]["validations"]
    assert [v["message"].split(":")[0] for v in alone] == [
        "spec.runtimeRef is required",
        "spec.runtimePatches can change only while the TrainJob is suspended (before or after the change)",
        "spec.runtimePatches must not set env of the node, dataset-initializer or model-initializer containers",
    ]
    named = policies("trainjob")["ValidatingAdmissionPolicy/ato-trainjob-trainingruntime"]["spec"][
        "validations"
    ]
    assert [v["message"].split(":")[0] for v in named] == [
        "spec.trainer.env must not set the variables the runtime's framework sets (PET_*, OMPI_MCA_*, DMLC_*)",
        "spec.trainer.numNodes must be 1",
        "spec.trainer.numProcPerNode must be at least 1 for a Flux runtime",
        "the Flux runtime's node job must not have an init container named flux-installer, which the operator adds",
        "the torch runtime's mlPolicy.torch.envInjection names a container its template lacks",
        "spec.initializer.dataset needs a runtime with a dataset-initializer job whose dataset-initializer "
        "container mounts the volume initializer",
        "spec.initializer.model needs a runtime with a model-initializer job whose model-initializer container "
        "mounts the volume initializer",
        "spec.runtimePatches must not patch a replicated job the runtime does not have",
        "spec.runtimePatches must not patch a container the runtime's job does not have",
        "spec.runtimePatches must not patch an init container the runtime's job does not have",
        "the Volcano queue (annotation scheduling.volcano.sh/queue-name of the JobSet template) must not be empty",
    ]


@pytest.mark.parametrize(
    ("kind", "operations"),
    [("trainingruntime", ["CREATE"]), ("clustertrainingruntime", ["CREATE", "UPDATE"])],
)
def test_runtime_policies(kind: str, operations: list[str]) -> None:
    # Upstream validates a TrainingRuntime when created, a ClusterTrainingRuntime when created or
    # updated, and skips the runtimes its release labels (the built-in ones).
    docs = policies(kind)
    policy = docs[f"ValidatingAdmissionPolicy/ato-{kind}"]["spec"]
    [resources] = policy["matchConstraints"]["resourceRules"]
    assert resources["operations"] == operations and resources["resources"] == [f"{kind}s"]
    assert policy["matchConstraints"]["objectSelector"] == {
        "matchExpressions": [
            {"key": "trainer.kubeflow.org/webhook-validation", "operator": "NotIn", "values": ["disabled"]}
        ]
    }
    checks = same_cel(" ".join(v["expression"] for v in policy["validations"]))
    assert same_cel("replicas.orValue(1) != 1") in checks
    for step, container in (("trainer", "node"), ("dataset-initializer", "dataset-initializer")):
        assert same_cel(f"'{step}': '{container}'") in checks
    warned = f"ValidatingAdmissionPolicyBinding/ato-{kind}-deprecated"
    assert (warned in docs) == (kind == "clustertrainingruntime")


def test_every_field_a_policy_reads_exists() -> None:
    # A misspelt field under optional selection (object.?spec.?trainr) is no type error: the API
    # server would let the policy pass everything. Every name selected must be a field of the
    # Trainer schemas, of metadata or request, a CEL function or a variable of the policy.
    fields = {"metadata", "name", "labels", "annotations", "deletionTimestamp", "operation"}
    for kind, _, _, _ in KINDS:
        for path, _ in walk(root(kind)):
            fields.add(re.split(r"[.\[\]*]+", path.rstrip(".*[]"))[-1])
    functions = {"orValue", "hasValue", "exists", "all", "map", "filter", "join", "size", "matches"}
    for file in ("trainjob", "trainingruntime", "clustertrainingruntime"):
        for name, doc in policies(file).items():
            spec = doc["spec"]
            variables = {v["name"] for v in spec.get("variables", [])}
            cel = [c["expression"] for c in spec.get("matchConditions", [])]
            cel += [v["expression"] for v in spec.get("variables", [])]
            cel += [e for v in spec.get("validations", []) for e in (v["expression"], v["messageExpression"])]
            for expression in cel:
                code = re.sub(r"'[^']*'", "''", expression)
                for selected in re.findall(r"\.\s*\??([A-Za-z_]\w*)", code):
                    assert selected in fields | functions | variables, (name, selected)


# --- the built-in runtimes ----------------------------------------------------------------------

# name -> (framework label, ML policy, the trainer job's image), as Trainer v2.3.0's release.
BUILT_IN = {
    "torch-distributed": ("torch", "torch", "pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime"),
    "deepspeed-distributed": ("deepspeed", "mpi", "ghcr.io/kubeflow/trainer/deepspeed-runtime:v2.3.0"),
    "mlx-distributed": ("mlx", "mpi", "ghcr.io/kubeflow/trainer/mlx-runtime:v2.3.0"),
    "jax-distributed": ("jax", "jax", "nvcr.io/nvidia/jax:25.10-py3"),
    "xgboost-distributed": ("xgboost", "xgboost", "ghcr.io/kubeflow/trainer/xgboost-runtime:v2.3.0"),
}


def runtimes() -> dict[str, dict[str, Any]]:
    listed = yaml.load(Loader=FAST, stream=(RUNTIMES / "kustomization.yaml").read_text())["resources"]
    assert sorted(listed) == sorted(p.name for p in RUNTIMES.glob("*.yaml") if p.name != "kustomization.yaml")
    out = {}
    for name in listed:
        [doc] = list(yaml.load_all(Loader=FAST, stream=(RUNTIMES / name).read_text()))
        out[doc["metadata"]["name"]] = doc
    return out


def test_the_five_built_in_runtimes() -> None:
    assert sorted(runtimes()) == sorted(BUILT_IN)


@pytest.mark.parametrize("name", sorted(BUILT_IN))
def test_built_in_runtime(name: str) -> None:
    runtime = runtimes()[name]
    framework, policy, image = BUILT_IN[name]
    assert (runtime["apiVersion"], runtime["kind"]) == (f"{GROUP}/v1alpha1", "ClusterTrainingRuntime")
    assert runtime["metadata"]["labels"] == {
        "trainer.kubeflow.org/framework": framework,
        "trainer.kubeflow.org/webhook-validation": "disabled",
    }
    ml = runtime["spec"]["mlPolicy"]
    assert ml["numNodes"] == 1 and set(ml) == {"numNodes", policy}
    jobs = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    [trainer] = [
        j
        for j in jobs
        if j["template"]
        .get("metadata", {})
        .get("labels", {})
        .get("trainer.kubeflow.org/trainjob-ancestor-step")
        == "trainer"
    ]
    # The SDK's trainer container: node, in the job marked as the trainer step.
    containers = trainer["template"]["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["node"] and containers[0]["image"] == image
    assert violations({**runtime, "metadata": {}}, root("ClusterTrainingRuntime"), "") == []


def test_mpi_runtimes_launch_after_their_nodes() -> None:
    for name in ("deepspeed-distributed", "mlx-distributed"):
        spec = runtimes()[name]["spec"]
        assert spec["mlPolicy"]["mpi"] == {
            "numProcPerNode": 1,
            "mpiImplementation": "OpenMPI",
            "sshAuthMountPath": "/home/mpiuser/.ssh",
            "runLauncherAsNode": True,
        }
        jobs = {j["name"]: j for j in spec["template"]["spec"]["replicatedJobs"]}
        assert list(jobs) == ["node", "launcher"]
        assert jobs["launcher"]["dependsOn"] == [{"name": "node", "status": "Ready"}]
        assert spec["template"]["spec"]["successPolicy"] == {
            "operator": "All",
            "targetReplicatedJobs": ["launcher"],
        }


def test_a_broken_runtime_is_seen() -> None:
    # The schema check above can fail: a typo and a bad enum are found.
    runtime = runtimes()["deepspeed-distributed"]
    runtime["spec"]["template"]["spec"]["successPolicy"]["operator"] = "Most"
    runtime["spec"]["mlPolicy"]["mpi"]["numProcsPerNode"] = 2
    assert violations({**runtime, "metadata": {}}, root("ClusterTrainingRuntime"), "") == [
        ".spec.mlPolicy.mpi.numProcsPerNode: unknown field",
        ".spec.template.spec.successPolicy.operator: 'Most' not in ['All', 'Any']",
    ]


# --- samples and the bundle ---------------------------------------------------------------------

TRAINER_SAMPLES = ROOT / "config" / "samples" / "trainer"


def test_samples_fit_the_schema_and_name_a_runtime() -> None:
    listed = yaml.load(Loader=FAST, stream=(TRAINER_SAMPLES / "kustomization.yaml").read_text())["resources"]
    assert sorted(listed) == sorted(
        p.name for p in TRAINER_SAMPLES.glob("*.yaml") if p.name != "kustomization.yaml"
    )
    samples = {}
    for name in listed:
        [doc] = list(yaml.load_all(Loader=FAST, stream=(TRAINER_SAMPLES / name).read_text()))
        assert doc["apiVersion"] == f"{GROUP}/v1alpha1"
        assert violations({**doc, "metadata": {}}, root(doc["kind"]), "") == [], name
        samples[doc["kind"]] = doc
    assert sorted(samples) == ["TrainJob", "TrainingRuntime"]
    assert samples["TrainJob"]["spec"]["runtimeRef"]["name"] in BUILT_IN


def test_the_bundle_owns_the_trainer_crds_with_examples() -> None:
    csv_path = (
        ROOT / "config" / "manifests" / "bases" / "ansible-training-operator.clusterserviceversion.yaml"
    )
    csv = yaml.load(Loader=FAST, stream=csv_path.read_text())
    owned = {(o["name"], o["version"], o["kind"]) for o in csv["spec"]["customresourcedefinitions"]["owned"]}
    for kind, plural, _, _ in KINDS:
        assert (f"{plural}.{GROUP}", "v1alpha1", kind) in owned
    # The bundle's validator wants an example of every kind: the samples and the built-in runtimes.
    inputs = yaml.load(Loader=FAST, stream=(ROOT / "config" / "manifests" / "kustomization.yaml").read_text())
    assert {"../samples/trainer", "../runtimes"} <= set(inputs["resources"])
