"""The job APIs without a cluster: generated files, schema shape, admission policies, samples.

What only the API server can judge (CEL compiles, its cost fits, messages of refused jobs) is in
tests/cluster/test_admission.py.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from training_jobs.registry import BY_KIND, PROFILES, profile_of

# The CRDs carry the whole pod schema: libyaml reads them about ten times faster.
FAST = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "config" / "samples"
ADMISSION = ROOT / "config" / "admission"
DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


sys.path.insert(0, str(ROOT / "hack"))
import gen_crds.cli as gen  # noqa: E402


def _every_crd() -> list[dict[str, Any]]:
    return [
        yaml.load(Loader=FAST, stream=path.read_text())
        for path in sorted((ROOT / "config" / "crd" / "bases").glob("*.yaml"))
    ]


def _crds() -> dict[str, dict[str, Any]]:
    """The job CRDs of the engine's kinds by profile name (the registry's key: tfjob,
    kubeflow_paddlejob, paddlejob, ...). Trainer v2's are tests/unit/test_trainer_api.py's."""
    out = {}
    for doc in EVERY_CRD:
        key = (f"{doc['spec']['group']}/{doc['spec']['versions'][0]['name']}", doc["spec"]["names"]["kind"])
        if key in BY_KIND:
            out[BY_KIND[key].name] = doc
    return out


EVERY_CRD = _every_crd()
CRDS = _crds()
KINDS = sorted(PROFILES)


def schema(kind: str) -> dict[str, Any]:
    return CRDS[kind]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def spec_of(kind: str) -> dict[str, Any]:
    return schema(kind)["properties"]["spec"]


def at(node: dict[str, Any], *path: str) -> dict[str, Any]:
    """Walk a schema by property names; '*' steps into additionalProperties, '[]' into items."""
    for key in path:
        if key == "*":
            node = node["additionalProperties"]
        elif key == "[]":
            node = node["items"]
        else:
            node = node["properties"][key]
    return node


def rules(node: dict[str, Any]) -> list[dict[str, Any]]:
    return node.get("x-kubernetes-validations") or []


def walk(node: dict[str, Any], path: str = ""):
    """Every schema node below ``node`` with its path."""
    yield path, node
    for name, child in (node.get("properties") or {}).items():
        yield from walk(child, f"{path}.{name}")
    if isinstance(node.get("additionalProperties"), dict):
        yield from walk(node["additionalProperties"], f"{path}.*")
    if "items" in node:
        yield from walk(node["items"], f"{path}[]")


# --- generated files ---------------------------------------------------------------------------


def test_generated_files_are_up_to_date() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "hack" / "gen_crds"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr


def test_the_crds_fit_in_one_olm_install_plan() -> None:
    # OLM embeds every object of the bundle in one InstallPlan, each step's manifest a JSON string
    # in the InstallPlan's JSON, and etcd refuses objects over 1.5 MiB; the pod schema is most of
    # each CRD (gen_crds.podtemplate leaves its descriptions out for this). The CSV, the other
    # objects and the steps' own fields need room too: 150 KiB is kept for them.
    csv = ROOT / "config" / "manifests" / "bases" / "ansible-training-operator.clusterserviceversion.yaml"
    objects = [*EVERY_CRD, yaml.load(Loader=FAST, stream=csv.read_text())]
    total = sum(len(json.dumps(json.dumps(o, separators=(",", ":")))) for o in objects)
    assert len(EVERY_CRD) == 12
    assert total < 1.5 * 1024 * 1024 - 150 * 1024, f"{total} bytes of manifests in the InstallPlan"


def test_generated_yaml_round_trips() -> None:
    # Folded block scalars must load back to exactly the strings the generator built.
    for path, docs in gen.documents().items():
        assert list(yaml.load_all(Loader=FAST, stream=path.read_text())) == docs, path


def test_generated_yaml_has_no_anchors() -> None:
    for path, text in gen.outputs().items():
        assert not re.search(r"[&*]id\d", text), path


def test_generated_files_are_deterministic(tmp_path) -> None:
    # Two processes with different hash seeds: set and dict iteration order must not leak out.
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        result = subprocess.run(
            [sys.executable, str(ROOT / "hack" / "gen_crds"), "--check"],
            env=env,
            capture_output=True,
            text=True,
        )
        assert result.returncode == 0, (seed, result.stderr)


def test_yaml_is_lint_clean() -> None:
    config = ROOT / ".yamllint"
    args = (
        ["-c", str(config)]
        if config.exists()
        else ["-d", "{extends: default, rules: {line-length: {max: 160}}}"]
    )
    result = subprocess.run(
        [sys.executable, "-m", "yamllint", "-s", *args, "config/crd", "config/admission", "config/samples"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_kustomizations_list_every_file() -> None:
    for directory, pattern in [
        (ROOT / "config" / "crd", "bases/*.yaml"),
        (ADMISSION, "*.yaml"),
        (SAMPLES, "*.yaml"),
    ]:
        listed = yaml.load(Loader=FAST, stream=(directory / "kustomization.yaml").read_text())["resources"]
        present = sorted(str(p.relative_to(directory)) for p in directory.glob(pattern))
        present = [p for p in present if p != "kustomization.yaml"]
        assert sorted(listed) == present, directory


# --- CRD shape ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "kind", "group", "version", "plural", "short"),
    [
        ("tfjob", "TFJob", "kubeflow.org", "v1", "tfjobs", ["tfj"]),
        ("mxjob", "MXJob", "kubeflow.org", "v1", "mxjobs", ["mxj"]),
        ("pytorchjob", "PyTorchJob", "kubeflow.org", "v1", "pytorchjobs", ["ptj"]),
        ("xgboostjob", "XGBoostJob", "kubeflow.org", "v1", "xgboostjobs", []),
        ("jaxjob", "JAXJob", "kubeflow.org", "v1", "jaxjobs", []),
        ("kubeflow_paddlejob", "PaddleJob", "kubeflow.org", "v1", "paddlejobs", []),
        ("mpijob", "MPIJob", "kubeflow.org", "v1", "mpijobs", []),
        ("paddlejob", "PaddleJob", "batch.paddlepaddle.org", "v1", "paddlejobs", ["pdj"]),
        ("caffe2job", "Caffe2Job", "kubeflow.org", "v1alpha1", "caffe2jobs", ["c2j"]),
    ],
)
def test_names(name: str, kind: str, group: str, version: str, plural: str, short: list[str]) -> None:
    crd = CRDS[name]
    assert crd["metadata"]["name"] == f"{plural}.{group}"
    assert crd["spec"]["group"] == group
    assert crd["spec"]["scope"] == "Namespaced"
    names = crd["spec"]["names"]
    assert names == {
        "kind": kind,
        "listKind": f"{kind}List",
        "plural": plural,
        "singular": kind.lower(),
        "shortNames": short,
        "categories": ["all", "kubeflow"],
    }
    v, *runtime_only = crd["spec"]["versions"]
    assert (v["name"], v["served"], v["storage"]) == (version, True, True)
    # training-operator's PaddleJob is served a second time for the runtime's watch alone
    # (watches.yaml says why): the same schema, subresources and columns, never stored.
    assert [r["name"] for r in runtime_only] == (["v1-runtime"] if name == "kubeflow_paddlejob" else [])
    for r in runtime_only:
        assert not r["storage"]
        assert {**r, "name": v["name"], "storage": True} == v
    # The Worker replicas scale PyTorchJob and training-operator's PaddleJob, as upstream.
    field = {"pytorchjob": "pytorchReplicaSpecs", "kubeflow_paddlejob": "paddleReplicaSpecs"}.get(name)
    scale = {
        "specReplicasPath": f".spec.{field}.Worker.replicas",
        "statusReplicasPath": ".status.replicaStatuses.Worker.active",
        "labelSelectorPath": ".status.replicaStatuses.Worker.selector",
    }
    assert v["subresources"] == ({"status": {}, "scale": scale} if field else {"status": {}})


@pytest.mark.parametrize("kind", KINDS)
def test_printer_columns(kind: str) -> None:
    columns = CRDS[kind]["spec"]["versions"][0]["additionalPrinterColumns"]
    by_name = {c["name"]: c for c in columns}
    assert by_name["State"]["jsonPath"] == ".status.conditions[-1:].type"
    assert by_name["State"]["type"] == "string"
    assert by_name["Age"] == {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
    assert columns[-1]["name"] == "Age"
    if kind == "paddlejob":
        assert [c["name"] for c in columns] == ["Status", "Mode", "State", "Age"]
        assert by_name["Status"]["jsonPath"] == ".status.phase"
        assert by_name["Mode"]["jsonPath"] == ".status.mode"


@pytest.mark.parametrize("kind", KINDS)
def test_schema_is_structural(kind: str) -> None:
    for path, node in walk(schema(kind)):
        if node.get("x-kubernetes-int-or-string"):
            assert node.get("anyOf") == [{"type": "integer"}, {"type": "string"}], path
            continue
        assert node.get("type") in {"object", "array", "string", "integer", "boolean"}, path
        assert not ("properties" in node and "additionalProperties" in node), path
        if node["type"] == "array":
            assert "items" in node, path
        for key in ("oneOf", "allOf", "not", "nullable"):
            assert key not in node, path


@pytest.mark.parametrize("kind", KINDS)
def test_every_field_is_described(kind: str) -> None:
    # kubectl explain is the API reference users reach first.
    for part in ("spec", "status"):
        for path, node in walk(at(schema(kind), part), part):
            if node.get("x-kubernetes-int-or-string"):
                continue
            if ".template.spec." in path or re.search(r"\.template\.metadata\.\w+(\.\*|\[\])$", path):
                # The pod API's own schema, without its text (gen_crds.podtemplate says why).
                continue
            assert node.get("description"), f"{kind} {path} has no description"


@pytest.mark.parametrize("kind", KINDS)
def test_only_autoscaler_metrics_preserve_unknown_fields(kind: str) -> None:
    # autoscaling/v2 MetricSpecs go to an autoscaler as written; everything else is typed and pruned.
    kept = [path for path, node in walk(schema(kind)) if node.get("x-kubernetes-preserve-unknown-fields")]
    assert all(path.endswith(".elasticPolicy.metrics[]") for path in kept), kept


def _replica_specs(kind: str) -> list[dict[str, Any]]:
    spec = spec_of(kind)
    return {
        "tfjob": lambda: [at(spec, "tfReplicaSpecs", "*")],
        "mxjob": lambda: [at(spec, "mxReplicaSpecs", "*")],
        "pytorchjob": lambda: [at(spec, "pytorchReplicaSpecs", "*")],
        "xgboostjob": lambda: [at(spec, "xgbReplicaSpecs", "*")],
        "jaxjob": lambda: [at(spec, "jaxReplicaSpecs", "*")],
        "kubeflow_paddlejob": lambda: [at(spec, "paddleReplicaSpecs", "*")],
        "mpijob": lambda: [at(spec, "mpiReplicaSpecs", "*")],
        "paddlejob": lambda: [at(spec, r) for r in ("ps", "worker", "heter")],
        "caffe2job": lambda: [at(spec, "replicaSpecs")],
    }[kind]()


@pytest.mark.parametrize("kind", KINDS)
def test_replica_specs(kind: str) -> None:
    for rs in _replica_specs(kind):
        replicas = at(rs, "replicas")
        assert (replicas["type"], replicas["format"], replicas["minimum"]) == ("integer", "int32", 0)
        policy = at(rs, "restartPolicy")
        assert policy["enum"] == ["Always", "OnFailure", "Never", "ExitCode"]
        if kind == "paddlejob":
            # paddle-operator has no replicas default, and its restart default depends on the job.
            assert "default" not in replicas and "default" not in policy
            assert rs["required"] == ["replicas", "template"]
        elif kind == "mpijob":
            # Launcher 1 and Worker 0, applied by the operator as upstream's defaulter does.
            assert "default" not in replicas
            assert rs["required"] == ["template"]
        else:
            assert replicas["default"] == 1
            assert rs["required"] == ["template"]
        if kind in ("tfjob", "mxjob", "xgboostjob", "jaxjob", "mpijob"):
            assert policy["default"] == "Never"
        elif kind in ("pytorchjob", "kubeflow_paddlejob"):
            assert policy["default"] == "OnFailure"
        else:
            # Upstream falls back to the pod template's restartPolicy, which a default would hide.
            assert "default" not in policy
        template = at(rs, "template")
        assert "x-kubernetes-preserve-unknown-fields" not in template
        assert set(at(template, "metadata")["properties"]) == {
            "annotations",
            "finalizers",
            "labels",
            "name",
            "namespace",
        }


@pytest.mark.parametrize("kind", KINDS)
def test_pod_templates_are_typed_as_the_pinned_kubernetes_pod_api(kind: str) -> None:
    # The typo of issue #15 (resources.limit for limits) has nowhere to hide.
    for rs in _replica_specs(kind):
        pod = at(rs, "template", "spec")
        assert pod["required"] == ["containers"]
        containers = at(pod, "containers")
        assert (containers["x-kubernetes-list-type"], containers["x-kubernetes-list-map-keys"]) == (
            "map",
            ["name"],
        )
        resources = at(containers, "[]", "resources")
        assert set(resources["properties"]) >= {"limits", "requests", "claims"}
        assert at(resources, "limits", "*")["x-kubernetes-int-or-string"] is True
        port = at(containers, "[]", "ports", "[]")
        assert (port["required"], at(port, "protocol")["default"]) == (["containerPort"], "TCP")
        claim_metadata = at(pod, "volumes", "[]", "ephemeral", "volumeClaimTemplate", "metadata")
        assert claim_metadata["properties"] == at(rs, "template", "metadata")["properties"]


# (kind, map field, replica types, the types whose key the CRD takes in any ASCII case). Upstream
# admits those and its defaulter camel-cases them (setTypeNameToCamelCase): training-operator's
# TFJob webhook does not look at the keys, and v1.8's MXJob webhook only warns (its defaulter
# renames Scheduler, Server and Worker, not the tuner types). The PyTorchJob, XGBoostJob, JAXJob
# and PaddleJob webhooks refuse any other spelling before defaulting (slices.Contains), and
# MPIJob renames nothing (ValidateV1MpiJobSpec wants them exact).
REPLICA_MAPS = [
    (
        "tfjob",
        "tfReplicaSpecs",
        ["Chief", "Master", "PS", "Worker", "Evaluator"],
        ["Chief", "Master", "PS", "Worker", "Evaluator"],
    ),
    (
        "mxjob",
        "mxReplicaSpecs",
        ["Scheduler", "Server", "Worker", "TunerTracker", "TunerServer", "Tuner"],
        ["Scheduler", "Server", "Worker"],
    ),
    ("pytorchjob", "pytorchReplicaSpecs", ["Master", "Worker"], []),
    ("xgboostjob", "xgbReplicaSpecs", ["Master", "Worker"], []),
    ("jaxjob", "jaxReplicaSpecs", ["Worker"], []),
    ("kubeflow_paddlejob", "paddleReplicaSpecs", ["Master", "Worker"], []),
    ("mpijob", "mpiReplicaSpecs", ["Launcher", "Worker"], []),
]


def _cel_list(items: list[str]) -> str:
    return "[" + ", ".join(f"'{i}'" for i in items) + "]"


@pytest.mark.parametrize(("kind", "field", "types", "any_case"), REPLICA_MAPS)
def test_replica_spec_maps(kind: str, field: str, types: list[str], any_case: list[str]) -> None:
    node = at(spec_of(kind), field)
    assert node["maxProperties"] == len(types)  # bounds the CEL cost of rules over the map
    assert field in spec_of(kind)["required"]
    [keys] = [r for r in rules(node) if "keys must be replica types" in r["message"]]
    exact = [t for t in types if t not in any_case]
    assert (f"k in {_cel_list(exact)}" in keys["rule"]) == bool(exact)
    assert (f"k.lowerAscii() in {_cel_list([t.lower() for t in any_case])}" in keys["rule"]) == bool(any_case)
    assert ("(in any case)" in keys["message"]) == bool(any_case)
    assert ("(case-sensitive)" in keys["message"]) == bool(exact)
    # Two keys folding to one type (worker and Worker) are refused by name, where keys fold.
    twice = [r for r in rules(node) if "names a replica type twice" in r["message"]]
    assert len(twice) == (1 if any_case else 0)
    assert ("may be written in any case" in node["description"]) == bool(any_case)
    immutable = [r for r in rules(node) if "oldSelf" in r["rule"]]
    assert len(immutable) == 1, "the replica types must be immutable"
    # A renamed key (worker to Worker) is the same replica type: only where keys fold.
    assert ("lowerAscii" in immutable[0]["rule"]) == bool(any_case)


@pytest.mark.parametrize(("kind", "field", "types", "any_case"), REPLICA_MAPS)
def test_rules_find_a_folded_type_by_any_key(
    kind: str, field: str, types: list[str], any_case: list[str]
) -> None:
    # 'Chief' in self, self['Scheduler'], 'Worker' in self.mxReplicaSpecs: each would miss a
    # chief or scheduler key, so a rule about a type that folds must look it up by lowerAscii.
    texts = [
        r["rule"] + r.get("messageExpression", "")
        for node in (schema(kind), spec_of(kind), at(spec_of(kind), field))
        for r in rules(node)
    ]
    for rtype in any_case:
        for text in texts:
            assert f"'{rtype}' in " not in text and f"['{rtype}']" not in text, (rtype, text)


@pytest.mark.parametrize(("kind", "field", "types", "any_case"), REPLICA_MAPS)
def test_the_crd_folds_only_what_the_engine_renames(
    kind: str, field: str, types: list[str], any_case: list[str]
) -> None:
    # A key the CRD admits in another case must run as upstream runs it (tests/unit/test_replica_keys.py).
    profile = PROFILES[kind]
    assert profile.replica_specs_field == field
    assert set(profile.replica_types) == set(types)
    assert set(any_case) <= set(profile.camel_cased_types)


def test_run_policy_is_shared() -> None:
    policies = [at(spec_of(kind), "runPolicy") for kind in KINDS]
    assert all(p == policies[0] for p in policies)
    rp = policies[0]
    assert at(rp, "cleanPodPolicy")["enum"] == ["None", "Running", "All"]
    for field in ("ttlSecondsAfterFinished", "activeDeadlineSeconds", "backoffLimit"):
        assert at(rp, field)["minimum"] == 0, field
    assert at(rp, "activeDeadlineSeconds")["format"] == "int64"
    assert at(rp, "suspend") == {**at(rp, "suspend"), "type": "boolean", "default": False}
    assert at(rp, "managedBy")["enum"] == ["kubeflow.org/training-operator", "kueue.x-k8s.io/multikueue"]
    sp = at(rp, "schedulingPolicy")
    assert set(sp["properties"]) == {
        "minAvailable",
        "queue",
        "minResources",
        "priorityClass",
        "scheduleTimeoutSeconds",
    }
    assert [r["rule"] for r in rules(at(sp, "queue"))] == ["self == oldSelf"]
    assert at(sp, "minResources")["additionalProperties"]["x-kubernetes-int-or-string"] is True
    for kind in KINDS:
        # managedBy may not even be added or removed, which only a rule on spec can see.
        assert any("oldSelf.runPolicy.managedBy" in r["rule"] for r in rules(spec_of(kind))), kind


@pytest.mark.parametrize("kind", KINDS)
def test_status(kind: str) -> None:
    status = at(schema(kind), "status")
    condition = at(status, "conditions", "[]")
    assert set(condition["properties"]) == {
        "type",
        "status",
        "reason",
        "message",
        "lastUpdateTime",
        "lastTransitionTime",
    }
    assert condition["required"] == ["type", "status"]
    assert set(at(status, "replicaStatuses", "*")["properties"]) == {
        "active",
        "succeeded",
        "failed",
        "selector",
    }
    for field in ("startTime", "completionTime", "lastReconcileTime"):
        assert at(status, field)["format"] == "date-time"
    assert at(status, "restartCount")["type"] == "integer"
    if kind == "paddlejob":
        for role in ("ps", "worker", "heter"):
            assert set(at(status, role)["properties"]) == {
                "pending",
                "starting",
                "running",
                "failed",
                "succeeded",
                "unknown",
                "refs",
            }
        for field in ("phase", "mode", "elastic"):
            assert at(status, field)["type"] == "string"
        assert at(status, "observedGeneration")["format"] == "int64"


def test_tfjob_fields() -> None:
    spec = spec_of("tfjob")
    assert at(spec, "successPolicy")["enum"] == ["", "AllWorkers"]
    assert at(spec, "enableDynamicWorker")["type"] == "boolean"


def test_mxjob_fields() -> None:
    mode = at(spec_of("mxjob"), "jobMode")
    assert (mode["enum"], mode["default"]) == (["MXTrain", "MXTune"], "MXTrain")
    assert [r["rule"] for r in rules(mode)] == ["self == oldSelf"]


def test_paddlejob_fields() -> None:
    spec = spec_of("paddlejob")
    assert at(spec, "intranet")["enum"] == ["PodIP", "Service", "Host"]
    assert at(spec, "intranet")["default"] == "PodIP"
    assert at(spec, "withGloo")["enum"] == [0, 1, 2]
    assert at(spec, "cleanPodPolicy")["enum"] == ["Always", "Never", "OnFailure", "OnCompletion"]
    assert at(spec, "elastic")["type"] == "integer"
    assert set(at(spec, "schedulingPolicy")["properties"]) == {
        "minAvailable",
        "queue",
        "priorityClass",
        "minResources",
    }
    for role in ("ps", "worker", "heter"):
        assert at(spec, role, "requests")["minimum"] == 0
        assert at(spec, role, "limits")["minimum"] == 0
    spec_rules = " ".join(r["rule"] for r in rules(spec))
    assert "oldSelf.withGloo" in spec_rules and "oldSelf.intranet" in spec_rules


def test_caffe2job_fields() -> None:
    spec = spec_of("caffe2job")
    backend = at(spec, "backendSpecs")
    assert at(backend, "backendType")["enum"] == ["none", "redis", "nfs"]
    assert at(backend, "manageRedis")["default"] is False
    assert at(backend, "redisPort")["type"] == "integer"
    for field in ("redisHost", "nfsPath", "redisImage"):
        assert at(backend, field)["type"] == "string"
    chief = at(spec, "terminationPolicy", "chief")
    assert set(chief["properties"]) == {"replicaName", "replicaIndex"}
    assert at(spec, "terminationPolicy", "allWorkers")["type"] == "boolean"
    assert spec["required"] == ["replicaSpecs"]
    assert any("oldSelf.backendSpecs" in r["rule"] for r in rules(spec))
    assert any("Invalid backend for multiple pods" in r["message"] for r in rules(spec))


@pytest.mark.parametrize("kind", KINDS)
def test_job_name_rules(kind: str) -> None:
    root = schema(kind)
    assert root["required"] == ["spec"]
    messages = [r["message"] for r in rules(root)]
    assert any("DNS-1035" in m for m in messages)
    assert any("shorten metadata.name" in m for m in messages)


@pytest.mark.parametrize("kind", KINDS)
def test_every_rule_tells_what_to_change(kind: str) -> None:
    for path, node in walk(schema(kind)):
        for r in rules(node):
            # "<what is wrong>: <what to do>" (or the upstream wording "Invalid backend ...").
            assert ":" in r["message"], f"{kind} {path}: {r['message']}"


# --- admission policies ------------------------------------------------------------------------


def _admission() -> dict[str, list[dict[str, Any]]]:
    return {
        p.stem: list(yaml.load_all(Loader=FAST, stream=p.read_text()))
        for p in sorted(ADMISSION.glob("*.yaml"))
        if p.name != "kustomization.yaml"
    }


@pytest.mark.parametrize("kind", KINDS)
def test_admission_policy_per_kind(kind: str) -> None:
    policy, binding = _admission()[kind]
    crd = CRDS[kind]
    assert policy["apiVersion"] == binding["apiVersion"] == "admissionregistration.k8s.io/v1"
    assert (policy["kind"], binding["kind"]) == (
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    )
    assert binding["spec"] == {"policyName": policy["metadata"]["name"], "validationActions": ["Deny"]}
    assert policy["spec"]["failurePolicy"] == "Fail"
    [resources] = policy["spec"]["matchConstraints"]["resourceRules"]
    assert resources == {
        "apiGroups": [crd["spec"]["group"]],
        "apiVersions": [crd["spec"]["versions"][0]["name"]],
        "operations": ["CREATE", "UPDATE"],
        "resources": [crd["spec"]["names"]["plural"]],
    }
    expressions = " ".join(v["expression"] for v in policy["spec"]["validations"])
    assert "c.image" in expressions
    profile = PROFILES[kind]
    if profile.requires_default_container:
        assert f"c.name == '{profile.default_container}'" in expressions
    else:
        # PaddleFlow, Caffe2 and MPIJob do not require a container name
        assert "c.name ==" not in expressions
    for v in policy["spec"]["validations"]:
        assert v["message"] and v["messageExpression"] and v["reason"] == "Invalid"


@pytest.mark.parametrize(("kind", "field", "types", "any_case"), REPLICA_MAPS)
def test_admission_policy_finds_the_containers_of_any_key(
    kind: str, field: str, types: list[str], any_case: list[str]
) -> None:
    # The policy runs after the CRD admitted the keys: a key in another case (worker) must find
    # its containers, not fail the policy with "no such key" (failurePolicy Fail refuses the job).
    policy, _ = _admission()[kind]
    variables = {v["name"]: v["expression"] for v in policy["spec"]["variables"]}
    assert variables["present"] == f"object.spec.{field}"
    lookup = "variables.containers[k.lowerAscii()]" if any_case else "variables.containers[k]"
    for t in types:
        key = t.lower() if any_case else t
        assert f"'{key}':" in variables["containers"], t
    for v in policy["spec"]["validations"]:
        used = re.findall(r"variables\.containers\[[^\]]*\]", v["expression"] + v["messageExpression"])
        assert used and set(used) == {lookup}, v["expression"]
    for t in any_case:
        assert f"k.lowerAscii() == '{t.lower()}'" in variables["containers"], t


# --- samples -----------------------------------------------------------------------------------


def violations(value: Any, node: dict[str, Any], path: str) -> list[str]:  # noqa: C901 (one branch per schema keyword)
    """Where ``value`` breaks ``node``: the parts of a structural schema our CRDs use."""
    if node.get("x-kubernetes-int-or-string"):
        ok = isinstance(value, str | int) and not isinstance(value, bool)
        return [] if ok else [f"{path}: not an int or string"]
    kind = node["type"]
    problems: list[str] = []
    if kind == "object":
        if not isinstance(value, dict):
            return [f"{path}: not an object"]
        props = node.get("properties") or {}
        for key, child in value.items():
            if key in props:
                problems += violations(child, props[key], f"{path}.{key}")
            elif "additionalProperties" in node:
                problems += violations(child, node["additionalProperties"], f"{path}.{key}")
            elif not node.get("x-kubernetes-preserve-unknown-fields"):
                problems.append(f"{path}.{key}: unknown field")
        problems += [f"{path}.{key}: required" for key in node.get("required") or [] if key not in value]
        if "maxProperties" in node and len(value) > node["maxProperties"]:
            problems.append(f"{path}: too many properties")
    elif kind == "array":
        if not isinstance(value, list):
            return [f"{path}: not an array"]
        for i, item in enumerate(value):
            problems += violations(item, node["items"], f"{path}[{i}]")
    elif kind == "string":
        if not isinstance(value, str):
            return [f"{path}: not a string"]
        if "maxLength" in node and len(value) > node["maxLength"]:
            problems.append(f"{path}: too long")
    elif kind == "integer":
        if not isinstance(value, int) or isinstance(value, bool):
            return [f"{path}: not an integer"]
        if "minimum" in node and value < node["minimum"]:
            problems.append(f"{path}: below minimum")
        if "maximum" in node and value > node["maximum"]:
            problems.append(f"{path}: above maximum")
    elif kind == "boolean" and not isinstance(value, bool):
        return [f"{path}: not a boolean"]
    if "enum" in node and value not in node["enum"]:
        problems.append(f"{path}: {value!r} not in {node['enum']}")
    return problems


def sample_violations(job: dict[str, Any]) -> list[str]:
    root = schema(profile_of(job).name)
    # Object metadata is the API server's to validate.
    job = {**job, "metadata": {}}
    return violations(job, root, "")


SAMPLE_FILES = sorted(p for p in SAMPLES.glob("*.yaml") if p.name != "kustomization.yaml")


def _sample(path: Path) -> dict[str, Any]:
    [job] = list(yaml.load_all(Loader=FAST, stream=path.read_text()))
    return job


def _templates(job: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Pod templates of a job by replica type."""
    spec = job["spec"]
    profile = profile_of(job)
    if profile.name == "paddlejob":
        specs = {r: spec[r] for r in ("ps", "worker", "heter") if r in spec}
    elif profile.name == "caffe2job":
        specs = {"replicaSpecs": spec["replicaSpecs"]}
    else:
        specs = spec[profile.replica_specs_field]
    return {rtype: rs["template"] for rtype, rs in specs.items()}


