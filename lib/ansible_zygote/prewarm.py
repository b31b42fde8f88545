"""One no-op run as the runtime starts its runs, through the zygote client, right after the
server starts: the server sees the fingerprints the operator's runs will have and warms their
templates before the first reconcile, instead of letting the first reconciles fall back.

    python prewarm.py SOCKET   (lib/ansible_zygote/supervise.sh runs it)

Its environment must be the operator's (supervise.sh inherits it), plus the two variables the
runtime adds to every run (their values differ per run and are not part of a fingerprint, their
presence is). The input directory mirrors the runtime's (internal/ansible/runner/internal/
inputdir), without an event URL: nothing is posted.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

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


def main() -> None:
    socket_path = sys.argv[1]
    for _ in range(300):
        if os.path.exists(socket_path):
            break
        time.sleep(0.1)
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
