"""Caffe2Job env as the final kubeflow/caffe2-operator (master 3773f5b) writes it.

caffe2-operator's unit tests predate this contract (``pkg/trainer/replicas_test.go`` tests the
removed MASTER/WORKER trainer). The "README" rows reproduce the resulting worker pod of its
README (seed 001: job ``example-job`` in ``default``, runtime id ``1529307087``, Redis backend of
``examples/resnet50_redis.yaml``); the rest follow upstream's code:

- ``pkg/controller/controller_pod.go`` ``createNewPod``: for every entry of
  ``podTemplate.Spec.Containers`` (not init containers), append ``REDIS_HOST``
  (``Backend.RedisHost``), ``REDIS_PORT`` (``strconv.Itoa(int(Backend.RedisPort))``),
  ``NFS_PATH`` (``Backend.NFSPath``), ``SHARD_ID`` (the index), ``NUM_SHARDS``
  (``fmt.Sprintf("%d", *spec.Replicas)``), ``RUN_ID`` (``Spec.RuntimeID``), then in a second loop
  ``CAFFE2_CONFIG``. No condition on ``Backend.Type``: an unset string field is ``""`` and an
  unset ``uint`` port ``"0"``.
- ``pkg/apis/caffe2/v1alpha1/defaults.go`` ``SetDefaults_Caffe2Job``: a job without
  ``backendSpecs`` gets ``{Type: none}`` (one replica) or ``{Type: redis}``, other fields zero.
- ``pkg/controller/config.go`` ``genClusterSpec``/``genGeneralName``: the hosts.
"""

from __future__ import annotations

import pytest
from training_jobs import pods
from training_jobs.contracts import caffe2
from training_jobs.profiles.base import Context
from training_jobs.registry import profile_for

REDIS = {"backendType": "redis", "redisHost": "redis-service", "redisPort": 6379}


def env(host, port, nfs, shard, shards, run_id, config):
    return [
        {"name": "REDIS_HOST", "value": host},
        {"name": "REDIS_PORT", "value": port},
        {"name": "NFS_PATH", "value": nfs},
        {"name": "SHARD_ID", "value": shard},
        {"name": "NUM_SHARDS", "value": shards},
        {"name": "RUN_ID", "value": run_id},
        {"name": "CAFFE2_CONFIG", "value": config},
    ]


@pytest.mark.parametrize(
    ("case", "replicas", "index", "backend", "expected"),
    [
        # README: the resulting single worker, CAFFE2_CONFIG verbatim from it.
        (
            "README worker",
            1,
            0,
            REDIS,
            env(
                "redis-service",
                "6379",
                "",
                "0",
                "1",
                "1529307087",
                '{"cluster":{"worker":["default-example-job-worker-0:2222"]},"task":{"type":"worker","index":0}}',
            ),
        ),
        # examples/resnet50_redis.yaml runs two replicas; the second shard.
        (
            "resnet50_redis, shard 1",
            2,
            1,
            REDIS,
            env(
                "redis-service",
                "6379",
                "",
                "1",
                "2",
                "1529307087",
                '{"cluster":{"worker":["default-example-job-worker-0:2222","default-example-job-worker-1:2222"]},'
                '"task":{"type":"worker","index":1}}',
            ),
        ),
        # redisPort is a Go uint formatted with strconv.Itoa: unset is "0", not "".
        (
            "nfs backend",
            1,
            0,
            {"backendType": "nfs", "nfsPath": "/data/nfs_share"},
            env(
                "",
                "0",
                "/data/nfs_share",
                "0",
                "1",
                "1529307087",
                '{"cluster":{"worker":["default-example-job-worker-0:2222"]},"task":{"type":"worker","index":0}}',
            ),
        ),
        # backendType none (upstream's default for one replica): the same seven, all zero.
        (
            "none backend",
            1,
            0,
            {"backendType": "none"},
            env(
                "",
                "0",
                "",
                "0",
                "1",
                "1529307087",
                '{"cluster":{"worker":["default-example-job-worker-0:2222"]},"task":{"type":"worker","index":0}}',
            ),
        ),
        # A redis backend without redisPort: Itoa of the zero uint.
        (
            "redis backend without port",
            1,
            0,
            {"backendType": "redis", "redisHost": "redis-service"},
            env(
                "redis-service",
                "0",
                "",
                "0",
                "1",
                "1529307087",
                '{"cluster":{"worker":["default-example-job-worker-0:2222"]},"task":{"type":"worker","index":0}}',
            ),
        ),
        # No backendSpecs: upstream's defaulter sets {backendType: none}, so the zero values.
        (
            "no backend",
            1,
            0,
            None,
            env(
                "",
                "0",
                "",
                "0",
                "1",
                "1529307087",
                '{"cluster":{"worker":["default-example-job-worker-0:2222"]},"task":{"type":"worker","index":0}}',
            ),
        ),
    ],
)
def test_caffe2_env(case, replicas, index, backend, expected):
    assert caffe2.caffe2_env("default", "example-job", replicas, index, "1529307087", backend) == expected


