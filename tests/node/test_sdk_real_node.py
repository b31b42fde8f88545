"""A TrainJob that trains for real on the real node, launched, followed and read through the Kubeflow
SDK (`kubeflow` 0.5.0's TrainerClient) only, as a user does against Trainer v2.3.0: a Python function
(``CustomTrainer``) on the built-in ``jax-distributed`` runtime, two nodes, with the real node's image
and, through the SDK's ``RuntimePatch``, its nodeSelector and toleration. The two JAX processes
rendezvous at the coordinator the operator's rendering names (``JAX_COORDINATOR_ADDRESS``, the JobSet
pod ``<name>-node-0-0.<name>``, resolved by the node's CoreDNS through JobSet's headless Service),
average their gradients over Gloo every step, and exit 0 only if the shared model converged; the
SDK's ``wait_for_job_status`` sees Complete, its ``get_job_logs`` each process's own output.

Needs the real node (hack/real-node.sh up), JobSet (hack/jobset.sh up) and the operator: hack/test.sh
``real_node_tests`` starts them.
"""

from __future__ import annotations

import os
import re

import pytest
from kube import HANG_S, REAL_NODE, REAL_NODE_LABEL, get, namespace_fixture
from kubeflow.trainer import CustomTrainer, KubernetesBackendConfig, TrainerClient
from kubeflow.trainer.constants import constants
from kubeflow.trainer.options import (
    JobSetSpecPatch,
    JobSetTemplatePatch,
    JobSpecPatch,
    JobTemplatePatch,
    PodSpecPatch,
    PodTemplatePatch,
    ReplicatedJobPatch,
    RuntimePatch,
    TrainingRuntimeSpecPatch,
)

pytestmark = pytest.mark.real_node

NS = "ato-real-node-sdk"
namespace = namespace_fixture(NS)
# JAX's CPU wheels on the machine's Python, and bash for the SDK's command (hack/real-node.sh).
IMAGE = "ato.local/jax:local"
NODES = 2
STEPS = 100

# What a user adds to place a TrainJob's pods on a tainted, labelled node pool: a runtime patch of
# the trainer's replicated job (docs/user-guide-trainjob.md), with the SDK's own manager.
ON_THE_REAL_NODE = RuntimePatch(
    training_runtime_spec=TrainingRuntimeSpecPatch(
        template=JobSetTemplatePatch(
            spec=JobSetSpecPatch(
                replicated_jobs=[
                    ReplicatedJobPatch(
                        name=constants.NODE,
                        template=JobTemplatePatch(
                            spec=JobSpecPatch(
                                template=PodTemplatePatch(
                                    spec=PodSpecPatch(
                                        node_selector={REAL_NODE_LABEL: "true"},
                                        tolerations=[
                                            {
                                                "key": REAL_NODE_LABEL,
                                                "operator": "Exists",
                                                "effect": "NoSchedule",
                                            }
                                        ],
                                    )
                                )
                            )
                        ),
                    )
                ]
            )
        )
    )
)


def fit_a_line(steps: int) -> None:
    """The training the SDK ships: its source, written out by bash and run by python in each node
    (no dollar signs or backquotes: the SDK's here-document would expand them). It fits
    y = 3x + 1 from each process's own samples, gradients all-gathered and averaged every step."""
    import os

    import jax

    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    coordinator = os.environ["JAX_COORDINATOR_ADDRESS"]
    jax.distributed.initialize(
        coordinator_address=coordinator,
        num_processes=int(os.environ["JAX_NUM_PROCESSES"]),
        process_id=int(os.environ["JAX_PROCESS_ID"]),
    )
    import jax.numpy as jnp
    from jax.experimental import multihost_utils

    rank, world = jax.process_index(), jax.process_count()
    print(f"process {rank}/{world} joined the coordinator at {coordinator}")
    x = jax.random.uniform(jax.random.key(rank), (200,), minval=-1, maxval=1)
    y = 3 * x + 1 + 0.05 * jax.random.normal(jax.random.key(100 + rank), (200,))
    loss_and_gradient = jax.jit(jax.value_and_grad(lambda p: jnp.mean((p[0] * x + p[1] - y) ** 2)))
    params = jnp.zeros(2)
    for step in range(steps):
        loss, gradient = loss_and_gradient(params)
        params = params - 0.1 * multihost_utils.process_allgather(gradient).mean(axis=0)
        if step % 25 == 0 or step == steps - 1:
            print(f"process {rank}/{world} step {step}: loss={float(loss):.5f}")
    w, b = (float(v) for v in params)
    print(f"process {rank}/{world}: w={w:.4f} b={b:.4f} after {steps} steps")
    raise SystemExit(0 if abs(w - 3) < 0.1 and abs(b - 1) < 0.1 else 1)


@pytest.fixture(scope="module")
def client(namespace):
    return TrainerClient(KubernetesBackendConfig(namespace=NS, config_file=os.environ["KUBECONFIG"]))


def process_report(log: str, rank: int) -> dict:
    """What process ``rank`` printed: its coordinator, its losses by step, its final model."""
    joined = re.search(rf"^process {rank}/(\d+) joined the coordinator at (\S+)$", log, re.M)
    final = re.search(rf"^process {rank}/(\d+): w=(\S+) b=(\S+) after (\d+) steps$", log, re.M)
    assert joined and final, log
    losses = {
        int(s): float(v) for s, v in re.findall(rf"^process {rank}/\d+ step (\d+): loss=(\S+)$", log, re.M)
    }
    return {
        "world": {int(joined[1]), int(final[1])},
        "coordinator": joined[2],
        "losses": losses,
        "model": (final[2], final[3]),
        "steps": int(final[4]),
    }


def test_a_jax_function_trains_on_two_real_nodes_through_the_sdk(client):
    trainer = CustomTrainer(func=fit_a_line, func_args={"steps": STEPS}, image=IMAGE, num_nodes=NODES)
    name = client.train(runtime="jax-distributed", trainer=trainer, options=[ON_THE_REAL_NODE])
    # A hang, not a speed: two JAX imports and compiles on a shared 2-core machine.
    done = client.wait_for_job_status(
        name, {constants.TRAINJOB_COMPLETE}, timeout=2 * HANG_S, polling_interval=2
    )
    assert (done.status, done.num_nodes, done.runtime.name) == (
        constants.TRAINJOB_COMPLETE,
        NODES,
        "jax-distributed",
    )
    steps = sorted(done.steps, key=lambda s: s.name)
    assert [(s.name, s.status) for s in steps] == [("node-0", "Succeeded"), ("node-1", "Succeeded")]
    for step in steps:
        assert get("pod", "-n", NS, step.pod_name)["spec"]["nodeName"] == REAL_NODE, (
            "placed by the runtime patch"
        )

    reports = [
        process_report("\n".join(client.get_job_logs(name, step=f"node-{r}")), r) for r in range(NODES)
    ]
    for report in reports:
        # Both joined the coordinator of the operator's JAX env, as processes of one world of two.
        assert report["world"] == {NODES}
        assert report["coordinator"] == f"{name}-node-0-0.{name}:29500"
        assert report["steps"] == STEPS
        assert sorted(report["losses"]) == [0, 25, 50, 75, STEPS - 1]
        assert report["losses"][STEPS - 1] < report["losses"][0] / 10, "the loss fell"
    # One model: each step applied the same averaged gradient in both processes.
    assert reports[0]["model"] == reports[1]["model"]
    w, b = (float(v) for v in reports[0]["model"])
    assert abs(w - 3) < 0.1 and abs(b - 1) < 0.1
