"""What the engine renders for a TrainJob, against what Trainer v2.3.0's controller renders.

Rows come from upstream's tables at v2.3.0 (``pkg/runtime/core/trainingruntime_test.go``,
``pkg/runtime/framework/plugins/*/*_test.go``) and from reading its plugins, on the built-in
runtimes (``tests/trainer_runtimes.py``).
"""

from __future__ import annotations

import copy

import pytest
from trainer_jobs.render import RenderError, render
from trainer_runtimes import (
    container,
    deepspeed_distributed,
    env_names,
    jax_distributed,
    mlx_distributed,
    node_job,
    pod,
    torch_distributed,
    torchtune_llama3_2_1b,
    trainjob,
    xgboost_distributed,
)

RANK = {"fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}


def test_jobset_is_named_owned_and_suspended_as_the_trainjob():
    js = render(trainjob(suspend=True, trainer={"numNodes": 2}), torch_distributed()).jobset
    assert js["apiVersion"] == "jobset.x-k8s.io/v1alpha2" and js["kind"] == "JobSet"
    assert js["metadata"]["name"] == "job" and js["metadata"]["namespace"] == "ns"
    assert js["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "name": "job",
            "uid": "uid-1",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert js["spec"]["suspend"] is True
    assert "labels" not in js["metadata"] and "annotations" not in js["metadata"]


@pytest.mark.parametrize(
    ("trainer", "expected"),
    [
        # numProcPerNode defaults to "auto" with GPUs, else to the CPU count (at least 1).
        ({"numNodes": 3}, {"PET_NNODES": "3", "PET_NPROC_PER_NODE": "1"}),
        ({"numNodes": 2, "resourcesPerNode": {"requests": {"cpu": "3"}}}, {"PET_NPROC_PER_NODE": "3"}),
        ({"resourcesPerNode": {"limits": {"cpu": "1500m"}}}, {"PET_NPROC_PER_NODE": "2", "PET_NNODES": "1"}),
        ({"resourcesPerNode": {"limits": {"nvidia.com/gpu": "4"}}}, {"PET_NPROC_PER_NODE": "auto"}),
        (
            {"numProcPerNode": 8, "resourcesPerNode": {"limits": {"nvidia.com/gpu": "4"}}},
            {"PET_NPROC_PER_NODE": "8"},
        ),
    ],
)
def test_torch_env(trainer, expected):
    js = render(trainjob(trainer=trainer), torch_distributed()).jobset
    node = container(js)
    env = {e["name"]: e.get("value", e.get("valueFrom")) for e in node["env"]}
    assert env_names(node) == [
        "PET_NNODES",
        "PET_NPROC_PER_NODE",
        "PET_NODE_RANK",
        "PET_MASTER_ADDR",
        "PET_MASTER_PORT",
    ]
    assert env["PET_NODE_RANK"] == RANK
    assert env["PET_MASTER_ADDR"] == "job-node-0-0.job" and env["PET_MASTER_PORT"] == "29500"
    assert {k: env[k] for k in expected} == expected
    assert node["ports"] == [{"containerPort": 29500}]


def test_torch_counts_pods_and_copies_the_trainer():
    trainer = {
        "numNodes": 4,
        "image": "me/train:1",
        "command": ["torchrun", "train.py"],
        "args": ["--epochs", "2"],
        "env": [{"name": "A", "value": "1"}, {"name": "EMPTY", "value": ""}],
        "resourcesPerNode": {"requests": {"cpu": "1000m", "memory": "1.5Gi"}},
    }
    js = render(trainjob(trainer=trainer), torch_distributed()).jobset
    node = container(js)
    assert node["image"] == "me/train:1" and node["command"] == ["torchrun", "train.py"]
    assert node["args"] == ["--epochs", "2"]
    # The TrainJob's env first (an empty value kept, as apply.EnvVar writes it), then PET_*.
    assert node["env"][:2] == [{"name": "A", "value": "1"}, {"name": "EMPTY", "value": ""}]
    assert node["resources"] == {"requests": {"cpu": "1", "memory": "1536Mi"}}
    job = node_job(js)
    assert job["replicas"] == 1
    assert job["template"]["spec"]["parallelism"] == 4 and job["template"]["spec"]["completions"] == 4


def test_a_trainjob_without_trainer_gets_no_torch_env():
    node = container(render(trainjob(), torch_distributed()).jobset)
    assert "env" not in node and "ports" not in node


def test_torch_env_injection_targets_get_the_master_address_too():
    rt = torch_distributed()
    rt["spec"]["mlPolicy"]["torch"] = {
        "envInjection": {"targets": [{"jobName": "node", "containerNames": ["check"]}]}
    }
    pod(rt["spec"]["template"])["initContainers"] = [{"name": "check", "image": "busybox"}]
    js = render(trainjob(trainer={"numNodes": 2}), rt).jobset
    check = pod(js)["initContainers"][0]
    assert env_names(check) == [
        "PET_NNODES",
        "PET_NPROC_PER_NODE",
        "PET_NODE_RANK",
        "PET_MASTER_ADDR",
        "PET_MASTER_PORT",
    ]


def test_an_env_injection_target_that_does_not_exist_cannot_render():
    rt = torch_distributed()
    rt["spec"]["mlPolicy"]["torch"] = {
        "envInjection": {"targets": [{"jobName": "node", "containerNames": ["nope"]}]}
    }
    with pytest.raises(RenderError, match="envInjection target podSet 'node' container 'nope' not found"):
        render(trainjob(trainer={}), rt)


def test_the_trainer_port_replaces_an_unnamed_port_as_upstream_does():
    rt = torch_distributed()
    pod(rt["spec"]["template"])["containers"][0]["ports"] = [
        {"containerPort": 8080},
        {"name": "m", "containerPort": 9090},
    ]
    node = container(render(trainjob(trainer={}), rt).jobset)
    assert node["ports"] == [{"containerPort": 29500}, {"name": "m", "containerPort": 9090}]


def test_jax_env_comes_before_the_trainjobs():
    tj = trainjob("jax-distributed", trainer={"numNodes": 2, "env": [{"name": "XLA_FLAGS", "value": "x"}]})
    node = container(render(tj, jax_distributed()).jobset)
    assert node["env"] == [
        {"name": "JAX_NUM_PROCESSES", "value": "2"},
        {"name": "JAX_PROCESS_ID", "valueFrom": RANK},
        {"name": "JAX_COORDINATOR_ADDRESS", "value": "job-node-0-0.job:29500"},
        {"name": "XLA_FLAGS", "value": "x"},
    ]
    assert node["ports"] == [{"containerPort": 29500}]


@pytest.mark.parametrize(
    ("trainer", "workers"),
    [({"numNodes": 3}, "3"), ({"numNodes": 2, "resourcesPerNode": {"limits": {"nvidia.com/gpu": "2"}}}, "4")],
)
def test_xgboost_env(trainer, workers):
    tj = trainjob("xgboost-distributed", trainer={**trainer, "env": [{"name": "U", "value": "u"}]})
    node = container(render(tj, xgboost_distributed()).jobset)
    assert node["env"] == [
        {"name": "U", "value": "u"},
        {"name": "DMLC_TRACKER_URI", "value": "job-node-0-0.job"},
        {"name": "DMLC_TRACKER_PORT", "value": "29500"},
        {"name": "DMLC_TASK_ID", "valueFrom": RANK},
        {"name": "DMLC_NUM_WORKER", "value": workers},
    ]


def test_plain_ml_gets_only_the_trainjobs_env_and_node_count():
    rt = torch_distributed()
    rt["spec"]["mlPolicy"] = {"numNodes": 1}
    js = render(trainjob(trainer={"numNodes": 3, "env": [{"name": "TF_CONFIG", "value": "{}"}]}), rt).jobset
    assert container(js)["env"] == [{"name": "TF_CONFIG", "value": "{}"}]
    assert node_job(js)["template"]["spec"]["parallelism"] == 3


SSH_VOLUME = {
    "name": "mpi-ssh-auth",
    "secret": {
        "secretName": "job-mpi-ssh-auth",
        "defaultMode": 0o400,
        "items": [
            {"key": "ssh-privatekey", "path": "id_rsa", "mode": 0o640},
            {"key": "ssh-publickey", "path": "id_rsa.pub", "mode": 0o644},
            {"key": "ssh-publickey", "path": "authorized_keys", "mode": 0o644},
        ],
    },
}
HOSTFILE_VOLUME = {
    "name": "mpi-hostfile",
    "configMap": {
        "name": "job-mpi-hostfile",
        "items": [{"key": "hostfile", "path": "hostfile", "mode": 0o444}],
    },
}


@pytest.mark.parametrize("builtin", [deepspeed_distributed, mlx_distributed])
def test_mpi_launcher_as_node(builtin):
    tj = trainjob(
        builtin()["metadata"]["name"],
        trainer={
            "numNodes": 3,
            "command": ["mpirun", "python", "t.py"],
            "env": [{"name": "U", "value": "u"}],
        },
    )
    rendered = render(tj, builtin())
    js = rendered.jobset
    launcher, sshd = container(js, "launcher"), container(js, "node")
    assert launcher["command"] == ["mpirun", "python", "t.py"]
    assert sshd["command"] == ["/usr/sbin/sshd"]  # the trainer's command goes to the launcher only
    assert launcher["env"] == [
        {"name": "OMPI_MCA_orte_default_hostfile", "value": "/etc/mpi/hostfile"},
        {"name": "OMPI_MCA_orte_keep_fqdn_hostnames", "value": "true"},
        {"name": "OMPI_MCA_orte_set_default_slots", "value": "1"},
        {"name": "OMPI_MCA_plm_rsh_args", "value": "-o ConnectionAttempts=10"},
        {"name": "U", "value": "u"},
    ]
    assert sshd["env"] == [{"name": "U", "value": "u"}]  # runLauncherAsNode: the nodes get the env too
    assert launcher["volumeMounts"] == [
        {"name": "mpi-ssh-auth", "mountPath": "/home/mpiuser/.ssh"},
        {"name": "mpi-hostfile", "mountPath": "/etc/mpi"},
    ]
    assert sshd["volumeMounts"] == [{"name": "mpi-ssh-auth", "mountPath": "/home/mpiuser/.ssh"}]
    assert pod(js, "launcher")["volumes"] == [SSH_VOLUME, HOSTFILE_VOLUME]
    assert pod(js, "node")["volumes"] == [SSH_VOLUME]
    # Three nodes: the launcher is one of them, so the node job runs two pods.
    assert node_job(js, "node")["template"]["spec"]["parallelism"] == 2
    assert node_job(js, "launcher")["template"]["spec"]["parallelism"] == 1
    assert node_job(js, "launcher")["replicas"] == 1 and "replicas" not in node_job(js, "node")
    assert rendered.hostfile is not None
    assert rendered.hostfile["data"] == {
        "hostfile": "job-node-0-0.job slots=1\njob-node-0-1.job slots=1\njob-launcher-0-0.job slots=1\n"
    }
    assert rendered.ssh_secret == {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": "job-mpi-ssh-auth",
            "namespace": "ns",
            "ownerReferences": js["metadata"]["ownerReferences"],
        },
        "type": "kubernetes.io/ssh-auth",
        "immutable": True,
    }


@pytest.mark.parametrize(
    ("trainer", "slots"),
    [
        ({"numNodes": 2, "numProcPerNode": 8}, "8"),
        ({"numNodes": 2, "resourcesPerNode": {"limits": {"nvidia.com/gpu": "4"}}}, "4"),
        ({"numNodes": 2, "resourcesPerNode": {"limits": {"nvidia.com/gpu": "1"}}}, "1"),
    ],
)
def test_mpi_slots(trainer, slots):
    rendered = render(trainjob("deepspeed-distributed", trainer=trainer), deepspeed_distributed())
    env = {e["name"]: e["value"] for e in container(rendered.jobset, "launcher")["env"]}
    assert env["OMPI_MCA_orte_set_default_slots"] == slots
    assert rendered.hostfile is not None
    assert rendered.hostfile["data"]["hostfile"].splitlines() == [
        f"job-node-0-0.job slots={slots}",
        f"job-launcher-0-0.job slots={slots}",
    ]


def test_mpi_without_launcher_as_node_lists_the_nodes_only():
    rt = deepspeed_distributed()
    rt["spec"]["mlPolicy"]["mpi"] = {"numProcPerNode": 2}  # CRD defaults: OpenMPI, /root/.ssh, false
    rendered = render(trainjob("deepspeed-distributed", trainer={"numNodes": 2}), rt)
    assert rendered.hostfile is not None
    assert rendered.hostfile["data"]["hostfile"] == "job-node-0-0.job slots=2\njob-node-0-1.job slots=2\n"
    assert container(rendered.jobset, "launcher")["volumeMounts"][0]["mountPath"] == "/root/.ssh"
    assert "env" not in container(rendered.jobset, "node")


def test_another_mpi_implementation_cannot_render():
    rt = deepspeed_distributed()
    rt["spec"]["mlPolicy"]["mpi"]["mpiImplementation"] = "Intel"
    with pytest.raises(RenderError, match="MPI implementation for Intel"):
        render(trainjob("deepspeed-distributed", trainer={}), rt)


def test_flux_is_refused():
    rt = torch_distributed()
    rt["spec"]["mlPolicy"] = {"numNodes": 1, "flux": {"numProcPerNode": 1}}
    with pytest.raises(RenderError, match="flux"):
        render(trainjob(trainer={}), rt)


@pytest.mark.parametrize(
    ("trainer", "tail"),
    [
        # Two GPUs in the runtime: distributed, with a rendezvous endpoint.
        (
            {},
            [
                "--rdzv_endpoint=job-node-0-0.job:29500",
                "full_finetune_distributed",
                "--config",
                "llama3_2/1B_full",
            ],
        ),
        (
            {"resourcesPerNode": {"limits": {"nvidia.com/gpu": "1"}}},
            ["full_finetune_single_device", "--config", "llama3_2/1B_full_single_device"],
        ),
        (
            {
                "resourcesPerNode": {"limits": {"nvidia.com/gpu": "1"}},
                "args": ["model.lora_attn_modules=[q_proj]"],
            },
            ["lora_finetune_single_device", "--config", "llama3_2/1B_lora_single_device"],
        ),
        (
            {"args": ["model.quantize_base=True"]},
            [
                "--rdzv_endpoint=job-node-0-0.job:29500",
                "lora_finetune_distributed",
                "--config",
                "llama3_2/1B_qlora",
            ],
        ),
        (
            {"numNodes": 2},
            [
                "--rdzv_endpoint=job-node-0-0.job:29500",
                "full_finetune_distributed",
                "--config",
                "llama3_2/1B_full_multinode",
            ],
        ),
    ],
)
def test_torchtune_command(trainer, tail):
    tj = trainjob("torchtune-llama3.2-1b", trainer={**trainer, "command": ["tune", "run"]})
    node = container(render(tj, torchtune_llama3_2_1b()).jobset)
    overrides = [
        "output_dir=/workspace/output",
        "tokenizer.path=/workspace/model/original/tokenizer.model",
        "checkpointer.checkpoint_dir=/workspace/model",
    ]
    assert node["command"] == ["tune", "run", *tail, *overrides]
    # torchtune gets no master address: the rendezvous endpoint is on its command line.
    assert env_names(node) == ["PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK"]


def test_initializers():
    initializer = {
        "dataset": {
            "storageUri": "hf://data",
            "env": [{"name": "D", "value": "d"}],
            "secretRef": {"name": "hf-token"},
        },
        "model": {"storageUri": "hf://model"},
    }
    js = render(trainjob("torchtune-llama3.2-1b", initializer=initializer), torchtune_llama3_2_1b()).jobset
    dataset = container(js, "dataset-initializer", "dataset-initializer")
    assert dataset["env"] == [{"name": "STORAGE_URI", "value": "hf://data"}, {"name": "D", "value": "d"}]
    assert dataset["envFrom"] == [{"secretRef": {"name": "hf-token"}}]
    model = container(js, "model-initializer", "model-initializer")
    assert model["env"] == [{"name": "STORAGE_URI", "value": "hf://model"}]
    for name in ("dataset-initializer", "model-initializer"):
        job = node_job(js, name)
        assert job["replicas"] == 1
        assert job["template"]["spec"]["parallelism"] == 1 and job["template"]["spec"]["completions"] == 1
    assert js["spec"]["volumeClaimPolicies"][0]["templates"][0]["metadata"]["name"] == "initializer"
    assert [rj["name"] for rj in js["spec"]["replicatedJobs"]] == [
        "dataset-initializer",
        "model-initializer",
        "node",
    ]


def test_the_runtime_is_not_modified():
    rt, tj = deepspeed_distributed(), trainjob("deepspeed-distributed", trainer={"numNodes": 3})
    before = copy.deepcopy((rt, tj))
    render(tj, rt)
    assert (rt, tj) == before


def gang_runtime(policy):
    rt = torch_distributed()
    spec = pod(rt["spec"]["template"])
    spec["containers"][0]["resources"] = {
        "requests": {"cpu": "500m", "memory": "1Gi"},
        "limits": {"nvidia.com/gpu": 1},
    }
    spec["initContainers"] = [
        {"name": "init", "image": "b", "resources": {"requests": {"cpu": "2", "memory": "100Mi"}}},
        {"name": "side", "image": "b", "restartPolicy": "Always", "resources": {"requests": {"cpu": "250m"}}},
        {"name": "init2", "image": "b", "resources": {"requests": {"cpu": "1"}}},
    ]
    spec["priorityClassName"] = "high"
    rt["spec"]["podGroupPolicy"] = policy
    return rt


def test_coscheduling_pod_group():
    # One pod: containers 1500m + the sidecar's 250m, below the first init container's 2 CPUs:
    # PodRequests says 2 CPUs and 1Gi; three pods. Limits (the GPU) do not count.
    tj = trainjob(trainer={"numNodes": 3, "resourcesPerNode": {"requests": {"cpu": "1500m"}}})
    rendered = render(tj, gang_runtime({"coscheduling": {"scheduleTimeoutSeconds": 60}}))
    (group,) = rendered.pod_groups
    assert group["apiVersion"] == "scheduling.x-k8s.io/v1alpha1" and group["metadata"]["name"] == "job"
    assert group["spec"] == {
        "minMember": 3,
        "minResources": {"cpu": "6", "memory": "3Gi"},
        "scheduleTimeoutSeconds": 60,
    }
    labels = node_job(rendered.jobset)["template"]["spec"]["template"]["metadata"]["labels"]
    assert labels == {"scheduling.x-k8s.io/pod-group": "job"}


def test_volcano_pod_group_takes_the_queue_from_the_patched_annotations():
    rt = gang_runtime({"volcano": {"networkTopology": {"mode": "hard", "highestTierAllowed": 2}}})
    rt["spec"]["template"]["metadata"] = {"annotations": {"scheduling.volcano.sh/queue-name": "q1"}}
    patch = {
        "manager": "a.io/x",
        "trainingRuntimeSpec": {
            "template": {"metadata": {"annotations": {"scheduling.volcano.sh/queue-name": "q2"}}}
        },
    }
    rendered = render(trainjob(trainer={"numNodes": 2}, runtimePatches=[patch]), rt)
    (group,) = rendered.pod_groups
    assert group["apiVersion"] == "scheduling.volcano.sh/v1beta1"
    assert group["spec"] == {
        "minMember": 2,
        "minResources": {"cpu": "4", "memory": "2Gi"},
        "queue": "q2",
        "priorityClassName": "high",
        "networkTopology": {"mode": "hard", "highestTierAllowed": 2},
    }
    annotations = node_job(rendered.jobset)["template"]["spec"]["template"]["metadata"]["annotations"]
    assert annotations == {"scheduling.k8s.io/group-name": "job"}
    assert rendered.jobset["metadata"]["annotations"] == {"scheduling.volcano.sh/queue-name": "q2"}


def test_mpi_pod_group_counts_the_launcher_and_the_nodes():
    rt = deepspeed_distributed()
    rt["spec"]["podGroupPolicy"] = {"coscheduling": {"scheduleTimeoutSeconds": 30}}
    pod(rt["spec"]["template"], "node")["containers"][0]["resources"] = {
        "requests": {"cpu": "1", "memory": "2Gi"}
    }
    trainer = {
        "numNodes": 4,
        "resourcesPerNode": {"requests": {"memory": "3Gi"}, "limits": {"nvidia.com/gpu": "2"}},
    }
    (group,) = render(trainjob("deepspeed-distributed", trainer=trainer), rt).pod_groups
    # Three nodes of 1 CPU and 3Gi (the TrainJob's memory over the runtime's), a launcher of 3Gi.
    assert group["spec"] == {
        "minMember": 4,
        "minResources": {"cpu": "3", "memory": "12Gi"},
        "scheduleTimeoutSeconds": 30,
    }


def test_go_writes_empty_structs_and_canonical_quantities():
    rt = torch_distributed()
    spec = pod(rt["spec"]["template"])
    spec["containers"][0]["resources"] = {"requests": {"cpu": "1000m", "memory": "0.5Gi"}}
    spec["containers"][0]["env"] = [
        {"name": "M", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory"}}}
    ]
    spec["initContainers"] = [{"name": "i", "image": "b"}]
    spec["volumes"] = [{"name": "x", "emptyDir": {"sizeLimit": "1000Mi"}}]
    js = render(trainjob(), rt).jobset
    job = node_job(js)
    assert job["template"]["spec"]["template"]["metadata"] == {}
    assert pod(js)["initContainers"][0]["resources"] == {}
    assert container(js)["resources"] == {"requests": {"cpu": "1", "memory": "512Mi"}}
    assert container(js)["env"][0]["valueFrom"]["resourceFieldRef"] == {
        "resource": "limits.memory",
        "divisor": "0",
    }
    assert pod(js)["volumes"] == [{"name": "x", "emptyDir": {"sizeLimit": "1000Mi"}}]
    claims = render(trainjob("torchtune-llama3.2-1b"), torchtune_llama3_2_1b()).jobset["spec"][
        "volumeClaimPolicies"
    ]
    assert claims[0]["templates"][0]["status"] == {}


def test_env_from_the_trainjob_is_copied_as_apply_envvar_copies_it():
    env = [
        {"name": "A", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}},
        {"name": "B", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}},
        {"name": "C", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k", "optional": True}}},
        {"name": "D", "valueFrom": {"configMapKeyRef": {"key": "k"}}},
    ]
    node = container(render(trainjob(trainer={"env": env}), torch_distributed()).jobset)
    assert node["env"][:4] == [
        {"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {
            "name": "B",
            "valueFrom": {
                "resourceFieldRef": {"containerName": "", "resource": "limits.cpu", "divisor": "0"}
            },
        },
        {"name": "C", "valueFrom": {"secretKeyRef": {"key": "k", "name": "s", "optional": True}}},
        {"name": "D", "valueFrom": {"configMapKeyRef": {"key": "k", "name": ""}}},
    ]
