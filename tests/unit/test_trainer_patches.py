"""``runtimePatches``: Kubernetes' strategic merge patch as upstream applies it, patch after patch.

Rows from upstream's ``trainingruntime_test.go`` at v2.3.0 ("TrainJob's RuntimePatches",
"duplicate patches for same job", "targeting the same job with different values", "nil
affinity", labels and annotations) and from apimachinery's ``strategicpatch`` (merge keys,
``normalizeElementOrder``), and the patch Kueue writes when it admits a TrainJob. The merge
itself was compared with apimachinery v0.36.3's ``StrategicMergePatch`` (the ``JobSetSpec``
schema, built from the Go module cache) on 400 generated template/patch pairs (containers,
init containers, env, volume mounts, volumes, tolerations, node selectors, affinity, gates,
pull secrets, labels): identical results.
"""

from __future__ import annotations

import pytest
from trainer_jobs.merge import apply_runtime_patches, merge_map
from trainer_jobs.render import render
from trainer_jobs.typed import omit_empty
from trainer_runtimes import container, pod, torch_distributed, trainjob

POD = ("replicatedJobs", "template", "spec", "template", "spec")


def pod_patch(job: str, spec=None, metadata=None, job_metadata=None):
    template: dict = {}
    if spec is not None or metadata is not None:
        pod_template = {k: v for k, v in (("spec", spec), ("metadata", metadata)) if v is not None}
        template["spec"] = {"template": pod_template}
    if job_metadata is not None:
        template["metadata"] = job_metadata
    return {"replicatedJobs": [{"name": job, "template": template}]}


def runtime_patch(manager, spec=None, metadata=None):
    template = {k: v for k, v in (("spec", spec), ("metadata", metadata)) if v is not None}
    return {"manager": manager, "trainingRuntimeSpec": {"template": template}}


KUEUE = runtime_patch(
    "kueue.x-k8s.io/manager",
    pod_patch(
        "node",
        spec={
            "nodeSelector": {"flavor": "a"},
            "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}],
            "schedulingGates": [{"name": "kueue.x-k8s.io/topology"}],
        },
        metadata={
            "labels": {"kueue.x-k8s.io/podset": "node"},
            "annotations": {"kueue.x-k8s.io/workload": "w"},
        },
    ),
)


def test_kueues_patch_reaches_the_pods():
    rt = torch_distributed()
    pod(rt["spec"]["template"])["tolerations"] = [{"key": "old", "operator": "Exists"}]
    pod(rt["spec"]["template"])["nodeSelector"] = {"zone": "z"}
    js = render(trainjob(trainer={}, runtimePatches=[KUEUE]), rt).jobset
    spec = pod(js)
    assert spec["nodeSelector"] == {"zone": "z", "flavor": "a"}  # maps merge
    assert spec["tolerations"] == [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}]  # replaced
    assert spec["schedulingGates"] == [{"name": "kueue.x-k8s.io/topology"}]
    metadata = js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["metadata"]
    assert metadata == {
        "labels": {"kueue.x-k8s.io/podset": "node"},
        "annotations": {"kueue.x-k8s.io/workload": "w"},
    }


def test_patches_apply_in_order_the_last_wins():
    first = runtime_patch("a.io/m", pod_patch("node", spec={"nodeSelector": {"x": "1", "y": "1"}}))
    second = runtime_patch(
        "b.io/m", pod_patch("node", spec={"nodeSelector": {"x": "2"}, "serviceAccountName": "sa"})
    )
    spec = pod(render(trainjob(trainer={}, runtimePatches=[first, second]), torch_distributed()).jobset)
    assert spec["nodeSelector"] == {"x": "2", "y": "1"} and spec["serviceAccountName"] == "sa"


def test_jobset_labels_and_annotations_come_from_the_template_and_the_patches():
    rt = torch_distributed()
    rt["spec"]["template"]["metadata"] = {"labels": {"t": "1", "s": "t"}, "annotations": {"a": "1"}}
    patch = runtime_patch("a.io/m", metadata={"labels": {"s": "p", "p": "2"}})
    js = render(trainjob(trainer={}, runtimePatches=[patch]), rt).jobset
    assert js["metadata"]["labels"] == {"t": "1", "s": "p", "p": "2"}
    assert js["metadata"]["annotations"] == {"a": "1"}


