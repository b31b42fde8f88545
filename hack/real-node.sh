#!/usr/bin/env bash
# One real node beside the KWOK nodes of the local cluster: a kubelet built from k8s.io/kubernetes
# at KUBERNETES_VERSION, containerd and runc from Debian, images built here and imported (no
# registry), pods on a bridge that exists only while the node runs. docs/real-node.md says how to
# use it and what it cannot do.
#
#   hack/real-node.sh up       build and install what is missing, start the node, wait until Ready
#   hack/real-node.sh down     stop it, delete the Node, remove everything it made, and check that
#                              the machine is as `up` found it (sysctls, iptables, links, routes,
#                              mounts, cgroups, fixed paths); exits 1 if not
#   hack/real-node.sh status   exit 0 if the node's daemons run and the Node is Ready
#   hack/real-node.sh images   (re)build the image archives
#   hack/real-node.sh prepare  install and build what `up` needs (packages, binaries, the JAX image),
#                              ahead of it (hack/prebuild.sh)
#   hack/real-node.sh import-image ARCHIVE [NAME...]
#                              import an OCI archive (hack/image-local.sh's operator image) into
#                              the running node's containerd, under the name its index carries
#                              and each NAME given
#   hack/real-node.sh restart-containerd
#                              stop the node's containerd and start it again, its containers
#                              running on (a test's fault: tests/node/test_deployment.py)
#
# The node is named after its address, REAL_NODE_IP (default 127.0.2.1: the kubelet refuses a
# loopback --node-ip, a loopback hostname-override is accepted); it carries the label and the
# NoSchedule taint ato.dev/real-node=true, so only pods that tolerate it land there. KWOK leaves it
# alone (hack/kwok/cluster.yaml: only nodes annotated kwok.x-k8s.io/node=fake are KWOK's).
# It joins the cluster in KUBECONFIG, else the local one (ATO_CLUSTER, started if needed); state
# and logs are in .local/real-node/<cluster>/. Ports: REAL_NODE_PORT (kubelet, default 19700),
# +1 (kubelet healthz), +2 (containerd's exec/attach streaming), all on REAL_NODE_IP only.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=lib.sh
source "$root/hack/lib.sh"
cluster=${ATO_CLUSTER:-ato}
state="$root/.local/real-node/$cluster"
node_ip=${REAL_NODE_IP:-127.0.2.1}
kubelet_port=${REAL_NODE_PORT:-19700}
pod_cidr=${REAL_NODE_POD_CIDR:-10.88.0.0/24}
bridge=atorn0
# The API server for the pods, in CoreDNS's network namespace (start_dns).
api_relay_port=443
cgroup_name=ato-real-node
label=ato.dev/real-node

# ensure_binaries: the Debian packages and the project-built binaries (cached, so fast when warm).
ensure_binaries() {
  "$root/hack/real-node/install-packages.sh"
  "$root/hack/build-go-tools.sh" kubelet pause coredns
}

# build_images: one single-layer OCI archive per image, under the state directory; in-mountns.sh
# imports them into containerd before the kubelet starts. The references are fixed (tag "local"):
# pods name them with imagePullPolicy Never.
build_images() {
  local out="$state/images" oci="$root/hack/real-node/oci_image.py"
  mkdir -p "$out"
  python3 "$oci" --ref ato.local/pause:local --out "$out/pause.tar" --entrypoint /pause \
    --add "$(readlink -f "$root/bin/pause"):pause"
  python3 "$oci" --ref ato.local/busybox:local --out "$out/busybox.tar" --entrypoint /bin/sh \
    --add /bin/busybox:bin/busybox --busybox-links bin/busybox
  "$root/hack/real-node/python-rootfs.sh" "$state/python-rootfs"
  python3 "$oci" --ref ato.local/python:local --out "$out/python.tar" --rootfs "$state/python-rootfs" \
    --entrypoint /usr/bin/python3 --env PYTHONUNBUFFERED=1
  rm -rf "$state/python-rootfs"
  build_jax_image
}

