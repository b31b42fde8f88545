"""Replica-type keys written in another case (issue 28), in the engine.

training-operator's defaulters rename some keys of a replica-spec map from any case before the
job is reconciled (``setTypeNameToCamelCase``, ``strings.EqualFold``; in memory, the stored job
keeps the user's keys): v1.9's ``setTensorflowTypeNamesToCamelCase``, ``setPyTorch…``,
``setXGBoostJob…``, ``setJAX…``, ``setPaddle…`` and v1.8's ``setMXNetTypeNamesToCamelCase``
(Scheduler, Server and Worker only). ``SetDefaults_MPIJob`` renames nothing. Such a job must run
exactly as the job written with the camel-cased keys: the same pods, services, labels, env,
status keys and verdicts. Which of these keys the API admits is the CRD's (tests/unit/test_crds.py,
tests/cluster/test_admission.py).
"""

from __future__ import annotations

import copy

import pytest
from training_jobs import conditions as cond
from training_jobs.plan import plan
from training_jobs.registry import profile_of

NOW = "2026-11-23T10:00:00Z"
LATER = "2026-11-23T10:00:30Z"

FIELDS = {
    "TFJob": ("tfReplicaSpecs", "tensorflow"),
    "MXJob": ("mxReplicaSpecs", "mxnet"),
    "PyTorchJob": ("pytorchReplicaSpecs", "pytorch"),
    "XGBoostJob": ("xgbReplicaSpecs", "xgboost"),
    "JAXJob": ("jaxReplicaSpecs", "jax"),
    "PaddleJob": ("paddleReplicaSpecs", "paddle"),
    "MPIJob": ("mpiReplicaSpecs", "mpi"),
}


def job(kind: str, replicas: dict[str, int], spelled: dict[str, str] | None = None) -> dict:
    """A ``kind`` job with ``replicas`` by replica type, each key written as ``spelled`` says."""
    field, container = FIELDS[kind]
    specs = {
        (spelled or {}).get(rtype, rtype): {
            "replicas": n,
            "template": {"spec": {"containers": [{"name": container, "image": "busybox"}]}},
        }
        for rtype, n in replicas.items()
    }
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": kind,
        "metadata": {"name": "job", "namespace": "ns", "uid": "uid-1", "creationTimestamp": NOW},
        "spec": {field: specs},
    }


def created(cr: dict) -> tuple[dict, dict]:
    """Run passes until the engine creates nothing more: the job's objects as it wants them."""
    cr = copy.deepcopy(cr)
    observed: dict = {"pods": [], "services": [], "configmaps": []}
    for _ in range(3):
        result = plan(cr, observed, {}, NOW)
        if result["status"] is not None:
            cr["status"] = result["status"]
        if not result["create"]:
            break
        for obj in result["create"]:
            observed.setdefault(obj["kind"].lower() + "s", []).append(obj)
    return cr, observed


def in_phase(pods: list[dict], phase: str) -> list[dict]:
    out = copy.deepcopy(pods)
    for p in out:
        p["status"] = {"phase": phase}
        if phase == "Succeeded":
            p["status"]["containerStatuses"] = [
                {"name": c["name"], "state": {"terminated": {"exitCode": 0}}, "restartCount": 0}
                for c in p["spec"]["containers"]
            ]
    return out


def passes(cr: dict) -> list[dict]:
    """Every pass of a life: creation, all pods running, all pods succeeded."""
    cr, observed = created(cr)
    first = plan(cr, {"pods": [], "services": [], "configmaps": []}, {}, NOW)
    return [first] + [
        plan(cr, {**observed, "pods": in_phase(observed["pods"], phase)}, {}, LATER)
        for phase in ("Running", "Succeeded")
    ]


# (id, kind, replicas by type, keys as written). Every type a kind's defaulter renames, in
# lower, upper and mixed case, and jobs mixing written and canonical keys.
RENAMED = [
    ("tfjob ps and worker", "TFJob", {"PS": 1, "Worker": 2}, {"PS": "ps", "Worker": "worker"}),
    (
        "tfjob chief and evaluator",
        "TFJob",
        {"Chief": 1, "Evaluator": 1, "Worker": 1},
        {"Chief": "CHIEF", "Evaluator": "evaluator", "Worker": "wOrKeR"},
    ),
    ("tfjob master", "TFJob", {"Master": 1, "PS": 2}, {"Master": "master"}),
    (
        "mxjob scheduler, server, worker",
        "MXJob",
        {"Scheduler": 1, "Server": 1, "Worker": 2},
        {"Scheduler": "scheduler", "Server": "SERVER", "Worker": "worker"},
    ),
    ("pytorchjob", "PyTorchJob", {"Master": 1, "Worker": 2}, {"Master": "master", "Worker": "worker"}),
    ("xgboostjob", "XGBoostJob", {"Master": 1, "Worker": 2}, {"Master": "MASTER", "Worker": "worker"}),
    ("jaxjob", "JAXJob", {"Worker": 2}, {"Worker": "worker"}),
    ("paddlejob", "PaddleJob", {"Master": 1, "Worker": 2}, {"Master": "master", "Worker": "Worker"}),
]


