"""PaddlePaddle's env contract as PaddleFlow paddle-operator v0.3.5 writes it.

Upstream sources (PaddleFlow/paddle-operator, tag v0.3.5): ``controllers/paddlejob_helper.go``
(``constructPod``, ``constructConfigMap``, ``endpoints2hosts``, ``constructService4Pod``,
``getPaddleJobMode``), ``controllers/paddlejob_controller.go`` (``PADDLE_PORT``,
``HOST_PORT_NUM``, the clean-up in ``Reconcile``) and ``api/v1/paddlejob_types.go`` (roles,
intranet modes, clean-pod policies).

Each pod gets a few per-pod variables on ``containers[0]``; everything about the other pods
comes from a ConfigMap named after the job, built once every pod has an IP. The one impure
input upstream has - a random per-job port - is replaced by :func:`job_port`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from training_jobs.model import InvalidJob

PADDLE_PORT = 36000
HOST_PORT_NUM = 20
# Upstream draws the per-job port from [PADDLE_PORT, PADDLE_PORT + PORT_RANGE).
PORT_RANGE = 20000

PS, WORKER, HETER = "ps", "worker", "heter"
roles = {PS: "PSERVER", WORKER: "TRAINER", HETER: "HETER"}

INTRANET_SERVICE = "Service"
INTRANET_POD_IP = "PodIP"
INTRANET_HOST = "Host"

# spec.cleanPodPolicy values (api/v1/paddlejob_types.go); unset is a fifth case of its own.
CLEAN_ALWAYS = "Always"
CLEAN_NEVER = "Never"
CLEAN_ON_FAILURE = "OnFailure"
CLEAN_ON_COMPLETION = "OnCompletion"

MODE_PS = "PS"
MODE_COLLECTIVE = "Collective"
MODE_SINGLE = "Single"

ELASTIC_TIMEOUT = "60"
GLOO_RENDEZVOUS = "3"


def pod_name(job_name: str, res_type: str, index: int) -> str:
    """``genPaddleResName``: pod, hostname, subdomain and Service name ``<job>-<type>-<i>``."""
    return f"{job_name}-{res_type}-{index}"


def pod_env(
    job_name: str,
    namespace: str,
    res_type: str,
    index: int,
    intranet: str,
    elastic: bool,
    worker_replicas: int | None,
) -> dict[str, list[dict[str, Any]]]:
    """``constructPod``'s additions to ``containers[0]``: ``{"env": [...], "envFrom": [...]}``.

    ``POD_IP`` is the pod's own name in Service mode (the per-pod Service makes it resolvable)
    and ``status.podIP`` otherwise. Non-elastic pods read the rest from the job's ConfigMap;
    elastic pods (``spec.elastic`` set) get the ``PADDLE_ELASTIC_*`` variables and no ConfigMap.
    The fieldRef is as upstream sends it; the API server adds ``apiVersion: v1`` on create.
    """
    if res_type not in roles:
        raise ValueError(f"unknown PaddleJob resource type {res_type!r}: expected ps, worker or heter")
    name = pod_name(job_name, res_type, index)
    if intranet == INTRANET_SERVICE:
        pod_ip: dict[str, Any] = {"name": "POD_IP", "value": name}
    else:
        pod_ip = {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}
    env = [
        pod_ip,
        {"name": "PADDLE_TRAINER_ID", "value": str(index)},
        {"name": "TRAINING_ROLE", "value": roles[res_type]},
        {"name": "PADDLE_TRAINING_ROLE", "value": roles[res_type]},
    ]
    if not elastic:
        return {"env": env, "envFrom": [{"configMapRef": {"name": job_name}}]}
    if worker_replicas is None:
        # Upstream dereferences spec.worker here and would crash; the job is unusable as written.
        raise InvalidJob("an elastic PaddleJob needs a worker spec: PADDLE_ELASTIC_NP is its replicas")
    env += [
        {"name": "PADDLE_ELASTIC_JOB_ID", "value": f"{namespace}-{job_name}"},
        {"name": "PADDLE_ELASTIC_NP", "value": str(worker_replicas)},
        {"name": "PADDLE_ELASTIC_TIMEOUT", "value": ELASTIC_TIMEOUT},
    ]
    return {"env": env, "envFrom": []}


def job_port(job_uid: str) -> int:
    """The job's ``PADDLE_PORT`` for PodIP and Host mode, derived from its UID.

    Upstream v0.3.5 draws ``36000 + rand.Intn(20000)`` once per job from an unseeded
    ``math/rand`` - neither reproducible across operator restarts nor pure. We keep its range
    and make the choice a function of ``metadata.uid``, so every reconcile (and a restarted
    operator) computes the same port: ``36000 + 20 * (sha256(uid) mod 1000)``.

    Why a multiple of 20: Paddle uses ``TRAINER_PORTS_NUM`` (20) consecutive ports from
    ``PADDLE_PORT``. Aligned blocks mean two jobs sharing a node in Host mode either collide
    completely (1 in 1000) or not at all, never partially, and the whole block
    ``[port, port + 19]`` stays below 56000 like upstream's range.
    """
    digest = hashlib.sha256(job_uid.encode("utf-8")).digest()
    block = int.from_bytes(digest[:8], "big") % (PORT_RANGE // HOST_PORT_NUM)
    return PADDLE_PORT + HOST_PORT_NUM * block


def endpoint_port(intranet: str, paddle_port: int) -> int:
    """The port in every endpoint: 36000 behind the per-pod Services, the job's port otherwise."""
    return PADDLE_PORT if intranet == INTRANET_SERVICE else int(paddle_port)