# build_jax_image: ato.local/jax:local, the Python image with hack/real-node/jax-requirements.txt
# (CPU wheels from PyPI, about 600 MB), built once per requirements and Python and cached under
# ATO_CACHE/images like the tools; the state directory only links it.
build_jax_image() {
  local reqs="$root/hack/real-node/jax-requirements.txt" images key archive rootfs
  images=${ATO_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ansible-training-operator}/images
  key=$({ cat "$reqs" "$root/hack/real-node/python-rootfs.sh"; sha256sum /usr/bin/python3.11 /bin/bash; } | sha256sum | cut -c1-12)
  archive="$images/jax-$key.tar"
  if [ ! -f "$archive" ]; then
    log "building the JAX image (once: $archive)"
    mkdir -p "$images"
    rootfs="$state/jax-rootfs"
    "$root/hack/real-node/python-rootfs.sh" "$rootfs"
    "$root/.venv/bin/python" -m pip install --quiet --no-deps --only-binary=:all: --implementation cp \
      --python-version 3.11 --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
      --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
      --target "$rootfs/usr/local/lib/python3.11/dist-packages" -r "$reqs"
    "$root/hack/real-node/python-rootfs.sh" --libs "$rootfs"
    python3 "$root/hack/real-node/oci_image.py" --ref ato.local/jax:local --out "$archive" \
      --rootfs "$rootfs" --entrypoint /usr/bin/python3 --env PYTHONUNBUFFERED=1
    rm -rf "$rootfs"
  fi
  ln -sfn "$archive" "$state/images/jax.tar"
}

# make_cgroup_roots: the kubelet's cgroupRoot in every hierarchy, with the daemons' cgroup in it,
# so that `down` finds every process and removes every cgroup of the node with one walk. cpuset
# needs cpus and mems before a task may join.
make_cgroup_roots() {
  local h d
  for h in /sys/fs/cgroup/*/; do
    mkdir -p "$h$cgroup_name/daemons"
    if [ -f "${h}cpuset.cpus" ]; then
      for d in "$cgroup_name" "$cgroup_name/daemons"; do
        cat "${h}cpuset.cpus" >"$h$d/cpuset.cpus"
        cat "${h}cpuset.mems" >"$h$d/cpuset.mems"
      done
    fi
  done
}

# make_pod_network: a bridge, IPv6 off, and the host's address on it (pod_ip 1), whose connected
# route sends the pod range to the bridge and nowhere else (never the default route): the kubelet
# dials the pods' probe ports through it, as a kubelet does on any node. Both go with the bridge
# at `down`. Pods talk to each other over the bridge; nothing forwards or NATs (ip_forward is
# untouched), so nothing outside the host's own address is reachable from a pod.
make_pod_network() {
  ip link add "$bridge" type bridge
  echo 1 >"/proc/sys/net/ipv6/conf/$bridge/disable_ipv6"
  ip addr add "$(pod_ip 1)/${pod_cidr#*/}" dev "$bridge"
  ip link set "$bridge" up
  mkdir -p "$state/cni/net.d" "$state/cni/ipam"
  cat >"$state/cni/net.d/10-ato-real-node.conflist" <<EOF
{"cniVersion": "1.0.0", "name": "ato-real-node", "plugins": [
  {"type": "bridge", "bridge": "$bridge", "isGateway": false, "ipMasq": false,
   "ipam": {"type": "host-local", "dataDir": "$state/cni/ipam",
            "ranges": [[{"subnet": "$pod_cidr", "rangeStart": "$(pod_ip 10)"}]]}}]}
EOF
}