@pytest.mark.parametrize(
    ("kind", "replicas", "spelled"), [pytest.param(k, r, s, id=i) for i, k, r, s in RENAMED]
)
def test_a_renamed_key_runs_as_the_camel_cased_job(kind, replicas, spelled):
    written = passes(job(kind, replicas, spelled))
    assert written == passes(job(kind, replicas))
    # Upstream writes the status of the defaulted job: keyed by the camel-cased types.
    assert set(written[-1]["status"]["replicaStatuses"]) == set(replicas)
    assert written[-1]["status"]["conditions"][-1]["type"] == cond.SUCCEEDED


def test_tfjob_with_ps_and_worker_keys_as_upstream_runs_it():
    """The issue's job, spelled out: what training-operator v1.9 creates for it."""
    result = plan(job("TFJob", {"PS": 1, "Worker": 2}, {"PS": "ps", "Worker": "worker"}), {}, {}, NOW)
    pods = {p["metadata"]["name"]: p for p in result["create"] if p["kind"] == "Pod"}
    assert sorted(pods) == ["job-ps-0", "job-worker-0", "job-worker-1"]
    services = sorted(s["metadata"]["name"] for s in result["create"] if s["kind"] == "Service")
    assert services == sorted(pods)
    labels = pods["job-worker-1"]["metadata"]["labels"]
    assert labels["training.kubeflow.org/replica-type"] == "worker"
    assert labels["training.kubeflow.org/replica-index"] == "1"
    (tf_config,) = [
        e["value"] for e in pods["job-worker-1"]["spec"]["containers"][0]["env"] if e["name"] == "TF_CONFIG"
    ]
    assert tf_config == (
        '{"cluster":{"ps":["job-ps-0.ns.svc:2222"],"worker":["job-worker-0.ns.svc:2222","job-worker-1.ns.svc:2222"]},'
        '"task":{"type":"worker","index":1},"environment":"cloud"}'
    )
    # Without a chief, worker 0 is the master role, as for the camel-cased job.
    assert pods["job-worker-0"]["metadata"]["labels"]["training.kubeflow.org/job-role"] == "master"


# (id, kind, keys, expected part of the FailedValidation message).
REFUSED = [
    # SetDefaults_MPIJob renames nothing and ValidateV1MpiJobSpec wants the keys exact.
    ("mpijob launcher", "MPIJob", {"launcher": 1, "Worker": 1}, "unknown replica type(s) launcher"),
    ("mpijob worker", "MPIJob", {"Launcher": 1, "worker": 1}, "unknown replica type(s) worker"),
    # setMXNetTypeNamesToCamelCase leaves the tuner types alone.
    ("mxjob tuner", "MXJob", {"TunerServer": 1, "tuner": 1}, "unknown replica type(s) tuner"),
    # Upstream would keep either spec, by Go's map order, and drop the other.
    (
        "tfjob worker and Worker",
        "TFJob",
        {"Worker": 1, "worker": 2},
        "tfReplicaSpecs has both 'Worker' and 'worker': both name the replica type Worker; keep one of them",
    ),
    (
        "pytorchjob master and MASTER",
        "PyTorchJob",
        {"master": 1, "MASTER": 1, "Worker": 1},
        "pytorchReplicaSpecs has both 'master' and 'MASTER'",
    ),
    # strings.EqualFold also folds the Kelvin sign into k; the CRD does not (ASCII case only).
    ("tfjob kelvin sign", "TFJob", {"Wor\u212aer": 1}, "unknown replica type(s) Wor\u212aer"),
    ("tfjob chief and master", "TFJob", {"chief": 1, "Master": 1}, "more than 1 Chief or Master"),
]


def written_job(kind: str, keys: dict[str, int]) -> dict:
    cr = job(kind, {})
    field, container = FIELDS[kind]
    cr["spec"][field] = {
        k: {"replicas": n, "template": {"spec": {"containers": [{"name": container, "image": "busybox"}]}}}
        for k, n in keys.items()
    }
    return cr


@pytest.mark.parametrize(
    ("kind", "keys", "expected"), [pytest.param(k, s, e, id=i) for i, k, s, e in REFUSED]
)
def test_a_key_upstream_does_not_rename_fails_the_job(kind, keys, expected):
    result = plan(written_job(kind, keys), {}, {}, NOW)
    assert not result["create"]
    last = result["status"]["conditions"][-1]
    assert (last["type"], last["reason"]) == (cond.FAILED, f"{kind}FailedValidation")
    assert expected in last["message"]


@pytest.mark.parametrize(
    ("kind", "renamed"),
    [
        ("TFJob", {"Chief", "Master", "PS", "Worker", "Evaluator"}),
        ("MXJob", {"Scheduler", "Server", "Worker"}),
        ("PyTorchJob", {"Master", "Worker"}),
        ("XGBoostJob", {"Master", "Worker"}),
        ("JAXJob", {"Worker"}),
        ("PaddleJob", {"Master", "Worker"}),
        ("MPIJob", set()),
    ],
)
def test_the_types_each_defaulter_renames(kind, renamed):
    profile = profile_of(job(kind, {}))
    assert set(profile.camel_cased_types) == renamed
    assert set(profile.camel_cased_types) <= set(profile.replica_types)
