"""One no-op run as the runtime starts its runs, through the zygote client, right after the
server starts: the server sees the fingerprints the operator's runs will have and warms their
templates before the first reconcile, instead of letting the first reconciles fall back.

    python prewarm.py SOCKET   (lib/ansible_zygote/supervise.sh runs it)

It runs only once a server of this user answers on SOCKET: never in place of a server that
failed to start.

Its environment must be the operator's (supervise.sh inherits it), plus the two variables the
runtime adds to every run (their values differ per run and are not part of a fingerprint, their
presence is). The input directory mirrors the runtime's (internal/ansible/runner/internal/
inputdir), without an event URL: nothing is posted.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time

# A server starts listening within a second or two; a busy machine may take longer.
WAIT_S = 30.0
NOOP = "---\n- hosts: localhost\n  gather_facts: false\n  tasks: []\n"


def input_dir(root: str) -> str:
    for sub in ("env", "inventory", "project"):
        os.makedirs(os.path.join(root, sub))
    kubeconfig = os.path.join(root, "kubeconfig")
    with open(os.path.join(root, "env", "envvars"), "w") as f:
        json.dump({"K8S_AUTH_KUBECONFIG": kubeconfig, "KUBECONFIG": kubeconfig}, f)
    venv = os.environ.get("VIRTUAL_ENV")
    python = os.path.join(venv, "bin", "python3") if venv else "{{ansible_playbook_python}}"
    with open(os.path.join(root, "inventory", "hosts"), "w") as f:
        f.write(f"localhost ansible_connection=local ansible_python_interpreter={python}")
    playbook = os.path.join(root, "noop.yml")
    with open(playbook, "w") as f:
        f.write(NOOP)
    return playbook


def server_answers(socket_path: str) -> bool:
    """A server of this user accepts connections on the path (a socket file alone may be one
    left by a server that died, which nothing listens on)."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        probe.connect(socket_path)
        cred = probe.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except OSError:
        return False
    finally:
        probe.close()
    return struct.unpack("3i", cred)[1] == os.geteuid()


def wait_for_server(socket_path: str, wait_s: float = WAIT_S) -> bool:
    deadline = time.monotonic() + wait_s
    while not server_answers(socket_path):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)
    return True


def main() -> None:
    socket_path = sys.argv[1]
    if not wait_for_server(socket_path):
        # Without a server the run would only be one more real Ansible run (supervise.sh starts
        # a prewarm beside each start of the server, failing ones included).
        print(f"ansible-zygote: no server on {socket_path}: nothing to prewarm", file=sys.stderr)
        return
    root = tempfile.mkdtemp(prefix="ansible-zygote-prewarm.")
    try:
        playbook = input_dir(root)
        kubeconfig = os.path.join(root, "kubeconfig")
        env = {**os.environ, "K8S_AUTH_KUBECONFIG": kubeconfig, "KUBECONFIG": kubeconfig}
        subprocess.run(
            ["ansible-runner", "run", root, "--rotate-artifacts", "1", "-p", playbook, "-i", "prewarm"],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=False,
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