def test_the_validator_sees_unknown_fields_and_bad_values() -> None:
    job = _sample(SAMPLES / "tfjob_dist.yaml")
    job["spec"]["tfReplicaSpecs"]["Worker"]["replica"] = 2
    job["spec"]["runPolicy"]["cleanPodPolicy"] = "Sometimes"
    job["spec"]["tfReplicaSpecs"]["PS"]["replicas"] = -1
    assert sample_violations(job) == [
        ".spec.runPolicy.cleanPodPolicy: 'Sometimes' not in ['None', 'Running', 'All']",
        ".spec.tfReplicaSpecs.PS.replicas: below minimum",
        ".spec.tfReplicaSpecs.Worker.replica: unknown field",
    ]


def test_every_kind_has_a_sample() -> None:
    assert {profile_of(_sample(p)).name for p in SAMPLE_FILES} == set(KINDS)


@pytest.mark.parametrize("path", SAMPLE_FILES, ids=lambda p: p.name)
def test_sample_uses_only_declared_fields(path: Path) -> None:
    job = _sample(path)
    crd = CRDS[profile_of(job).name]
    assert job["apiVersion"] == f"{crd['spec']['group']}/{crd['spec']['versions'][0]['name']}"
    assert sample_violations(job) == []


@pytest.mark.parametrize("path", SAMPLE_FILES, ids=lambda p: p.name)
def test_sample_passes_the_admission_rules(path: Path) -> None:
    job = _sample(path)
    name = job["metadata"]["name"]
    assert DNS1035.match(name)
    profile = profile_of(job)
    # The kinds with a replica-spec map need their framework's container (the admission policy).
    named = profile.default_container if profile.replica_specs_field else None
    for rtype, template in _templates(job).items():
        containers = template["spec"]["containers"]
        assert containers, rtype
        assert all(c.get("image") for c in containers), rtype
        if named:
            assert named in [c["name"] for c in containers], rtype
    assert "namespace" not in job["metadata"]


