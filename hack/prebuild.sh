#!/usr/bin/env bash
# What the later steps of `make test` need, built or fetched ahead: their Go tools in the order
# the steps use them, then the real node's packages, binaries and JAX image, and the operator image. hack/test.sh runs it
# niced in the background from the start, and each step waits only for what it uses: a file
# named after each item appears in DIR once it is ready.
#
#   hack/prebuild.sh DIR
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
done_dir=${1:?usage: hack/prebuild.sh DIR}
mkdir -p "$done_dir"
for tool in training-operator volcano jobset scheduler-plugins kueue trainer; do
  "$root/hack/build-go-tools.sh" "$tool"
  touch "$done_dir/$tool"
done
"$root/hack/real-node.sh" prepare
touch "$done_dir/real-node"
# The operator image the real-node stage deploys (hack/real-node-operator.sh builds it again: with
# nothing changed, that reuses this archive).
"$root/hack/image-local.sh"
touch "$done_dir/operator-image"
"$root/hack/build-go-tools.sh" opm olm
touch "$done_dir/olm"
