#!/usr/bin/env python3
"""The operator image's layout, as the Dockerfile's result has it: one place that
hack/image-local.sh builds from and tests/unit/test_image_local.py compares with the Dockerfile.

Two parts, as the Dockerfile's image has two origins:
- RUNTIME: what the base image (ansible-operator-plugins' images/ansible-operator/Dockerfile at
  ANSIBLE_OPERATOR_VERSION) gives: its user, home, environment and files;
- PROJECT: what this project's Dockerfile adds (ENV, COPY, the bytecode RUN, ENTRYPOINT).

    layout.py oci-args         the image config as oci_image.py arguments, NUL-separated
    layout.py reference IMG    IMG as the kubelet asks containerd for it (docker.io/library/...)
"""

from __future__ import annotations

import json
import sys

HOME = "/opt/ansible"
USER_NAME = "ansible"
USER_UID = 1001
USER_GID = 0

# The runtime image: UBI's PATH (oci_image.py writes it first), then its own ENV lines.
RUNTIME_ENV = [
    ("TINI_VERSION", "v0.19.0"),
    ("HOME", HOME),
    ("USER_NAME", USER_NAME),
    ("USER_UID", str(USER_UID)),
]
RUNTIME_USER = str(USER_UID)
RUNTIME_WORKDIR = HOME
# The runtime's files outside the Python packages (its Dockerfile's RUN lines).
RUNTIME_PASSWD_LINE = f"{USER_NAME}:x:{USER_UID}:{USER_GID}:{USER_NAME} user:{HOME}:/sbin/nologin"
RUNTIME_FILES = {
    "/etc/ansible/hosts": "localhost ansible_connection=local\n",
    "/etc/ansible/ansible.cfg": "[defaults]\nroles_path = /opt/ansible/roles\nlibrary = /usr/share/ansible/openshift\n",
}
TINI = "/tini"
OPERATOR_BINARY = "/usr/local/bin/ansible-operator"

# This project's Dockerfile, in its order.
PROJECT_ENV = [
    ("ANSIBLE_CONFIG", f"{HOME}/ansible.cfg"),
    ("ANSIBLE_GATHERING", "explicit"),
    ("ANSIBLE_INVENTORY_ENABLED", "ini"),
    ("ANSIBLE_ZYGOTE", "true"),
]
# (source in the repository, destination in the image); a source ending in / is a directory
# whose contents are copied, as COPY does.
PROJECT_COPIES = [
    ("ansible.cfg", f"{HOME}/ansible.cfg"),
    ("watches.yaml", f"{HOME}/watches.yaml"),
    ("roles/", f"{HOME}/roles/"),
    ("lib/", f"{HOME}/lib/"),
    ("filter_plugins/", f"{HOME}/filter_plugins/"),
    ("action_plugins/", f"{HOME}/action_plugins/"),
    ("playbooks/", f"{HOME}/playbooks/"),
]
# The Dockerfile's bytecode RUN: compiled as root, read by the runtime's user.
PROJECT_COMPILED = [f"{HOME}/lib", f"{HOME}/action_plugins", f"{HOME}/filter_plugins"]
# The Dockerfile switches to root for that RUN and back to the runtime's user.
PROJECT_USER = RUNTIME_USER
ENTRYPOINT = [
    TINI,
    "--",
    "/bin/sh",
    "-c",
    'rm -rf /tmp/ansible-operator/runner && if [ "$ANSIBLE_ZYGOTE" != false ]; then'
    " export ANSIBLE_ZYGOTE_SOCKET=/tmp/ansible-zygote/server.sock"
    ' PATH="$HOME/lib/ansible_zygote/bin:$PATH";'
    ' "$HOME/lib/ansible_zygote/supervise.sh" $$ "$ANSIBLE_ZYGOTE_SOCKET" & fi;'
    ' exec /usr/local/bin/ansible-operator run --watches-file=./watches.yaml "$@"',
    "ansible-operator",
]


def image_env() -> list[str]:
    """The image's Env after PATH, in the order a build would write it."""
    return [f"{k}={v}" for k, v in RUNTIME_ENV + PROJECT_ENV]


def oci_args() -> list[str]:
    """One --option=value each, the entrypoint as JSON: argparse would take its "--" for the end
    of the options."""
    args = [f"--user={USER_UID}:{USER_GID}", f"--workdir={RUNTIME_WORKDIR}"]
    args += [f"--env={env}" for env in image_env()]
    return [*args, f"--entrypoint-json={json.dumps(ENTRYPOINT)}"]


def reference(image: str) -> str:
    """The fully qualified name: the kubelet normalises a pod's image (``name:tag`` is
    ``docker.io/library/name:tag``) and finds only an image imported under that name."""
    first, _, rest = image.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        return image
    return f"docker.io/{image}" if rest else f"docker.io/library/{image}"


if __name__ == "__main__":
    match sys.argv[1:]:
        case ["oci-args"]:
            sys.stdout.write("\0".join(oci_args()) + "\0")
        case ["reference", image]:
            print(reference(image))
        case _:
            sys.exit(__doc__)
