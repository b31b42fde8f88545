#!/usr/bin/env python3
"""The steps of hack/image-local.sh that write files into the image's root file system, from
hack/image-local/layout.py (the layout the Dockerfile's result has).

    assemble.py requirements PIPFILE_LOCK      pip requirements with hashes: the lock's packages
    assemble.py runtime ROOTFS OPERATOR_BINARY the runtime image's own files, user and home
    assemble.py project ROOTFS REPOSITORY      this project's files, as the Dockerfile's COPY lines
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import layout

# The working tree's bytecode is left out: the image's is compiled in the image (layout.py).
SKIPPED = shutil.ignore_patterns("__pycache__", "*.pyc")


def requirements(lock_path: str) -> str:
    """The lock's default packages, pinned with every hash it records (pip --require-hashes)."""
    lock = json.loads(Path(lock_path).read_text())
    lines = []
    for name, entry in sorted(lock["default"].items()):
        hashes = " ".join(f"--hash={h}" for h in entry["hashes"])
        lines.append(f"{name}{entry['version']} {hashes}")
    return "\n".join(lines) + "\n"


def inside(rootfs: Path, path: str) -> Path:
    return rootfs / path.lstrip("/")


def chown_tree(top: Path, uid: int, gid: int) -> None:
    for dirpath, dirnames, filenames in os.walk(top):
        for name in [dirpath, *(os.path.join(dirpath, n) for n in dirnames + filenames)]:
            os.chown(name, uid, gid, follow_symlinks=False)


def add_ug_rwx(top: Path) -> None:
    """chmod -R ug+rwx, as the runtime image does to its home."""
    for dirpath, dirnames, filenames in os.walk(top):
        for name in [dirpath, *(os.path.join(dirpath, n) for n in dirnames + filenames)]:
            if not os.path.islink(name):
                os.chmod(name, os.stat(name).st_mode | 0o770)


def runtime(rootfs: Path, operator_binary: str) -> None:
    """What ansible-operator-plugins' Dockerfile adds to its base, but the Python packages (pip)."""
    for path, content in layout.RUNTIME_FILES.items():
        inside(rootfs, path).parent.mkdir(parents=True, exist_ok=True)
        inside(rootfs, path).write_text(content)
    with inside(rootfs, "/etc/passwd").open("a") as passwd:
        passwd.write(layout.RUNTIME_PASSWD_LINE + "\n")
    home = inside(rootfs, layout.HOME)
    (home / ".ansible" / "tmp").mkdir(parents=True, exist_ok=True)
    chown_tree(home, layout.USER_UID, layout.USER_GID)
    add_ug_rwx(home)
    # Debian's statically linked tini, where the runtime image has the release binary.
    tini = inside(rootfs, layout.TINI)
    tini.unlink(missing_ok=True)
    tini.symlink_to("usr/bin/tini-static")
    binary = inside(rootfs, layout.OPERATOR_BINARY)
    shutil.copyfile(operator_binary, binary)
    binary.chmod(0o755)


def project(rootfs: Path, repository: Path) -> None:
    """COPY SRC DEST for every line: root-owned, the repository's modes kept."""
    for source, dest in layout.PROJECT_COPIES:
        target = inside(rootfs, dest)
        if source.endswith("/"):
            shutil.copytree(repository / source, target, ignore=SKIPPED, dirs_exist_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(repository / source, target)
        if target.is_dir():
            chown_tree(target, 0, 0)
        else:
            os.chown(target, 0, 0)


def main() -> None:
    match sys.argv[1:]:
        case ["requirements", lock]:
            sys.stdout.write(requirements(lock))
        case ["runtime", rootfs, binary]:
            runtime(Path(rootfs), binary)
        case ["project", rootfs, repository]:
            project(Path(rootfs), Path(repository))
        case _:
            sys.exit(__doc__)


if __name__ == "__main__":
    main()
