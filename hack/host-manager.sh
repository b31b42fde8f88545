#!/usr/bin/env bash
# Helpers of the scripts that run an upstream controller manager as a process on this machine
# against the cluster in KUBECONFIG, its webhooks reached by URL on 127.0.0.1 (hack/jobset.sh,
# hack/trainer.sh). Source it after hack/lib.sh; it expects $root.
: "${root:?hack/host-manager.sh expects root, the repository}"

# cluster_if_up: the cluster in KUBECONFIG, else the local one if it runs (exported); false when
# there is none. For `down`, which has nothing to clean in a cluster that is not there.
cluster_if_up() {
  [ -n "${KUBECONFIG:-}" ] && return
  "$root/hack/cluster.sh" running || return 1
  KUBECONFIG=$("$root/hack/cluster.sh" kubeconfig)
  export KUBECONFIG
}

# module_dir MODULE VERSION: the module's source in the Go module cache (downloaded if needed).
module_dir() {
  local dir
  dir=$(go mod download -json "$1@$2" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
  [ -d "$dir" ] || { log "$1@$2 is not in the Go module cache"; return 1; }
  echo "$dir"
}

# established CRD...: wait until each CRD is Established. Not `kubectl wait` alone: it fails
# ("accessor error") on a CRD just created, whose status has no conditions yet.
established() {
  local crd
  for crd in "$@"; do
    for _ in $(seq 60); do
      [ "$(kubectl get crd "$crd" -o go-template='{{range .status.conditions}}{{if eq .type "Established"}}{{.status}}{{end}}{{end}}')" = True ] &&
        continue 2
      sleep 1
    done
    log "CRD $crd is not Established after 60 s"; return 1
  done
}

# serving_certificates DIR CA_NAME: a CA (DIR/ca.crt) and a serving certificate for IP 127.0.0.1
# it signed (DIR/tls.crt, DIR/tls.key), made once. The API server trusts the CA through the
# caBundle of the webhook configurations.
serving_certificates() {
  local certs=$1
  [ -s "$certs/tls.crt" ] && return
  mkdir -p "$certs"
  openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=$2" \
    -keyout "$certs/ca.key" -out "$certs/ca.crt" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" \
    -keyout "$certs/tls.key" -out "$certs/tls.csr" 2>/dev/null
  openssl x509 -req -in "$certs/tls.csr" -CA "$certs/ca.crt" -CAkey "$certs/ca.key" \
    -CAcreateserial -days 3650 -out "$certs/tls.crt" \
    -extfile <(printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n') 2>/dev/null
  chmod 600 "$certs"/*.key
}

# apply_webhooks KUSTOMIZE_DIR URL CA_FILE [NAME_PREFIX]: upstream's webhook configurations (the
# kustomization's patches applied), each pointed at URL + its path, trusting CA_FILE.
apply_webhooks() {
  kubectl kustomize "$1" | "$root/.venv/bin/python" "$root/hack/loopback_webhooks.py" "${@:2}" |
    kubectl apply --server-side --force-conflicts -f - >&2
}

# free_ports PORT...: fail, naming it, when a port of 127.0.0.1 is already taken.
free_ports() {
  local p
  for p in "$@"; do
    if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      log "127.0.0.1:$p is in use (another checkout's manager? see the port variables of $0)"
      return 1
    fi
  done
}

# started_here PIDFILE: the pid file names a live process of a binary of this checkout's bin/ (not
# another process that took over the pid of one that died).
started_here() {
  [ -f "$1" ] || return 1
  local pid exe; pid=$(cat "$1")
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
  exe=$(tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | head -1)
  [[ $exe == "$root/bin/"* ]]
}

# manager_running PIDFILE READYZ_URL: the process of the pid file lives and reports ready.
manager_running() {
  started_here "$1" && curl -fsS --noproxy '*' -m 5 "$2" >/dev/null 2>&1
}

# start_manager PIDFILE LOGFILE READYZ_URL COMMAND...: start COMMAND in a session of its own (a
# Ctrl-C of the caller leaves it to `down`), then wait until it is ready or has exited.
start_manager() {
  local pidfile=$1 logfile=$2 readyz=$3; shift 3
  setsid "$@" >>"$logfile" 2>&1 </dev/null &
  local pid=$!
  echo "$pid" >"$pidfile"
  for _ in $(seq 180); do
    # Not started_here: until it has exec'd, the child's command line is still setsid's.
    curl -fsS --noproxy '*' -m 5 "$readyz" >/dev/null 2>&1 && return
    kill -0 "$pid" 2>/dev/null || { log "it exited:"; tail -30 "$logfile" >&2; return 1; }
    sleep 1
  done
  log "not ready after 180 s (log: $logfile)"; tail -30 "$logfile" >&2; return 1
}

# stop_manager PIDFILE: SIGTERM, SIGKILL after 30 s; the pid file is removed.
stop_manager() {
  started_here "$1" || { rm -f "$1"; return 0; }
  local pid; pid=$(cat "$1")
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 30); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
  kill -KILL "$pid" 2>/dev/null || true
  rm -f "$1"
}
