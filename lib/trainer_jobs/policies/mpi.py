"""The MPI policy: SSH keys, the hostfile, ``OMPI_MCA_*`` env, the launcher as a node.

Upstream source: ``pkg/runtime/framework/plugins/mpi/mpi.go`` (kubeflow/trainer v2.3.0). The pod
sets ``node`` and ``launcher`` mount the Secret ``<name>-mpi-ssh-auth`` at
``mlPolicy.mpi.sshAuthMountPath``; the launcher also mounts the ConfigMap ``<name>-mpi-hostfile``
at ``/etc/mpi`` and gets OpenMPI's env. The hostfile lists every pod of ``node`` (and the
launcher's, with ``runLauncherAsNode``) with ``slots=<numProcPerNode>``. The Secret is made once
and never changed (upstream: immutable); its keys are an ECDSA P-521 pair, which the engine
cannot generate (no cryptography here): :func:`ssh_auth_secret` leaves ``data`` out and the
apply step fills it with :func:`ssh_auth_data` (see ``plan.Plan.ssh_keys``). Nothing here is
shared with ``training_jobs.contracts.mpi``: the v1 MPIJob has no SSH Secret, another hostfile
and other env.
"""

from __future__ import annotations

import base64
from typing import Any

from trainer_jobs import api, upsert
from trainer_jobs.info import Info, PodSet, RenderError
from trainer_jobs.resources import gpus_per_node

SSH_SUFFIX = "-mpi-ssh-auth"
HOSTFILE_SUFFIX = "-mpi-hostfile"
SSH_VOLUME = "mpi-ssh-auth"
HOSTFILE_VOLUME = "mpi-hostfile"
HOSTFILE_DIR = "/etc/mpi"
HOSTFILE = "hostfile"
PRIVATE_KEY = "ssh-privatekey"
PUBLIC_KEY = "ssh-publickey"
OPENMPI = "OpenMPI"
RESERVED = (
    "OMPI_MCA_orte_default_hostfile",
    "OMPI_MCA_plm_rsh_args",
    "OMPI_MCA_orte_keep_fqdn_hostnames",
    "OMPI_MCA_orte_set_default_slots",
)


def slots(info: Info) -> int:
    """``numProcPerNode``: the TrainJob's, else the runtime's, raised to the GPUs per node when
    the runtime says 1 and there are several GPUs."""
    mpi = info.mpi or {}
    explicit = (info.trainer or {}).get("numProcPerNode")
    if explicit is not None:
        return int(explicit)
    runtime_value = int(mpi.get("numProcPerNode", 1))
    if runtime_value == 1:
        gpus = gpus_per_node(info.resources_per_node())
        if gpus > 1:
            return gpus
    return runtime_value


def ssh_volume(name: str) -> dict[str, Any]:
    items = [
        {"key": PRIVATE_KEY, "path": "id_rsa", "mode": 0o640},
        {"key": PUBLIC_KEY, "path": "id_rsa.pub", "mode": 0o644},
        {"key": PUBLIC_KEY, "path": "authorized_keys", "mode": 0o644},
    ]
    return {
        "name": SSH_VOLUME,
        "secret": {"secretName": name + SSH_SUFFIX, "defaultMode": 0o400, "items": items},
    }


def hostfile_volume(name: str) -> dict[str, Any]:
    items = [{"key": HOSTFILE, "path": HOSTFILE, "mode": 0o444}]
    return {"name": HOSTFILE_VOLUME, "configMap": {"name": name + HOSTFILE_SUFFIX, "items": items}}


def openmpi_env(info: Info) -> list[dict[str, Any]]:
    return [
        {"name": "OMPI_MCA_orte_default_hostfile", "value": f"{HOSTFILE_DIR}/{HOSTFILE}"},
        {"name": "OMPI_MCA_orte_keep_fqdn_hostnames", "value": "true"},
        {"name": "OMPI_MCA_orte_set_default_slots", "value": str(slots(info))},
        {"name": "OMPI_MCA_plm_rsh_args", "value": "-o ConnectionAttempts=10"},
    ]


def enforce(info: Info) -> None:
    if info.mpi is None:
        return
    num_nodes = (info.trainer or {}).get("numNodes")
    node_ps = info.pod_set(api.NODE)
    if num_nodes is not None and node_ps is not None:
        node_ps.count = max(int(num_nodes) - 1, 1) if info.launcher_as_node() else int(num_nodes)
    for ps in info.pod_sets:
        if ps.name in (api.NODE, api.LAUNCHER):
            _mount(info, ps)


def _mount(info: Info, ps: PodSet) -> None:
    rjob = info.rjob(ps.name)
    if rjob is None:
        return
    launcher = ps.name == api.LAUNCHER
    volumes = [ssh_volume(info.name)] + ([hostfile_volume(info.name)] if launcher else [])
    upsert.upsert_volumes(upsert.pod_spec(rjob), volumes)
    for node in [c for c in upsert.pod_spec(rjob).get("containers") or [] if c.get("name") == api.NODE]:
        upsert.upsert_mounts(node, [{"name": SSH_VOLUME, "mountPath": (info.mpi or {})["sshAuthMountPath"]}])
        if not launcher:
            continue
        upsert.upsert_mounts(node, [{"name": HOSTFILE_VOLUME, "mountPath": HOSTFILE_DIR}])
        implementation = (info.mpi or {}).get("mpiImplementation")
        if implementation != OPENMPI:
            raise RenderError(f"MPI implementation for {implementation} doesn't supported")
        upsert.upsert_env(node, openmpi_env(info))


def hostfile(info: Info) -> str:
    """``buildHostFileConfigMap``'s text: ``<host> slots=<n>`` per node pod, in pod-set order."""
    if (info.mpi or {}).get("mpiImplementation") != OPENMPI:
        return ""
    lines = []
    for ps in info.pod_sets:
        if ps.name == api.NODE or (info.launcher_as_node() and ps.name == api.LAUNCHER):
            lines += [f"{host} slots={slots(info)}\n" for host in info.endpoints(ps)]
    return "".join(lines)


def hostfile_config_map(info: Info) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": api.owned_metadata(info.trainjob, info.name + HOSTFILE_SUFFIX),
        "data": {HOSTFILE: hostfile(info)},
    }


def ssh_auth_secret(trainjob: dict[str, Any]) -> dict[str, Any]:
    """The Secret upstream creates once, without its key pair (see the module's docstring)."""
    name = str(api.meta(trainjob).get("name", ""))
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": api.owned_metadata(trainjob, name + SSH_SUFFIX),
        "type": "kubernetes.io/ssh-auth",
        "immutable": True,
    }


def ssh_auth_data(private_key_pem: bytes, public_key_authorized: bytes) -> dict[str, str]:
    """The Secret's ``data``: the private key as PEM (``EC PRIVATE KEY``, P-521) and the public
    key as an ``authorized_keys`` line (``ssh.MarshalAuthorizedKey``, newline included)."""
    return {
        PRIVATE_KEY: base64.b64encode(private_key_pem).decode(),
        PUBLIC_KEY: base64.b64encode(public_key_authorized).decode(),
    }
