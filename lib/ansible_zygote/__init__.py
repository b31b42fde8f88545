"""A pre-forked Ansible ("zygote") for the ansible-operator runtime.

The runtime starts ``ansible-runner`` for every reconcile, and ansible-runner starts
``ansible-playbook``: two Python interpreters that import the same modules every time (most of a
reconcile's CPU, docs/performance.md). With the zygote, both names on ``PATH`` are a small client
(:mod:`ansible_zygote.client`, ``lib/ansible_zygote/bin/``); the server
(:mod:`ansible_zygote.server`) keeps a template per program and environment that has imported the
program once (:mod:`ansible_zygote.template`) and forks it per run; the child takes over the
client's stdio, environment, directory, umask and signals and runs the program's own script
(:mod:`ansible_zygote.child`). The client exits only once the child has, with its status.

Whenever the zygote cannot serve a run as the real program would run (no server, no warm
template for this exact environment and configuration, ``ANSIBLE_ZYGOTE=false``), the client
execs the real program. docs/architecture.md has the design and its limits.
"""
