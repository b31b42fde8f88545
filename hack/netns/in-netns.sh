#!/usr/bin/env bash
# Run a command in the private network namespace this script was started in (by `unshare --net`,
# see hack/olm-test.sh), with the API server reachable at its usual loopback address.
#
#   in-netns.sh API_HOST:API_PORT SOCKET COMMAND [ARG...]
#
# The namespace has only its own loopback: every port the command binds, on any address, is
# invisible outside and cannot clash with the host's. The API server is relayed through SOCKET
# (hack/netns/relay.py unix-to-tcp runs on the host side).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
api=$1 socket=$2
shift 2
ip link set lo up
python3 "$here/relay.py" tcp-to-unix "$api" "$socket" &
for _ in $(seq 50); do
  (exec 3<>"/dev/tcp/${api%:*}/${api##*:}") 2>/dev/null && break
  sleep 0.1
done
# No proxy applies inside: everything the command reaches is on this loopback.
unset HTTP_PROXY HTTPS_PROXY GRPC_PROXY http_proxy https_proxy grpc_proxy
exec "$@"
