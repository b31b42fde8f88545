#!/usr/bin/env bash
# The operator image without a container engine: the same layout as the Dockerfile's result
# (hack/image-local/layout.py), assembled from the parts that do reach these machines, written as
# an OCI archive that containerd imports (`hack/real-node.sh import-image ARCHIVE`).
#
#   hack/image-local.sh          build .local/image/rootfs and .local/image/ansible-training-operator.oci.tar
#                                (IMG names it; default ansible-training-operator:OPERATOR_VERSION)
#   hack/image-local.sh check    run the built root file system's programs in a chroot (no engine)
#
# Where the parts come from, since no base-image registry is reachable:
# - the base: a Debian bookworm root file system made by mmdebstrap from Debian's archive, the
#   `essential` set (sh, coreutils, the libc: what UBI minimal gives the runtime image) plus
#   python3-minimal, libpython3.11-stdlib and tini. Debian packages are the one honest source of a
#   whole Python and libc here: PyPI has no CPython build (python-build-standalone is not on it),
#   and copying the machine's own files would give an image nobody could rebuild the same way.
#   The difference that follows: Python 3.11 (Debian's) where the runtime image has UBI's 3.12;
# - the Python packages: exactly the runtime image's, the Pipfile.lock of
#   images/ansible-operator at ANSIBLE_OPERATOR_VERSION (read from the ansible-operator-plugins
#   Go module, which the operator binary is built from anyway), wheels from PyPI checked against
#   the lock's hashes, and the runtime's own ansible_runner_http from the same directory;
# - /usr/local/bin/ansible-operator: hack/build-go-tools.sh ansible-operator, as `make run` has it;
# - /tini: Debian's tini-static (0.19.0, the release the runtime image downloads);
# - this project's files: the Dockerfile's COPY lines, bytecode compiled in the image.
# The runtime part (base, packages, binary, user) is cached under ATO_CACHE/images by a key of its
# inputs; only the project's files are copied again on each run. Must run as root (chown, chroot).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=lib.sh
source "$root/hack/lib.sh"
cache=${ATO_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ansible-training-operator}
out="$root/.local/image"
rootfs="$out/rootfs"
archive="$out/ansible-training-operator.oci.tar"
img=${IMG:-ansible-training-operator:$OPERATOR_VERSION}
here="$root/hack/image-local"
debian_packages=(python3-minimal libpython3.11-stdlib tini)

