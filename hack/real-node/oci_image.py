#!/usr/bin/env python3
"""Write a single-layer OCI image archive that `ctr images import` loads: no registry, no builder.

The real node (hack/real-node.sh) runs only images made here and imported into its containerd:

    oci_image.py --ref ato.local/pause:TAG --out pause.tar --entrypoint /pause \\
        --add /path/to/pause:pause
    oci_image.py --ref ato.local/busybox:TAG --out busybox.tar --entrypoint /bin/sh \\
        --add /bin/busybox:bin/busybox --busybox-links bin/busybox
    oci_image.py --ref ato.local/python:TAG --out python.tar --rootfs DIR --entrypoint /usr/bin/python3

hack/image-local.sh writes the operator image with it (--rootfs DIR --keep-owners --user 1001:0).

The layer is an uncompressed tar with every entry dated 0 and owned by root (unless --keep-owners), so the same inputs
give the same image digest. The archive holds oci-layout, index.json (the reference in the
annotation containerd names imported images by), the manifest, the config and the layer.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import subprocess
import tarfile
from pathlib import Path

LAYER = "application/vnd.oci.image.layer.v1.tar"
MANIFEST = "application/vnd.oci.image.manifest.v1+json"
CONFIG = "application/vnd.oci.image.config.v1+json"
DIRECTORIES = ("bin", "dev", "etc", "proc", "sys", "tmp", "var", "run")
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def normalise(info: tarfile.TarInfo) -> tarfile.TarInfo:
    """Root-owned, dated 0: the layer's digest depends on the content only."""
    info.uid = info.gid = 0
    return dated_zero(info)


def dated_zero(info: tarfile.TarInfo) -> tarfile.TarInfo:
    """Dated 0, owners kept (numeric): a root file system with a user of its own (--keep-owners)."""
    info.uname = info.gname = ""
    info.mtime = 0
    return info


def add_directory(layer: tarfile.TarFile, name: str) -> None:
    info = normalise(tarfile.TarInfo(name))
    info.type, info.mode = tarfile.DIRTYPE, 0o1777 if name == "tmp" else 0o755
    layer.addfile(info)


def add_symlink(layer: tarfile.TarFile, name: str, target: str) -> None:
    info = normalise(tarfile.TarInfo(name))
    info.type, info.linkname, info.mode = tarfile.SYMTYPE, target, 0o777
    layer.addfile(info)


def busybox_applets(busybox: str) -> list[str]:
    """Every applet the host's busybox binary has, as `busybox --list-full` names them."""
    out = subprocess.run([busybox, "--list-full"], check=True, capture_output=True, text=True)
    return sorted(line for line in out.stdout.split() if line)


def build_layer(args: argparse.Namespace, path: Path) -> str:
    """Write the layer to ``path`` (a Python or JAX root file system is hundreds of MB: not in
    memory); its sha256."""
    with tarfile.open(path, mode="w", format=tarfile.PAX_FORMAT) as layer:
        if args.rootfs:
            owners = dated_zero if args.keep_owners else normalise
            for entry in sorted(os.listdir(args.rootfs)):
                layer.add(os.path.join(args.rootfs, entry), arcname=entry, filter=owners)
        else:
            for name in DIRECTORIES:
                add_directory(layer, name)
        for spec in args.add:
            source, _, dest = spec.partition(":")
            layer.add(source, arcname=dest, filter=normalise)
        if args.busybox_links:
            add_busybox_links(layer, args)
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def add_busybox_links(layer: tarfile.TarFile, args: argparse.Namespace) -> None:
    """A symlink per applet (bin/sh, usr/bin/env, ...) to the busybox binary added with --add."""
    host_binary = next(s.partition(":")[0] for s in args.add if s.endswith(":" + args.busybox_links))
    made = set(DIRECTORIES)
    for applet in busybox_applets(host_binary):
        if applet == args.busybox_links:
            continue
        parents = Path(applet).parents
        for parent in reversed([str(p) for p in parents if str(p) != "."]):
            if parent not in made:
                add_directory(layer, parent)
                made.add(parent)
        add_symlink(layer, applet, "/" + args.busybox_links)


