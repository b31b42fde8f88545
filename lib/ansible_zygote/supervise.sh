#!/bin/sh
# Keeps the zygote server (python -m ansible_zygote) running for as long as the operator runs,
# as the kubelet keeps a sidecar running: a server that dies is started again (meanwhile the
# clients exec the real programs). Used by hack/run.sh and the operator image.
#
#   supervise.sh OPERATOR_PID SOCKET
#
# The server makes the socket's directory (mode 0700) and refuses one another user could write
# (lib/ansible_zygote/socket_dir.py). POSIX sh: the image's entrypoint runs it with /bin/sh.
operator=$1 socket=$2
lib=$(cd "$(dirname "$0")/.." && pwd)
trap 'exit 0' INT TERM
# A server that stops soon after its start (it cannot bind its socket, say) is started again
# after a pause that doubles up to a minute; one that served a while, after a second.
pause=1
while kill -0 "$operator" 2>/dev/null; do
  # Warm the templates for the operator's runs before its first reconcile (prewarm.py), once the
  # server listens (prewarm.py waits for it, and runs nothing if it never does); the run has the
  # operator's environment (PYTHONPATH is only the server's).
  python3 "$lib/ansible_zygote/prewarm.py" "$socket" &
  started=$(date +%s)
  PYTHONPATH=$lib python3 -m ansible_zygote --socket "$socket" --exit-with-pid "$operator" || true
  kill -0 "$operator" 2>/dev/null || break
  if [ $(($(date +%s) - started)) -ge 60 ]; then pause=1; fi
  echo "ansible-zygote: the server stopped; starting it again in ${pause}s" >&2
  # A second at a time: an operator that stops meanwhile is not outlived by a minute.
  waited=0
  while [ "$waited" -lt "$pause" ] && kill -0 "$operator" 2>/dev/null; do
    sleep 1
    waited=$((waited + 1))
  done
  if [ "$pause" -lt 60 ]; then pause=$((pause * 2)); fi
done
