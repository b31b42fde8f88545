#!/bin/sh
# Keeps the zygote server (python -m ansible_zygote) running for as long as the operator runs,
# as the kubelet keeps a sidecar running: a server that dies is started again a second later
# (meanwhile the clients exec the real programs). Used by hack/run.sh and the operator image.
#
#   supervise.sh OPERATOR_PID SOCKET
#
# The server makes the socket's directory (mode 0700) and refuses one another user could write
# (lib/ansible_zygote/socket_dir.py). POSIX sh: the image's entrypoint runs it with /bin/sh.
operator=$1 socket=$2
lib=$(cd "$(dirname "$0")/.." && pwd)
trap 'exit 0' INT TERM
while kill -0 "$operator" 2>/dev/null; do
  # Warm the templates for the operator's runs before its first reconcile (prewarm.py), beside
  # the server; the run has the operator's environment (PYTHONPATH is only the server's).
  python3 "$lib/ansible_zygote/prewarm.py" "$socket" &
  PYTHONPATH=$lib python3 -m ansible_zygote --socket "$socket" --exit-with-pid "$operator" || true
  kill -0 "$operator" 2>/dev/null || break
  echo "ansible-zygote: the server stopped; starting it again" >&2
  sleep 1
done