def blob(archive: tarfile.TarFile, media_type: str, content: bytes) -> dict:
    digest = hashlib.sha256(content).hexdigest()
    info = normalise(tarfile.TarInfo(f"blobs/sha256/{digest}"))
    info.size, info.mode = len(content), 0o644
    archive.addfile(info, io.BytesIO(content))
    return {"mediaType": media_type, "digest": f"sha256:{digest}", "size": len(content)}


def file_blob(archive: tarfile.TarFile, media_type: str, path: Path, digest: str) -> dict:
    archive.add(path, arcname=f"blobs/sha256/{digest}", filter=normalise)
    return {"mediaType": media_type, "digest": f"sha256:{digest}", "size": path.stat().st_size}


def add_json(archive: tarfile.TarFile, name: str, value: dict) -> None:
    content = json.dumps(value, sort_keys=True).encode()
    info = normalise(tarfile.TarInfo(name))
    info.size, info.mode = len(content), 0o644
    archive.addfile(info, io.BytesIO(content))


def image_config(args: argparse.Namespace, layer_digest: str) -> dict:
    config = {"Env": [f"PATH={PATH}", *args.env], "Entrypoint": args.entrypoint, "Cmd": args.cmd}
    config["WorkingDir"] = args.workdir
    if args.user:
        config["User"] = args.user
    return {
        "architecture": "amd64",
        "os": "linux",
        "config": config,
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{layer_digest}"]},
    }


def write_archive(args: argparse.Namespace) -> None:
    layer, tmp = Path(f"{args.out}.layer"), Path(f"{args.out}.tmp")
    layer_digest = build_layer(args, layer)
    with tarfile.open(tmp, mode="w", format=tarfile.PAX_FORMAT) as archive:
        add_json(archive, "oci-layout", {"imageLayoutVersion": "1.0.0"})
        layer_desc = file_blob(archive, LAYER, layer, layer_digest)
        config_desc = blob(archive, CONFIG, json.dumps(image_config(args, layer_digest)).encode())
        manifest = {"schemaVersion": 2, "mediaType": MANIFEST, "config": config_desc, "layers": [layer_desc]}
        manifest_desc = blob(archive, MANIFEST, json.dumps(manifest).encode())
        manifest_desc["annotations"] = {
            "io.containerd.image.name": args.ref,
            "org.opencontainers.image.ref.name": args.ref.rpartition(":")[2],
        }
        add_json(archive, "index.json", {"schemaVersion": 2, "manifests": [manifest_desc]})
    tmp.rename(args.out)
    layer.unlink()


def argument_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--ref", required=True, help="image reference, e.g. ato.local/busybox:TAG")
    parser.add_argument("--out", required=True, help="the archive to write")
    parser.add_argument("--rootfs", help="a directory to use as the whole file system")
    parser.add_argument("--add", action="append", default=[], help="HOST_PATH:IMAGE_PATH, repeatable")
    parser.add_argument("--busybox-links", help="IMAGE_PATH of busybox: link every applet to it")
    parser.add_argument("--entrypoint", action="append", default=[], help="repeatable, one argument each")
    # argparse drops a "--" value (--entrypoint=-- gives []): an entrypoint such as tini's whole.
    parser.add_argument(
        "--entrypoint-json", dest="entrypoint", type=json.loads, help="the whole entrypoint, a JSON array"
    )
    parser.add_argument("--cmd", action="append", default=[], help="repeatable, one argument each")
    parser.add_argument("--env", action="append", default=[], help="NAME=VALUE, repeatable")
    parser.add_argument("--workdir", default="/")
    parser.add_argument("--user", help="UID[:GID] the image runs as (default: root)")
    parser.add_argument(
        "--keep-owners", action="store_true", help="keep the owners of --rootfs's files (default: root)"
    )
    return parser


def main() -> None:
    write_archive(argument_parser().parse_args())


if __name__ == "__main__":
    main()