# pod_ip N: the Nth address of the pod range (a /24 or larger, starting at a .0).
pod_ip() { local base=${pod_cidr%/*}; echo "${base%.*}.$1"; }

# start_dns: CoreDNS (hack/build-go-tools.sh coredns) for the pods' cluster names, at pod_ip 2 on
# the pods' bridge, in a network namespace of its own; it reads Services and EndpointSlices from
# the API server through hack/netns/relay.py, as the operator in a network namespace does. Names
# outside the cluster get NXDOMAIN: nothing is forwarded. The same namespace relays the API server
# to the pods at pod_ip 2, port 443 (there is no kube-proxy for the `kubernetes` Service), and the
# `kubernetes` Service's name resolves to that relay, not to its ClusterIP: a pod whose
# KUBERNETES_SERVICE_HOST/PORT name kubernetes.default.svc:443 (a name in the API server's
# certificate) gets a working in-cluster config (config/testing/real-node, and OLM's Subscription
# config in hack/olm-test.sh, which cannot set a hostAlias).
start_dns() {
  local api socket="$state/dns-api.sock" pid netns
  api=$(loopback_api)
  printf '%s\n' "cluster.local:53 {" "  errors" "  hosts {" "    $(pod_ip 2) kubernetes.default.svc.cluster.local" \
    "    fallthrough" "  }" "  kubernetes cluster.local {" \
    "    kubeconfig $state/kubeconfig" "  }" "}" ".:53 {" "  template ANY ANY {" \
    "    rcode NXDOMAIN" "  }" "}" >"$state/Corefile"
  (
    for h in /sys/fs/cgroup/*/; do echo "$BASHPID" >"$h$cgroup_name/daemons/cgroup.procs"; done
    setsid python3 "$root/hack/netns/relay.py" unix-to-tcp "$socket" "$api" >>"$state/logs/dns-relay.log" 2>&1 &
    exec setsid unshare --net -- "$root/hack/netns/in-netns.sh" "$api" "$socket" \
      "$(readlink -f "$root/bin/coredns")" -conf "$state/Corefile" >>"$state/logs/coredns.log" 2>&1
  ) &
  pid=$!
  netns=/proc/$pid/ns/net
  for _ in $(seq 50); do [ "$(readlink "$netns")" != "$(readlink /proc/self/ns/net)" ] && break; sleep 0.1; done
  ip link add "$bridge-dns" type veth peer name eth0 netns "$netns"
  echo 1 >"/proc/sys/net/ipv6/conf/$bridge-dns/disable_ipv6"
  ip link set "$bridge-dns" master "$bridge" up
  nsenter --net="$netns" ip addr add "$(pod_ip 2)/${pod_cidr#*/}" dev eth0
  nsenter --net="$netns" ip link set eth0 up
  (
    for h in /sys/fs/cgroup/*/; do echo "$BASHPID" >"$h$cgroup_name/daemons/cgroup.procs"; done
    exec setsid nsenter --net="$netns" python3 "$root/hack/netns/relay.py" tcp-to-unix \
      "$(pod_ip 2):$api_relay_port" "$socket" >>"$state/logs/pods-api-relay.log" 2>&1
  ) &
}

# write_containerd_config: every path under the state directory; the opt plugin (it would create
# /opt/containerd) off; the OOM score left alone (root here lacks CAP_SYS_RESOURCE); every
# registry a closed loopback port, so that an image that was not imported fails at once.
write_containerd_config() {
  mkdir -p "$state/containerd/certs.d/_default"
  printf 'server = "http://127.0.0.1:9"\n[host."http://127.0.0.1:9"]\n  capabilities = ["pull", "resolve"]\n' \
    >"$state/containerd/certs.d/_default/hosts.toml"
  cat >"$state/containerd.toml" <<EOF
version = 2
root = "$state/containerd/root"
state = "$state/containerd/state"
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.tracing.processor.v1.otlp"]
[grpc]
  address = "$state/containerd.sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "ato.local/pause:local"
  restrict_oom_score_adj = true
  disable_apparmor = true
  stream_server_address = "$node_ip"
  stream_server_port = "$((kubelet_port + 2))"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$state/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "$state/containerd/certs.d"
EOF
}

# write_kubelet_config: served on the node's loopback address only, so authentication and
# authorization are open; cgroup v1 accepted (1.36 refuses it by default); no OOM score change
# (no CAP_SYS_RESOURCE); image garbage collection and disk evictions off, as the disk is shared.
write_kubelet_config() {
  cat >"$state/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $node_ip
port: $kubelet_port
readOnlyPort: 0
healthzBindAddress: $node_ip
healthzPort: $((kubelet_port + 1))
authentication: {anonymous: {enabled: true}, webhook: {enabled: false}}
authorization: {mode: AlwaysAllow}
containerRuntimeEndpoint: unix://$state/containerd.sock
cgroupDriver: cgroupfs
cgroupRoot: /$cgroup_name
failCgroupV1: false
oomScoreAdj: 0
failSwapOn: false
resolvConf: ""
clusterDomain: cluster.local
clusterDNS: [$(pod_ip 2)]
podLogsDir: /var/log/pods
maxPods: 30
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 100Mi, nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
registerWithTaints: [{key: $label, value: "true", effect: NoSchedule}]
EOF
}

# start_daemons: containerd and the kubelet in a private mount namespace, in the cgroup
# <cgroupRoot>/daemons of every hierarchy: their children (containerd's shims too, which leave
# both the process group and the mount namespace) stay in the node's cgroups, where `down` finds
# every process of the node.
start_daemons() {
  local kubeconfig=$1
  (
    for h in /sys/fs/cgroup/*/; do echo "$BASHPID" >"$h$cgroup_name/daemons/cgroup.procs"; done
    exec setsid unshare --mount --propagation private -- "$root/hack/real-node/in-mountns.sh" "$state" \
      "$(readlink -f "$root/bin/kubelet")" --config="$state/kubelet.yaml" --kubeconfig="$kubeconfig" \
      --hostname-override="$node_ip" --root-dir="$state/kubelet" \
      --node-labels="$label=true,type=real" >>"$state/logs/node.log" 2>&1
  ) &
  echo $! >"$state/node.pid"
}