# ensure_host_packages: mmdebstrap builds the base; Debian's pip and setuptools install the wheels
# for Debian's Python layout (/usr/local/lib/python3.11/dist-packages, scripts run /usr/bin/python3).
ensure_host_packages() {
  local p missing=()
  for p in mmdebstrap python3-pip python3-setuptools; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  [ ${#missing[@]} -gt 0 ] || return 0
  log "apt-get install ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
}

# runtime_source: images/ansible-operator of the ansible-operator-plugins module.
runtime_source() {
  local dir
  dir=$(GOTOOLCHAIN=local go mod download -json \
    "github.com/operator-framework/ansible-operator-plugins@$ANSIBLE_OPERATOR_VERSION" |
    sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
  echo "$dir/images/ansible-operator"
}

# debian_base DIR: the essential set and the Debian packages above, without manuals, locales and
# documentation (their copyright files stay), from the machine's own apt sources.
debian_base() {
  local sources=()
  [ ! -f /etc/apt/sources.list.d/debian.sources ] || sources=(/etc/apt/sources.list.d/debian.sources)
  mmdebstrap --quiet --mode=unshare --variant=essential \
    --include="$(IFS=,; echo "${debian_packages[*]}")" \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
    --dpkgopt='path-exclude=/usr/share/info/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    bookworm "$1" "${sources[@]}"
}

# python_packages DIR RUNTIME_SOURCE: the lock's wheels, then ansible_runner_http, into Debian's
# /usr/local of DIR. Compiled later, in the image (compile_all).
python_packages() {
  local dir=$1 src=$2 work
  work=$(mktemp -d)
  python3 "$here/assemble.py" requirements "$src/Pipfile.lock" >"$work/requirements.txt"
  # The module cache is read-only and pip builds a local project in place.
  cp -r "$src/ansible_runner_http" "$work/"
  chmod -R u+w "$work/ansible_runner_http"
  local pip=(/usr/bin/python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --root "$dir"
    --no-deps --no-compile --ignore-installed --break-system-packages --no-warn-script-location)
  "${pip[@]}" --only-binary=:all: --require-hashes -r "$work/requirements.txt"
  "${pip[@]}" --no-build-isolation "$work/ansible_runner_http"
  rm -rf "$work"
}

# compile_all DIR PATH...: every file dated 0 (the layer's date, so the bytecode's recorded source
# dates hold in the image), then PATHs compiled by the image's own Python.
compile_all() {
  local dir=$1; shift
  find "$dir" -xdev -exec touch -h -d @0 {} +
  chroot "$dir" /usr/bin/python3 -m compileall -q "$@" >&2
}

# runtime_key: what the runtime part is made of.
runtime_key() {
  local src=$1
  { cat "$0" "$here/assemble.py" "$here/layout.py" "$src/Pipfile.lock"
    echo "${debian_packages[*]} $ANSIBLE_OPERATOR_VERSION"
    sha256sum "$(readlink -f "$root/bin/ansible-operator")" | cut -d' ' -f1
  } | sha256sum | cut -c1-12
}

# runtime_tar: the cached archive of the runtime image's file system (built when missing).
runtime_tar() {
  local src key tar dir
  "$root/hack/build-go-tools.sh" ansible-operator
  src=$(runtime_source)
  key=$(runtime_key "$src")
  tar="$cache/images/ansible-operator-runtime-$ANSIBLE_OPERATOR_VERSION-$key.tar"
  if [ ! -f "$tar" ]; then
    log "building the runtime file system (once: $tar)"
    ensure_host_packages
    dir="$out/runtime-rootfs"
    rm -rf "$dir"
    debian_base "$dir"
    python_packages "$dir" "$src"
    python3 "$here/assemble.py" runtime "$dir" "$(readlink -f "$root/bin/ansible-operator")"
    # The stdlib's bytecode too: Debian compiled it against the packages' dates, not 0.
    compile_all "$dir" /usr/lib/python3.11 /usr/local/lib/python3.11/dist-packages
    mkdir -p "$cache/images"
    tar -C "$dir" --numeric-owner -cf "$tar.tmp" .
    mv "$tar.tmp" "$tar"
    rm -rf "$dir"
  fi
  echo "$tar"
}

# project_key RUNTIME_TAR: what the image is made of: the runtime part, IMG, the scripts that
# assemble it and every file the Dockerfile copies (path, mode, content). The same key means the
# same image, so a build with nothing changed reuses the archive (the real-node stage builds on
# every run).
project_key() {
  local sources=()
  mapfile -t sources < <(python3 -c 'import sys; sys.path.insert(0, sys.argv[1]); import layout
print(*(source.rstrip("/") for source, _ in layout.PROJECT_COPIES), sep="\n")' "$here")
  { echo "$1 $img"
    cat "$0" "$here/assemble.py" "$here/layout.py" "$root/hack/real-node/oci_image.py"
    cd "$root"
    find "${sources[@]}" -type f ! -name '*.pyc' ! -path '*/__pycache__/*' -printf '%m %p\n' | sort
    find "${sources[@]}" -type f ! -name '*.pyc' ! -path '*/__pycache__/*' -print0 | sort -z | xargs -0 sha256sum
  } | sha256sum | cut -c1-12
}

build() {
  local start=$SECONDS tar args=() key
  # Gentle on a shared machine: every step below (unpacking, compiling, hashing) at a lower priority.
  renice -n 5 -p $$ >/dev/null
  mkdir -p "$out"
  tar=$(runtime_tar)
  key=$(project_key "$tar")
  if [ -f "$archive" ] && [ -d "$rootfs" ] && [ "$(cat "$archive.key" 2>/dev/null)" = "$key" ]; then
    log "$archive: unchanged (key $key), after $((SECONDS - start)) s"
    return
  fi
  rm -f "$archive.key"
  rm -rf "$rootfs"
  mkdir -p "$rootfs"
  tar -C "$rootfs" --numeric-owner -xpf "$tar"
  python3 "$here/assemble.py" project "$rootfs" "$root"
  local compiled=()
  mapfile -t compiled < <(python3 -c 'import sys; sys.path.insert(0, sys.argv[1]); import layout
print(*layout.PROJECT_COMPILED, sep="\n")' "$here")
  compile_all "$rootfs" "${compiled[@]}"
  mapfile -d '' args < <(python3 "$here/layout.py" oci-args)
  python3 "$root/hack/real-node/oci_image.py" --ref "$(python3 "$here/layout.py" reference "$img")" \
    --out "$archive" --rootfs "$rootfs" --keep-owners "${args[@]}"
  echo "$key" >"$archive.key"
  log "$archive: $(du -h "$archive" | cut -f1), $(python3 "$here/layout.py" reference "$img"), after $((SECONDS - start)) s"
}

# in_image USER COMMAND...: COMMAND in the root file system as USER (UID:GID), with the image's
# environment and working directory, in mount and PID namespaces of its own: /proc, /dev's
# character devices, /dev/shm, ptys (ansible-runner runs Ansible on one) and a /tmp that disappear
# with them: what a container runtime gives a container.
in_image() {
  local user=$1 env=()
  shift
  mapfile -t env < <(python3 -c 'import sys; sys.path.insert(0, sys.argv[1]); import layout
print("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", *layout.image_env(), sep="\n")' "$here")
  unshare --mount --pid --fork --propagation private -- /bin/sh -euc '
    r=$1; u=$2; shift 2
    mount -t proc proc "$r/proc"; mount -t tmpfs tmp "$r/tmp"; mount -t tmpfs dev "$r/dev"
    for d in null zero random urandom tty; do touch "$r/dev/$d"; mount --bind "/dev/$d" "$r/dev/$d"; done
    mkdir "$r/dev/shm"; mount -t tmpfs -o mode=1777 shm "$r/dev/shm"
    mkdir "$r/dev/pts"; mount -t devpts -o newinstance,ptmxmode=0666 devpts "$r/dev/pts"; ln -s pts/ptmx "$r/dev/ptmx"
    exec chroot --userspec="$u" "$r" /usr/bin/env -i "$@"' sh "$rootfs" "$user" "${env[@]}" \
    /bin/sh -c 'cd "$HOME" && exec "$@"' sh "$@"
}

# zygote_run: a playbook whose task runs a command on the local connection, through the zygote.
# shellcheck disable=SC2016 # expanded in the image
zygote_run='export ANSIBLE_ZYGOTE_SOCKET=/tmp/ansible-zygote/server.sock PATH="$HOME/lib/ansible_zygote/bin:$PATH"
sleep 600 & operator=$!
"$HOME/lib/ansible_zygote/supervise.sh" "$operator" "$ANSIBLE_ZYGOTE_SOCKET" 2>/tmp/zygote.log &
for _ in $(seq 120); do [ -S "$ANSIBLE_ZYGOTE_SOCKET" ] && break; sleep 0.5; done
mkdir -p /tmp/run/project /tmp/run/inventory
printf "%s\n" "- hosts: localhost" "  gather_facts: false" "  tasks:" "    - command: id -u" "      register: r" \
  "    - assert: {that: [r.stdout == \"1001\"]}" >/tmp/run/project/check.yml
echo "localhost ansible_connection=local" >/tmp/run/inventory/hosts
stats() { PYTHONPATH=$HOME/lib python3 -m ansible_zygote.server --socket "$ANSIBLE_ZYGOTE_SOCKET" --stats; }
# The first run of a new fingerprint runs the real program while a template warms for the next.
for run in 1 2; do
  ansible-runner run "/tmp/run" -p check.yml >/tmp/run.log 2>&1 || { tail -20 /tmp/run.log; exit 1; }
  for _ in $(seq 120); do stats | grep -q "\"warming\": 0" && break; sleep 0.5; done
done
stats | grep -q "\"ansible-runner\": [1-9]" || { echo "the zygote served no run: $(stats)"; cat /tmp/zygote.log; exit 1; }
echo "zygote: $(stats); $(grep "ok=" /tmp/run.log)"; kill "$operator"'

check() {
  [ -d "$rootfs" ] || { log "no $rootfs: run hack/image-local.sh first"; return 1; }
  local user=1001:0 HOME_IN_IMAGE=/opt/ansible
  in_image "$user" /tini --version
  in_image "$user" /usr/local/bin/ansible-operator version
  in_image "$user" id
  in_image "$user" python3 -c 'import ansible, ansible_runner, ansible_runner_http, kubernetes, yaml, jinja2
print("python", __import__("sys").version.split()[0], "ansible-core", ansible.__version__, "kubernetes", kubernetes.__version__)'
  in_image "$user" ansible-playbook --version
  # Bytecode, the project's and the packages', written at build time: used, not compiled again
  # (the runtime's user could not write it).
  local verbose
  verbose=$(in_image "$user" sh -c 'PYTHONPATH=$HOME/lib python3 -v -c \
    "import training_jobs.plan, ansible_zygote.client, ansible.cli.playbook, ansible_runner, kubernetes.client" 2>&1')
  if grep -E "bytecode is stale|could not create|^# wrote" <<<"$verbose"; then
    log "bytecode compiled again at run time"; return 1
  fi
  grep -q "^# $HOME_IN_IMAGE/lib/.*pyc matches" <<<"$verbose" || { log "no bytecode of $HOME_IN_IMAGE/lib used"; return 1; }
  echo "bytecode up to date: $(grep -c 'pyc matches' <<<"$verbose") modules loaded from it"
  in_image "$user" sh -c '"$HOME/lib/ansible_zygote/bin/ansible-runner" --version'
  # A playbook through the zygote, as the operator runs one: supervise.sh starts the server beside
  # a stand-in for the operator, ansible-runner (the client first on PATH) hands it the run.
  in_image "$user" sh -c "$zygote_run"
  # The entrypoint with --help: the zygote's supervisor starts beside it and ends with it.
  local entry=()
  mapfile -t entry < <(python3 -c 'import sys; sys.path.insert(0, sys.argv[1]); import layout
print(*layout.ENTRYPOINT, sep="\n")' "$here")
  in_image "$user" "${entry[@]}" --help | head -5
}

case ${1:-build} in
  build) build ;;
  check) check ;;
  *) echo "usage: $0 [build|check]" >&2; exit 2 ;;
esac
