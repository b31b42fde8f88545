# The operator image: the ansible-operator runtime at the version this project runs locally
# (versions.env: ANSIBLE_OPERATOR_IMAGE), plus what the runtime lacks: our roles, filter plugins,
# action plugins and the engine they share (lib/). The roles use no collection, so nothing is
# fetched from Galaxy.
FROM quay.io/operator-framework/ansible-operator:v1.42.2

# ANSIBLE_INVENTORY_ENABLED: the runtime writes one INI inventory per run; trying the other
# inventory plugins first costs every run their loading (docs/performance.md).
ENV ANSIBLE_CONFIG=${HOME}/ansible.cfg \
    ANSIBLE_GATHERING=explicit \
    ANSIBLE_INVENTORY_ENABLED=ini

COPY ansible.cfg ${HOME}/ansible.cfg
COPY watches.yaml ${HOME}/watches.yaml
COPY roles/ ${HOME}/roles/
COPY lib/ ${HOME}/lib/
COPY filter_plugins/ ${HOME}/filter_plugins/
COPY action_plugins/ ${HOME}/action_plugins/
COPY playbooks/ ${HOME}/playbooks/
# Bytecode at build time: the runtime's user cannot write __pycache__ next to these files, so
# without it every reconcile compiles the filter and action plugins and lib/ again. Nor can it
# here: COPY makes them root's, and the runtime image ends as USER 1001, so the RUN is root's
# (hack/image-local.sh's chroot showed the RUN failing as 1001 with PermissionError).
USER 0
RUN python3 -m compileall -q "${HOME}/lib" "${HOME}/action_plugins" "${HOME}/filter_plugins"
USER 1001

# The runtime keeps each job's ansible-runner directory in /tmp/ansible-operator/runner, and
# /tmp is the pod's emptyDir (config/manager/manager.yaml), which outlives a container restart. A
# container stopped in the middle of a pass can leave a job's artifacts/latest link pointing at
# a run directory never created; ansible-runner's artifact rotation then crashes on it in that
# job's next pass, and the runtime marks the job with a Failure condition that is not
# Kubeflow's (docs/troubleshooting.md). Nothing in the directory is needed across a restart (each
# pass writes its inputs again), so every start begins without it. The runtime's own entrypoint
# and arguments are kept (the Deployment's args are appended as "$@").
#
# The Ansible zygote (lib/ansible_zygote, docs/architecture.md), as hack/run.sh starts it: unless
# ANSIBLE_ZYGOTE=false, its client goes first on PATH (as ansible-runner and ansible-playbook) and
# its server runs beside the runtime, a child of the same process (so inside the container's
# cgroup), restarted by supervise.sh if it dies. Its socket lives in /tmp, the pod's emptyDir.
# The machines this project is developed on have no container engine: hack/image-local.sh assembles
# the same layout there (hack/image-local/layout.py; tests/unit/test_image_local.py keeps the two
# in step), and the entrypoint is kept to what hack/run.sh runs and tests there.
ENV ANSIBLE_ZYGOTE=true
ENTRYPOINT ["/tini", "--", "/bin/sh", "-c", "rm -rf /tmp/ansible-operator/runner && if [ \"$ANSIBLE_ZYGOTE\" != false ]; then export ANSIBLE_ZYGOTE_SOCKET=/tmp/ansible-zygote/server.sock PATH=\"$HOME/lib/ansible_zygote/bin:$PATH\"; \"$HOME/lib/ansible_zygote/supervise.sh\" $$ \"$ANSIBLE_ZYGOTE_SOCKET\" & fi; exec /usr/local/bin/ansible-operator run --watches-file=./watches.yaml \"$@\"", "ansible-operator"]
