#!/usr/bin/env bash
# The real node's containerd and kubelet, in one private mount namespace (hack/real-node.sh starts
# this script as `unshare --mount --propagation private -- in-mountns.sh STATE KUBELET ARG...`).
#
# Both daemons share it: the kubelet's volume mounts must be visible to containerd. Everything
# mounted here disappears with the namespace, which is what keeps the machine unchanged:
# - fresh tmpfs over /run, /var/log and /var/lib, the fixed paths the daemons and the CNI library
#   write whatever their configuration says (/run/containerd/s, /run/netns, /var/log/pods,
#   /var/log/containers, /var/lib/kubelet/device-plugins, /var/lib/cni);
# - the kernel tunables the kubelet would otherwise set machine-wide (setupKernelTunables in
#   pkg/kubelet/cm) are files here that already hold the values it wants.
# The script ends, and takes the other daemon down, when either daemon exits, but for containerd
# stopped by `hack/real-node.sh restart-containerd` (the marker STATE/containerd.restart): that one
# is started again, as a service manager restarts it; its shims, and so the containers, live on.
set -euo pipefail
state=$1 kubelet=$2
shift 2

for d in /run /var/log /var/lib; do mount -t tmpfs -o mode=0755 ato-real-node "$d"; done
declare -A tunables=(
  [vm/overcommit_memory]=1 [vm/panic_on_oom]=0 [kernel/panic]=10 [kernel/panic_on_oops]=1
  [kernel/keys/root_maxkeys]=1000000 [kernel/keys/root_maxbytes]=25000000
)
mkdir -p "$state/sysctl"
for key in "${!tunables[@]}"; do
  file="$state/sysctl/${key//\//.}"
  echo "${tunables[$key]}" >"$file"
  mount --bind "$file" "/proc/sys/$key"
done

start_containerd() {
  containerd --config "$state/containerd.toml" >>"$state/logs/containerd.log" 2>&1 &
  containerd_pid=$!
  for _ in $(seq 100); do
    ctr --address "$state/containerd.sock" version >/dev/null 2>&1 && break
    sleep 0.1
  done
  echo "$containerd_pid" >"$state/containerd.pid"
}
start_containerd
# The pause image first: no sandbox can start without it, and no registry would give it.
for archive in "$state"/images/*.tar; do
  ctr --address "$state/containerd.sock" -n k8s.io images import "$archive" >>"$state/logs/import.log"
done

# No sbin on its PATH: the kubelet adds iptables chains whenever it finds iptables.
PATH=/usr/local/bin:/usr/bin:/bin "$kubelet" "$@" >>"$state/logs/kubelet.log" 2>&1 &
kubelet_pid=$!
echo "$kubelet_pid" >"$state/kubelet.pid"
trap 'kill "$kubelet_pid" "$containerd_pid" 2>/dev/null || true' TERM INT
while wait -n "$kubelet_pid" "$containerd_pid" || true; do
  kill -0 "$kubelet_pid" 2>/dev/null && [ -f "$state/containerd.restart" ] || break
  rm -f "$state/containerd.restart"
  start_containerd
done
kill "$kubelet_pid" "$containerd_pid" 2>/dev/null || true
wait || true