running() { [ -f "$state/node.pid" ] && kill -0 "$(cat "$state/node.pid")" 2>/dev/null; }

up() {
  use_cluster
  if running; then log "the real node runs already"; kubectl get node "$node_ip" -o name; return; fi
  [ ! -f "$state/machine-before" ] || down
  local start=$SECONDS
  ensure_binaries
  mkdir -p "$state/logs"
  "$root/hack/real-node/machine-state.sh" "$cgroup_name" >"$state/machine-before"
  build_images
  make_cgroup_roots
  make_pod_network
  cp "$KUBECONFIG" "$state/kubeconfig"
  start_dns
  write_containerd_config
  write_kubelet_config
  start_daemons "$state/kubeconfig"
  log "waiting for node $node_ip (logs: $state/logs)"
  for _ in $(seq 240); do
    kubectl get node "$node_ip" >/dev/null 2>&1 && break
    running || { tail -30 "$state/logs/kubelet.log" "$state/logs/node.log"; return 1; }
    sleep 0.5
  done
  kubectl wait --for=condition=Ready "node/$node_ip" --timeout=120s >&2
  log "node $node_ip Ready after $((SECONDS - start)) s"
  kubectl get node "$node_ip" -o name
}

# processes_of_node: every process in the node's cgroups (start_daemons says why that is all).
processes_of_node() {
  find /sys/fs/cgroup/*/"$cgroup_name" -name cgroup.procs -exec cat {} + 2>/dev/null || true
}

# stop_daemons: the kubelet first (it would restart what dies), then the containers, then the rest.
stop_daemons() {
  local pids
  [ ! -f "$state/kubelet.pid" ] || kill "$(cat "$state/kubelet.pid")" 2>/dev/null || true
  for _ in $(seq 50); do
    [ -f "$state/kubelet.pid" ] && kill -0 "$(cat "$state/kubelet.pid")" 2>/dev/null || break
    sleep 0.2
  done
  for _ in $(seq 50); do
    mapfile -t pids < <(processes_of_node | sort -u)
    [ ${#pids[@]} -gt 0 ] || return 0
    kill -KILL "${pids[@]}" 2>/dev/null || true
    sleep 0.2
  done
  log "processes of the node survived: $(processes_of_node | sort -u | tr '\n' ' ')"; return 1
}

remove_cgroup_roots() {
  local h
  for h in /sys/fs/cgroup/*/; do
    [ ! -d "$h$cgroup_name" ] || find "$h$cgroup_name" -depth -type d -exec rmdir {} +
  done
}