def caffe2_job(backend):
    spec = {
        "replicaSpecs": {
            "replicas": 2,
            "template": {
                "spec": {
                    "initContainers": [{"name": "fetch", "image": "busybox"}],
                    "containers": [
                        {
                            "name": "caffe2",
                            "image": "caffe2",
                            # The contract wins over a template variable of the same name.
                            "env": [{"name": "USER_VAR", "value": "u"}, {"name": "SHARD_ID", "value": "9"}],
                        },
                        {"name": "sidecar", "image": "busybox"},
                    ],
                }
            },
        }
    }
    if backend is not None:
        spec["backendSpecs"] = backend
    return {
        "apiVersion": "kubeflow.org/v1alpha1",
        "kind": "Caffe2Job",
        "metadata": {
            "name": "example-job",
            "namespace": "default",
            "uid": "u",
            "creationTimestamp": "2018-06-18T07:31:27Z",
        },
        "spec": spec,
    }


@pytest.mark.parametrize(
    ("case", "backend", "host", "port", "nfs"),
    [
        ("redis", REDIS, "redis-service", "6379", ""),
        ("nfs", {"backendType": "nfs", "nfsPath": "/data/nfs_share"}, "", "0", "/data/nfs_share"),
        ("none", {"backendType": "none"}, "", "0", ""),
        ("unset", None, "", "0", ""),
        # The operator's Redis: its Service <job>-redis on Redis' port.
        ("managed redis", {"backendType": "redis", "manageRedis": True}, "example-job-redis", "6379", ""),
    ],
)
def test_every_container_gets_all_seven(case, backend, host, port, nfs):
    profile = profile_for("kubeflow.org/v1alpha1", "Caffe2Job")
    job = profile.job(caffe2_job(backend))
    group = job.groups[0]
    pod = pods.desired_pod(profile, job, group, 1, Context(config={}, pods={}))
    config = (
        '{"cluster":{"worker":["default-example-job-worker-0:2222","default-example-job-worker-1:2222"]},'
        '"task":{"type":"worker","index":1}}'
    )
    seven = env(host, port, nfs, "1", "2", "1529307087", config)
    main, sidecar = pod["spec"]["containers"]
    assert main["env"] == [{"name": "USER_VAR", "value": "u"}, *seven]
    assert sidecar["env"] == seven
    # Upstream's loops cover Spec.Containers only.
    assert "env" not in pod["spec"]["initContainers"][0]


@pytest.mark.parametrize(
    ("namespace", "replicas", "expected"),
    [
        ("default", 2, ["default-example-job-worker-0", "default-example-job-worker-1"]),
        # The informer key of a namespace-less object is just its name.
        ("", 1, ["example-job-worker-0"]),
        ("default", 0, []),
    ],
)
def test_host_names(namespace, replicas, expected):
    assert caffe2.host_names(namespace, "example-job", replicas) == expected


@pytest.mark.parametrize(
    ("case", "job", "expected"),
    [
        # The README's runtime_id is this instant: 2018-06-18T07:31:27Z.
        ("from creationTimestamp", {"metadata": {"creationTimestamp": "2018-06-18T07:31:27Z"}}, "1529307087"),
        (
            "offset timestamps are converted to UTC",
            {"metadata": {"creationTimestamp": "2018-06-18T15:31:27+08:00"}},
            "1529307087",
        ),
        (
            "naive timestamps are read as UTC",
            {"metadata": {"creationTimestamp": "2018-06-18T07:31:27"}},
            "1529307087",
        ),
        # The untagged Go field decodes case-insensitively.
        (
            "spec.RuntimeID wins",
            {"spec": {"RuntimeID": "run-7"}, "metadata": {"creationTimestamp": "2018-06-18T07:31:27Z"}},
            "run-7",
        ),
        ("spec.runtimeId accepted", {"spec": {"runtimeId": "abc"}}, "abc"),
        (
            "empty RuntimeID falls back",
            {"spec": {"RuntimeID": ""}, "metadata": {"creationTimestamp": "1970-01-01T00:00:10Z"}},
            "10",
        ),
    ],
)
def test_run_id_for(case, job, expected):
    assert caffe2.run_id_for(job) == expected


def test_run_id_needs_a_timestamp_or_a_runtime_id():
    with pytest.raises(ValueError, match="creationTimestamp"):
        caffe2.run_id_for({"metadata": {"name": "x"}, "spec": {}})