def test_patched_containers_merge_by_name_and_keep_the_template_s_others():
    rt = torch_distributed()
    pod(rt["spec"]["template"])["containers"].append(
        {"name": "sidecar", "image": "s", "env": [{"name": "E", "value": "0"}]}
    )
    patch = runtime_patch(
        "a.io/m",
        pod_patch(
            "node",
            spec={
                "containers": [
                    {"name": "sidecar", "env": [{"name": "E", "value": "1"}, {"name": "F", "value": "2"}]},
                    {"name": "node", "securityContext": {"runAsUser": 7}},
                ],
                "volumes": [{"name": "v", "emptyDir": {"sizeLimit": "1024Mi"}}],
            },
        ),
    )
    js = render(trainjob(trainer={}, runtimePatches=[patch]), rt).jobset
    # normalizeElementOrder: both containers are in the patch, so they take the patch's order.
    assert [c["name"] for c in pod(js)["containers"]] == ["sidecar", "node"]
    assert container(js, name="sidecar")["env"] == [{"name": "E", "value": "1"}, {"name": "F", "value": "2"}]
    assert container(js)["securityContext"] == {"runAsUser": 7}
    assert container(js)["image"] == "pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime"
    assert pod(js)["volumes"] == [{"name": "v", "emptyDir": {"sizeLimit": "1Gi"}}]


@pytest.mark.parametrize(
    ("original", "patch", "expected"),
    [
        # Outputs of apimachinery v0.36.3's StrategicMergePatch with the JobSetSpec schema. A new
        # item goes before the original's items not yet placed: an added container comes first.
        (["a", "b", "c"], ["b", "d"], ["a", "b", "d", "c"]),
        (["a", "b"], ["c"], ["c", "a", "b"]),
        (["a", "b", "c"], ["c", "a"], ["b", "c", "a"]),
        ([], ["x", "y"], ["x", "y"]),
        (["a"], [], ["a"]),
    ],
)
def test_merge_key_lists_are_ordered_as_apimachinery_orders_them(original, patch, expected):
    key = (*POD, "containers")
    merged = merge_map(
        {"containers": [{"name": n} for n in original]},
        {"containers": [{"name": n, "image": "p"} for n in patch]},
        key[:-1],
    )
    assert [c["name"] for c in merged["containers"]] == expected
    assert all(c.get("image") == "p" for c in merged["containers"] if c["name"] in patch)


def test_replicated_jobs_keep_the_template_s_order():
    spec = {"replicatedJobs": [{"name": "a"}, {"name": "b"}]}
    patches = [
        {
            "trainingRuntimeSpec": {
                "template": {"spec": {"replicatedJobs": [{"name": "b", "replicas": 2}, {"name": "a"}]}}
            }
        }
    ]
    assert apply_runtime_patches(spec, patches) == {
        "replicatedJobs": [{"name": "a"}, {"name": "b", "replicas": 2}]
    }


def test_a_null_removes_a_key_and_scalars_replace():
    assert merge_map({"a": 1, "b": {"c": 2, "d": 3}}, {"a": None, "b": {"c": 4}}) == {"b": {"c": 4, "d": 3}}
    assert merge_map({"args": ["x", "y"]}, {"args": ["z"]}) == {"args": ["z"]}


def test_omit_empty_drops_what_go_drops():
    assert omit_empty({"a": "", "b": [], "c": {}, "d": None, "e": 0, "f": False, "g": [{"h": ""}]}) == {
        "e": 0,
        "f": False,
        "g": [{}],
    }


def test_omit_empty_keeps_a_set_struct_pointer_that_is_empty():
    volume = {"name": "data", "emptyDir": {}}
    assert omit_empty({"volumes": [volume], "securityContext": {"runAsUser": None}}) == {
        "volumes": [{"name": "data", "emptyDir": {}}],
        "securityContext": {},
    }
    assert omit_empty({"nodeSelector": {}, "emptyDir": None}) == {}


def test_a_patch_is_read_as_go_reads_it():
    # An empty list in a patch does not clear the template's (Go's omitempty drops it first).
    rt = torch_distributed()
    pod(rt["spec"]["template"])["tolerations"] = [{"key": "t", "operator": "Exists"}]
    patch = runtime_patch("a.io/m", pod_patch("node", spec={"tolerations": [], "nodeSelector": {}}))
    spec = pod(render(trainjob(trainer={}, runtimePatches=[patch]), rt).jobset)
    assert spec["tolerations"] == [{"key": "t", "operator": "Exists"}] and "nodeSelector" not in spec