# check_machine: what up found, against what there is now.
check_machine() {
  [ -f "$state/machine-before" ] || return 0
  "$root/hack/real-node/machine-state.sh" "$cgroup_name" >"$state/machine-after"
  if ! diff -u "$state/machine-before" "$state/machine-after" >"$state/logs/machine.diff"; then
    log "the machine differs from before the node was up:"; cat "$state/logs/machine.diff" >&2; return 1
  fi
  log "machine unchanged (sysctls, iptables, links, routes, mounts, cgroups, fixed paths)"
}

down() {
  [ -d "$state" ] || { log "no real node"; return 0; }
  local start=$SECONDS
  stop_daemons
  remove_cgroup_roots
  # A pod's network namespace, and its end of the bridge, go once the kernel has released it.
  for _ in $(seq 50); do [ -z "$(ip -o link show master "$bridge" 2>/dev/null)" ] && break; sleep 0.2; done
  ! ip link show "$bridge" >/dev/null 2>&1 || ip link del "$bridge"
  if [ -f "$state/kubeconfig" ] && KUBECONFIG="$state/kubeconfig" kubectl get --raw /readyz >/dev/null 2>&1; then
    KUBECONFIG="$state/kubeconfig" kubectl delete node "$node_ip" --ignore-not-found >&2
    KUBECONFIG="$state/kubeconfig" kubectl delete pods -A --field-selector "spec.nodeName=$node_ip" \
      --force --grace-period=0 >/dev/null 2>&1 || true
  fi
  check_machine
  find "$state" -mindepth 1 -maxdepth 1 ! -name logs -exec rm -rf {} +
  log "real node down after $((SECONDS - start)) s (logs kept: $state/logs)"
}

status() {
  running || { log "not running"; return 1; }
  KUBECONFIG=${KUBECONFIG:-$state/kubeconfig} kubectl get node "$node_ip" \
    -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' | grep -qx True
}

# import_image ARCHIVE [NAME...]: into the running node's containerd (namespace k8s.io, the
# kubelet's), as in-mountns.sh imports the node's own images at its start; pods find it with
# imagePullPolicy Never or IfNotPresent under the name the archive carries
# (hack/image-local/layout.py reference), and under each NAME (fully qualified) given: a later
# release's tag for the same image, as OLM's upgrade test needs (hack/olm-test.sh).
import_image() {
  local archive=${1:?usage: $0 import-image ARCHIVE [NAME...]} name extra
  local ctr_=(ctr --address "$state/containerd.sock" -n k8s.io)
  running || { log "the real node does not run (hack/real-node.sh up)"; return 1; }
  name=$("${ctr_[@]}" images import "$archive" | sed -n 's/^unpacking \(.*\) (sha256:.*/\1/p')
  [ -n "$name" ] || { log "no image name in $archive"; return 1; }
  shift
  for extra in "$@"; do "${ctr_[@]}" images tag --force "$name" "$extra" >/dev/null; done
}

# restart_containerd: containerd stopped (SIGTERM, as `systemctl restart` stops it: its shims and
# the containers live on) and started again by in-mountns.sh; returns once the new one answers.
restart_containerd() {
  running || { log "the real node does not run (hack/real-node.sh up)"; return 1; }
  local old; old=$(cat "$state/containerd.pid")
  touch "$state/containerd.restart"
  kill -TERM "$old"
  for _ in $(seq 300); do
    [ "$(cat "$state/containerd.pid")" = "$old" ] || { log "containerd restarted (pid $old, now $(cat "$state/containerd.pid"))"; return 0; }
    sleep 0.1
  done
  log "containerd did not come back (logs: $state/logs/containerd.log)"; return 1
}

case ${1:-} in
  up) up ;;
  down) down ;;
  status) status ;;
  images) mkdir -p "$state"; build_images ;;
  prepare) ensure_binaries; mkdir -p "$state/images"; build_jax_image ;;
  import-image) shift; import_image "$@" ;;
  restart-containerd) restart_containerd ;;
  *) echo "usage: $0 up|down|status|images|prepare|import-image ARCHIVE [NAME...]|restart-containerd" >&2; exit 2 ;;
esac
