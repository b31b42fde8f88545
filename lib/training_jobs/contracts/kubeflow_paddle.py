"""Paddle's env contract for training-operator's PaddleJob (``kubeflow.org/v1``).

Not paddle-operator's ``batch.paddlepaddle.org/v1`` PaddleJob (``contracts/paddle.py``): this
is the variables ``python -m paddle.distributed.launch`` reads when training-operator runs it.

Upstream sources (kubeflow/training-operator, tag v1.9.0): ``pkg/controller.v1/paddlepaddle/
envvar.go`` (``setPodEnv``, ``getTotalReplicas``, ``replicaName``, ``getPortFromPaddleJob``),
which ``paddlepaddle_controller.go``'s ``SetClusterSpec`` calls for every pod, and
``pkg/apis/kubeflow.org/v1/paddlepaddle_types.go`` / ``paddlepaddle_defautls.go`` (the
container, port and the in-memory defaults). The same variables go on every container of the
pod, appended in upstream's order. Every function here is pure: plain data in, plain data out.

Two modes, chosen by whether the job has a Master spec:

- collective (Worker only): worker 0 is the rendezvous endpoint;
- parameter server (a Master spec): Master pods are the servers, Worker pods the trainers, and
  master 0 is the endpoint.

The endpoint pod itself is given its own pod IP (a downward-API variable the kubelet expands in
``$(...)``) rather than its Service name; every other pod gets the endpoint's Service name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from training_jobs.contracts.ports import named_port
from training_jobs.contracts.tensorflow import general_name

DEFAULT_CONTAINER = "paddle"
# Upstream names the port "master" even on Worker pods.
DEFAULT_PORT_NAME = "master"
DEFAULT_PORT = 36543
MASTER, WORKER = "master", "worker"

ENV_MASTER_ENDPOINT = "PADDLE_MASTER"
ENV_NUM_NODES = "PADDLE_NNODES"
ENV_JOB_ID = "PADDLE_JOB_ID"
ENV_SERVER_NUM = "PADDLE_SERVER_NUM"
ENV_TRAINER_NUM = "PADDLE_TRAINER_NUM"
# The downward-API variable the endpoint pod's PADDLE_MASTER expands.
ENV_POD_IP = "POD_IP_DUMMY"


def port_of(template: Mapping[str, Any] | None) -> int:
    """``getPortFromPaddleJob``: port ``master`` of the ``paddle`` container, else 36543 (the
    port the defaulter adds to that container when it has none of that name)."""
    return named_port(template, DEFAULT_CONTAINER, DEFAULT_PORT_NAME, DEFAULT_PORT)


def endpoint_name(job_name: str, has_master: bool) -> str:
    """The rendezvous pod's name: master 0 with a Master spec, else worker 0."""
    return general_name(job_name, MASTER if has_master else WORKER, 0)


def is_endpoint(type_label: str, index: int, has_master: bool) -> bool:
    """Whether this pod is the rendezvous endpoint itself.

    Without a Master upstream tests the index alone: every replica type it accepts is then
    Worker, so that is worker 0.
    """
    if int(index) != 0:
        return False
    return type_label == MASTER if has_master else True


def defaulted_elastic(
    elastic: Mapping[str, Any] | None, worker_replicas: int | None
) -> dict[str, Any] | None:
    """``setPaddleElasticPolicy``: a missing min or max replicas takes the other's value, or
    the Worker replicas when both are missing (``worker_replicas`` None: the job has no Worker).

    Upstream keeps these defaults in memory only and nothing in v1.9.0 reads them (no env, no
    autoscaler); what is observable is that without a Worker the defaulting dereferences a
    missing spec, so such a job never runs. That case raises ``ValueError`` here.
    """
    if elastic is None:
        return None
    policy = dict(elastic)
    low, high = policy.get("minReplicas"), policy.get("maxReplicas")
    if low is None and high is None:
        if worker_replicas is None:
            raise ValueError("elasticPolicy without minReplicas or maxReplicas needs a Worker spec")
        low = high = int(worker_replicas)
    policy["minReplicas"] = high if low is None else low
    policy["maxReplicas"] = low if high is None else high
    return policy


def _var(name: str, value: Any) -> dict[str, str]:
    return {"name": name, "value": str(value)}


def pod_env(
    job_name: str,
    type_label: str,
    index: int,
    *,
    total_replicas: int,
    has_master: bool,
    endpoint_port: int,
) -> list[dict[str, Any]]:
    """``setPodEnv``'s variables for one pod, in upstream's order.

    ``PYTHONUNBUFFERED=1``, ``PADDLE_JOB_ID`` (the job's name), ``PADDLE_NNODES`` (all
    replicas of every type), then ``PADDLE_MASTER``: ``<endpoint pod>:<port>``, or on the
    endpoint pod ``POD_IP_DUMMY`` (``valueFrom.fieldRef status.podIP``) followed by
    ``$(POD_IP_DUMMY):<port>``. With a Master spec, each pod then declares itself one server
    (``PADDLE_SERVER_NUM=1`` on Master pods) or one trainer (``PADDLE_TRAINER_NUM=1`` on the
    others).

    ``type_label`` is the lower-case replica type; ``endpoint_port`` is the ``master`` port of
    the endpoint's replica type (Master with a Master spec, else Worker: :func:`port_of`).
    """
    port = int(endpoint_port)
    env: list[dict[str, Any]] = [
        _var("PYTHONUNBUFFERED", 1),
        _var(ENV_JOB_ID, job_name),
        _var(ENV_NUM_NODES, int(total_replicas)),
    ]
    if is_endpoint(type_label, index, has_master):
        env += [
            {"name": ENV_POD_IP, "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            _var(ENV_MASTER_ENDPOINT, f"$({ENV_POD_IP}):{port}"),
        ]
    else:
        env.append(_var(ENV_MASTER_ENDPOINT, f"{endpoint_name(job_name, has_master)}:{port}"))
    if has_master:
        env.append(_var(ENV_SERVER_NUM if type_label == MASTER else ENV_TRAINER_NUM, 1))
    return env