@pytest.mark.parametrize("path", SAMPLE_FILES, ids=lambda p: p.name)
def test_sample_uses_fake_images_and_gpus_only_when_named_so(path: Path) -> None:
    job = _sample(path)
    for template in _templates(job).values():
        for c in template["spec"]["containers"]:
            assert c["image"].startswith("docker.io/library/busybox:"), c["image"]
    redis_image = job["spec"].get("backendSpecs", {}).get("redisImage")
    assert redis_image is None or redis_image.startswith("docker.io/library/busybox:")
    asks_for_gpus = "nvidia.com/gpu" in path.read_text()
    assert asks_for_gpus == ("gpu" in path.stem), path.name


def test_the_gpu_samples() -> None:
    assert [p.name for p in SAMPLE_FILES if "nvidia.com/gpu" in p.read_text()] == [
        "caffe2job_gpu.yaml",
        "jaxjob_gpu.yaml",
        "kubeflow_paddlejob_simple_gpu.yaml",
        "mpijob_gpu.yaml",
        "mxjob_gpu.yaml",
        "paddlejob_resnet_gpu.yaml",
        "pytorchjob_elastic_gpu.yaml",
        "tfjob_smoke_gpu.yaml",
        "xgboostjob_gpu.yaml",
    ]


def test_sample_names_are_unique_per_kind() -> None:
    seen = [(profile_of(_sample(p)).name, _sample(p)["metadata"]["name"]) for p in SAMPLE_FILES]
    assert len(seen) == len(set(seen))
