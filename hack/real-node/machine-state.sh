#!/usr/bin/env bash
# Print what the real node could change machine-wide, so that hack/real-node.sh can check that `up`
# then `down` left the machine as it found it: every sysctl (less the counters that move on their
# own), the iptables and ip6tables rules, the root network namespace's links and routes, the
# mounts, the node's cgroup roots and the fixed paths the kubelet and containerd write to whatever
# their configuration says.
#
#   machine-state.sh CGROUP_NAME
set -euo pipefail
cgroup_name=$1
# Kernel counters and random values, different on every read.
volatile='^(fs\.(dentry-state|file-nr|inode-nr|inode-state|aio-nr|quota\.[a-z_]+)|kernel\.(ns_last_pid|pty\.nr)|kernel\.random\.(uuid|entropy_avail)|net\.netfilter\.nf_conntrack_count) '

section() { printf '## %s\n' "$1"; }
section sysctl
sysctl -a 2>/dev/null | grep -Ev "$volatile" || true
for save in iptables-save ip6tables-save; do
  section "$save"
  # Comment lines carry the time of the dump; counters are not printed without -c.
  if command -v "$save" >/dev/null; then "$save" 2>/dev/null | grep -v '^#' || true; fi
done
section links
ip -o link show | awk -F': ' '{print $2}' | sed 's/@.*//' | sort
section routes
ip route show table all | sort
ip -6 route show table all | sort
section mounts
awk '{print $2, $3}' /proc/self/mounts | sort
section cgroups
for h in /sys/fs/cgroup/*/; do [ -e "$h$cgroup_name" ] && echo "$h$cgroup_name"; done
section paths
for p in /var/lib/kubelet /var/log/containers /var/log/pods /run/containerd /var/run/netns /run/netns \
  /opt/containerd /etc/cni /var/lib/cni /etc/containerd /var/lib/containerd; do
  [ -e "$p" ] && echo "$p"
done
true
