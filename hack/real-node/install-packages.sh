#!/usr/bin/env bash
# The Debian packages of the real node (hack/real-node.sh): containerd, runc, the CNI plugins and
# busybox-static (the shell of the test image).
# Installed with apt from Debian's archive; nothing is downloaded otherwise. Their own services are
# not started (policy-rc.d) nor used: hack/real-node.sh runs containerd with its own config and
# state under the project's state directory. crun is not used: it refuses cgroup v1 hybrid mode.
set -euo pipefail
packages=(containerd runc containernetworking-plugins busybox-static)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -gt 0 ] || exit 0
if [ "$(id -u)" != 0 ]; then
  echo "install-packages: ${missing[*]} missing; run as root (apt-get install)" >&2; exit 2
fi
echo "install-packages: apt-get install ${missing[*]}" >&2
apt-get update -qq
# No service of the packages may start: the node's containerd is the project's own process.
policy=/usr/sbin/policy-rc.d created_policy=false
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && created_policy=true
fi
trap '$created_policy && rm -f "$policy"' EXIT
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