def configmap_data(
    endpoints: Mapping[str, Sequence[str]],
    intranet: str,
    with_gloo: int | None,
    paddle_port: int,
) -> dict[str, str]:
    """``constructConfigMap``'s ``data``: the cluster view every non-elastic pod imports.

    ``endpoints`` maps each resource type the job has (``ps``/``worker``/``heter``; absent key =
    no such spec) to its pods in index order: pod names in Service mode, pod IPs otherwise.
    Keys are written only for the types present, as upstream does. ``PADDLE_PORT`` is the port
    the endpoints carry, so a pserver's ``POD_IP:PADDLE_PORT`` is found in
    ``PADDLE_PSERVERS_IP_PORT_LIST``.

    Two upstream quirks are kept on purpose: ``withGloo`` is ignored without a ``ps`` spec
    (collective mode, upstream issue #38), and the gloo HTTP endpoint is ps-0's endpoint with
    its first ``:36000`` replaced by ``:36018`` - so outside Service mode it usually stays ps-0's
    own endpoint.
    """
    port = endpoint_port(intranet, paddle_port)
    ends = {rt: [f"{addr}:{port}" for addr in addrs] for rt, addrs in endpoints.items()}
    data = {"TRAINER_PORTS_NUM": str(HOST_PORT_NUM), "PADDLE_PORT": str(port)}
    if PS in ends:
        data["PADDLE_PSERVERS_IP_PORT_LIST"] = ",".join(ends[PS])
    if WORKER in ends:
        data["PADDLE_TRAINER_ENDPOINTS"] = ",".join(ends[WORKER])
        # endpoints2hosts: everything before the first ":" of each endpoint.
        data["PADDLE_TRAINERS"] = ",".join(e.split(":")[0] for e in ends[WORKER])
        data["PADDLE_TRAINERS_NUM"] = str(len(ends[WORKER]))
    if HETER in ends:
        data["PADDLE_HETER_ENDPOINTS"] = ",".join(ends[HETER])
    if with_gloo and int(with_gloo) > 0 and ends.get(PS):
        data["PADDLE_WITH_GLOO"] = str(int(with_gloo))
        data["PADDLE_GLOO_RENDEZVOUS"] = GLOO_RENDEZVOUS
        data["PADDLE_GLOO_HTTP_ENDPOINT"] = ends[PS][0].replace(
            f":{PADDLE_PORT}", f":{PADDLE_PORT + HOST_PORT_NUM - 2}", 1
        )
    return data


def service_ports() -> list[dict[str, Any]]:
    """``constructService4Pod``'s ports: ``p-0`` … ``p-19`` on 36000 … 36019.

    As upstream sends them; the API server fills in ``protocol: TCP`` and ``targetPort``.
    """
    return [{"name": f"p-{i}", "port": PADDLE_PORT + i} for i in range(HOST_PORT_NUM)]


def cleans_up(policy: str | None, completed: bool) -> bool:
    """Whether paddle-operator deletes a finished job's pods and Services (``cleanOne``, one per
    reconcile until none is left). The ConfigMap is never deleted: it goes with the job.

    From ``Reconcile``: a ``Failed`` job is cleaned under ``Always`` and ``OnFailure``; a
    ``Completed`` one under ``Always``, ``OnCompletion`` **and an unset policy**
    (``pdj.Spec.CleanPodPolicy == ""``). ``Never``, and any other string the upstream CRD lets
    through, keep everything.
    """
    policy = policy or ""
    if completed:
        return policy in ("", CLEAN_ALWAYS, CLEAN_ON_COMPLETION)
    return policy in (CLEAN_ALWAYS, CLEAN_ON_FAILURE)


def mode(ps_replicas: int | None, worker_replicas: int | None) -> str:
    """``getPaddleJobMode`` (``status.mode``): PS if a ps spec exists, Collective if more than
    one worker, else Single. ``None`` means the spec is absent; a ps spec with 0 replicas is
    still PS mode, as upstream only checks for the spec."""
    if ps_replicas is not None:
        return MODE_PS
    if worker_replicas is not None and worker_replicas > 1:
        return MODE_COLLECTIVE
    return MODE_SINGLE


def default_restart_policy(res_type: str, intranet: str, elastic: bool, template_policy: str = "") -> str:
    """The pod ``restartPolicy`` ``constructPod`` ends up with.

    Elastic jobs always get OnFailure, overriding the template. Otherwise the template's policy
    wins; if it has none, Service-mode workers get OnFailure and everything else Never.
    """
    if elastic:
        return "OnFailure"
    if template_policy:
        return template_policy
    if res_type == WORKER and intranet == INTRANET_SERVICE:
        return "OnFailure"
    return "Never"
