#!/usr/bin/env bash
# A Python root file system for the real node's images: the machine's Debian python3.11 (from
# Debian's python3.11-minimal and libpython3.11-stdlib) with its standard library, the machine's
# bash (the Kubeflow SDK's CustomTrainer runs its function through `bash -c`) and exactly the
# shared libraries they and the extension modules load (ldd). Nothing is downloaded.
#
#   python-rootfs.sh DIR             make DIR
#   python-rootfs.sh --libs DIR      add to DIR the libraries every shared object in it needs (after
#                                    packages were installed into it, e.g. JAX's wheels)
set -euo pipefail
python=/usr/bin/python3.11 stdlib=/usr/lib/python3.11 bash=/bin/bash

# copy_libraries DIR: every library the interpreter and DIR's shared objects load, at the path
# the loader uses.
copy_libraries() {
  local dir=$1 lib real dest
  { echo "$python"; echo "$bash"; find "$dir" -name '*.so' -o -name '*.so.*' -type f; } | { xargs ldd 2>/dev/null || true; } |
    awk '/=> \// {print $3} /^\t\/lib64\// {print $1}' | sort -u | while read -r lib; do
    real=$(readlink -f "$lib")
    dest="$dir/usr${lib#/usr}"
    [ -e "$dest" ] && continue
    mkdir -p "$(dirname "$dest")"
    cp "$real" "$dest"
  done
}

if [ "$1" = --libs ]; then copy_libraries "$2"; exit; fi
dir=$1
[ -x "$python" ] || { echo "python-rootfs: $python missing (apt-get install python3.11-minimal)" >&2; exit 2; }
rm -rf "$dir"
mkdir -p "$dir/usr/bin" "$dir/usr/lib" "$dir/etc" "$dir/tmp" "$dir/proc" "$dir/sys" "$dir/dev" "$dir/run"
chmod 1777 "$dir/tmp"
cp "$python" "$dir/usr/bin/python3.11"
ln -s python3.11 "$dir/usr/bin/python3"
ln -s python3.11 "$dir/usr/bin/python"
cp "$bash" "$dir/usr/bin/bash"
# Merged /usr, as Debian's: the loader and libraries are found under /lib and /lib64 too.
ln -s usr/lib "$dir/lib"
ln -s usr/lib64 "$dir/lib64"
tar -C / --exclude=dist-packages --exclude=__pycache__ --exclude=test --exclude=idlelib \
  --exclude=tkinter --exclude=ensurepip -cf - "${stdlib#/}" | tar -C "$dir" -xf -
copy_libraries "$dir"
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/sh\n' >"$dir/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$dir/etc/group"
