"""The operator-level accelerators config of tf-operator (seed 004).

Rows marked "helpers_test.go" are the three cases of tf-operator v0.1.0
``pkg/apis/tensorflow/helper/helpers_test.go`` ``TestAddAccelertor`` (requests, limits, no GPU);
the "README" row uses the GKE config of the mlkube.io README (seed 004).
"""

from __future__ import annotations

import copy

import pytest
from hypothesis import given
from hypothesis import strategies as st
from training_jobs.contracts import accelerators as acc

CUDA = {
    "nvidia-gpu": {
        "volumes": [{"name": "cuda-lib", "hostPath": "/home/cuda", "mountPath": "/usr/local/cuda"}]
    }
}
CUDA_MOUNT = {"name": "cuda-lib", "mountPath": "/usr/local/cuda"}
CUDA_VOLUME = {"name": "cuda-lib", "hostPath": {"path": "/home/cuda"}}


def tf_container(**resources):
    return {"name": "tensorflow", "resources": resources}


@pytest.mark.parametrize(
    ("case", "spec", "config", "names", "expected"),
    [
        # helpers_test.go case 1: a resource in requests is enough.
        (
            "requests",
            {"containers": [tf_container(requests={"nvidia-gpu": "1"})]},
            CUDA,
            None,
            {
                "containers": [{**tf_container(requests={"nvidia-gpu": "1"}), "volumeMounts": [CUDA_MOUNT]}],
                "volumes": [CUDA_VOLUME],
            },
        ),
        # helpers_test.go case 2: so is a resource in limits.
        (
            "limits",
            {"containers": [tf_container(limits={"nvidia-gpu": "1"})]},
            CUDA,
            None,
            {
                "containers": [{**tf_container(limits={"nvidia-gpu": "1"}), "volumeMounts": [CUDA_MOUNT]}],
                "volumes": [CUDA_VOLUME],
            },
        ),
        # helpers_test.go case 3: no GPU, nothing changes.
        (
            "no GPU",
            {"containers": [{"name": "tensorflow"}]},
            CUDA,
            None,
            {"containers": [{"name": "tensorflow"}]},
        ),
        # README: GKE's driver libraries and debug tools for alpha.kubernetes.io/nvidia-gpu.
        (
            "README GKE config",
            {
                "containers": [tf_container(limits={"alpha.kubernetes.io/nvidia-gpu": 1})],
                "restartPolicy": "OnFailure",
            },
            {
                "alpha.kubernetes.io/nvidia-gpu": {
                    "volumes": [
                        {
                            "name": "nvidia-libraries",
                            "mountPath": "/usr/local/nvidia/lib64",
                            "hostPath": "/home/kubernetes/bin/nvidia/lib",
                        },
                        {
                            "name": "nvidia-debug-tools",
                            "mountPath": "/usr/local/bin/nvidia",
                            "hostPath": "/home/kubernetes/bin/nvidia/bin",
                        },
                    ]
                }
            },
            None,
            {
                "containers": [
                    {
                        **tf_container(limits={"alpha.kubernetes.io/nvidia-gpu": 1}),
                        "volumeMounts": [
                            {"name": "nvidia-libraries", "mountPath": "/usr/local/nvidia/lib64"},
                            {"name": "nvidia-debug-tools", "mountPath": "/usr/local/bin/nvidia"},
                        ],
                    }
                ],
                "restartPolicy": "OnFailure",
                "volumes": [
                    {"name": "nvidia-libraries", "hostPath": {"path": "/home/kubernetes/bin/nvidia/lib"}},
                    {"name": "nvidia-debug-tools", "hostPath": {"path": "/home/kubernetes/bin/nvidia/bin"}},
                ],
            },
        ),
        # envVars are appended after the container's own; a variable it sets keeps its value.
        (
            "env vars, user value wins",
            {
                "containers": [
                    {
                        **tf_container(limits={"nvidia.com/gpu": 1}),
                        "env": [{"name": "LD_LIBRARY_PATH", "value": "/mine"}],
                    }
                ]
            },
            {
                "nvidia.com/gpu": {
                    "envVars": [
                        {"name": "LD_LIBRARY_PATH", "value": "/usr/local/nvidia/lib64"},
                        {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
                    ]
                }
            },
            None,
            {
                "containers": [
                    {
                        **tf_container(limits={"nvidia.com/gpu": 1}),
                        "env": [
                            {"name": "LD_LIBRARY_PATH", "value": "/mine"},
                            {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
                        ],
                    }
                ]
            },
        ),
        # Upstream only configured the tensorflow container; container_names reproduces that.
        (
            "only the named container",
            {
                "containers": [
                    tf_container(limits={"nvidia-gpu": 1}),
                    {**tf_container(limits={"nvidia-gpu": 1}), "name": "side"},
                ]
            },
            CUDA,
            ["tensorflow"],
            {
                "containers": [
                    {**tf_container(limits={"nvidia-gpu": 1}), "volumeMounts": [CUDA_MOUNT]},
                    {**tf_container(limits={"nvidia-gpu": 1}), "name": "side"},
                ],
                "volumes": [CUDA_VOLUME],
            },
        ),
        # Two GPU containers share one pod volume; two resources naming the same volume add it once.
        (
            "volume added once per pod",
            {
                "containers": [
                    tf_container(limits={"nvidia-gpu": 1, "nvidia.com/gpu": 1}),
                    {**tf_container(requests={"nvidia-gpu": 1}), "name": "second"},
                ]
            },
            {**CUDA, "nvidia.com/gpu": CUDA["nvidia-gpu"]},
            None,
            {
                "containers": [
                    {
                        **tf_container(limits={"nvidia-gpu": 1, "nvidia.com/gpu": 1}),
                        "volumeMounts": [CUDA_MOUNT],
                    },
                    {
                        **tf_container(requests={"nvidia-gpu": 1}),
                        "name": "second",
                        "volumeMounts": [CUDA_MOUNT],
                    },
                ],
                "volumes": [CUDA_VOLUME],
            },
        ),
        # The config's Go structs have no JSON tags, so upstream matched keys ignoring case.
        (
            "field names ignore case",
            {"containers": [tf_container(limits={"nvidia-gpu": 1})]},
            {
                "nvidia-gpu": {
                    "Volumes": [
                        {"Name": "cuda-lib", "HostPath": "/home/cuda", "MountPath": "/usr/local/cuda"}
                    ]
                }
            },
            None,
            {
                "containers": [{**tf_container(limits={"nvidia-gpu": 1}), "volumeMounts": [CUDA_MOUNT]}],
                "volumes": [CUDA_VOLUME],
            },
        ),
        # A path the user already mounts, or a volume name already used, is left to the user.
        (
            "user's mount path and volume name kept",
            {
                "containers": [
                    {
                        **tf_container(limits={"nvidia-gpu": 1}),
                        "volumeMounts": [{"name": "mine", "mountPath": "/usr/local/cuda"}],
                    }
                ],
                "volumes": [{"name": "cuda-lib", "emptyDir": {}}],
            },
            CUDA,
            None,
            {
                "containers": [
                    {
                        **tf_container(limits={"nvidia-gpu": 1}),
                        "volumeMounts": [{"name": "mine", "mountPath": "/usr/local/cuda"}],
                    }
                ],
                "volumes": [{"name": "cuda-lib", "emptyDir": {}}],
            },
        ),
    ],
)
def test_apply(case, spec, config, names, expected):
    before = copy.deepcopy(spec)
    assert acc.apply(spec, config, names) == expected
    assert spec == before


resources = st.sampled_from(["nvidia-gpu", "nvidia.com/gpu", "cpu", "example.com/fpga"])
configs = st.dictionaries(
    resources,
    st.fixed_dictionaries(
        {
            "volumes": st.lists(
                st.fixed_dictionaries(
                    {
                        "name": st.sampled_from(["lib", "bin", "cuda"]),
                        "hostPath": st.sampled_from(["/h/lib", "/h/bin"]),
                        "mountPath": st.sampled_from(["/m/lib", "/m/bin", "/m/cuda"]),
                    }
                ),
                max_size=3,
            ),
            "envVars": st.lists(
                st.fixed_dictionaries({"name": st.sampled_from(["A", "B"]), "value": st.text(max_size=3)}),
                max_size=2,
            ),
        }
    ),
)
containers = st.lists(
    st.fixed_dictionaries(
        {
            "name": st.sampled_from(["tensorflow", "side"]),
            "resources": st.fixed_dictionaries(
                {
                    "limits": st.dictionaries(resources, st.just("1")),
                    "requests": st.dictionaries(resources, st.just("1")),
                }
            ),
        }
    ),
    max_size=3,
)


@given(containers=containers, config=configs)
def test_apply_is_idempotent_and_pure(containers, config):
    spec = {"containers": containers}
    before = copy.deepcopy(spec)
    once = acc.apply(spec, config)
    assert spec == before
    assert acc.apply(once, config) == once
    # Every configured resource a container asks for ends up mounted at its paths.
    for c in once["containers"]:
        paths = {m["mountPath"] for m in c.get("volumeMounts", [])}
        limits, requests = (
            (c.get("resources") or {}).get("limits") or {},
            (c.get("resources") or {}).get("requests") or {},
        )
        for name in (set(limits) | set(requests)) & set(config):
            assert {v["mountPath"] for v in config[name]["volumes"]} <= paths
