#!/usr/bin/env bash
# Dev loop: reconcile one job once with ansible-playbook, without the operator.
#
#   hack/reconcile-once.sh tfjob mnist [namespace]
#
# Reads the CR with kubectl and passes it as the variables ansible-operator passes
# (_<group>_<kind>, ansible_operator_meta), so roles and filters run exactly as in the operator,
# against the cluster in KUBECONFIG (the local one if unset). Prints the task timings.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=lib.sh
source "$root/hack/lib.sh"
[ $# -ge 2 ] || { echo "usage: $0 KIND NAME [NAMESPACE]" >&2; exit 2; }
kind=$(tr '[:upper:]' '[:lower:]' <<<"$1") name=$2 ns=${3:-default}
use_cluster
vars=$(mktemp); trap 'rm -f "$vars"' EXIT
kubectl get "$kind" "$name" -n "$ns" -o json | "$root/.venv/bin/python" -c '
import json, sys
cr = json.load(sys.stdin)
group = cr["apiVersion"].split("/")[0].replace(".", "_").replace("-", "_")
var = "_%s_%s" % (group, cr["kind"].lower())
meta = {"name": cr["metadata"]["name"], "namespace": cr["metadata"]["namespace"]}
json.dump({var: cr, "ansible_operator_meta": meta, "training_job_role": sys.argv[1]}, sys.stdout)
' "$kind" >"$vars"
export ANSIBLE_CONFIG="$root/ansible.cfg" ANSIBLE_CALLBACKS_ENABLED=ansible.posix.profile_tasks
exec "$root/.venv/bin/ansible-playbook" "$root/playbooks/reconcile.yml" -e "@$vars" "${@:4}"
