"""Documented make targets work as the first command in a fresh clone (nothing made before them).

The clone shares this checkout's tool caches (the Go tools' build cache, the project venv, linked
in as a fresh set-up would have made them): what is checked is that the targets need nothing
else that only ``make test`` creates (``make bundle`` used to need ``.local/``).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.cluster

ROOT = Path(__file__).resolve().parent.parent.parent


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    path = tmp_path_factory.mktemp("fresh") / "ato"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(path)], check=True)
    (path / ".venv").symlink_to(ROOT / ".venv")
    # The venv was installed from this very requirements.txt: keep make from reinstalling it.
    requirements = ROOT / "requirements.txt"
    os.utime(path / "requirements.txt", (requirements.stat().st_atime, requirements.stat().st_mtime))
    return path


def make(clone: Path, target: str, *variables: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MAKE", "MFLAGS"))}
    return subprocess.run(
        ["make", "-C", str(clone), target, *variables],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_make_bundle_first(clone):
    assert not (clone / ".local").exists()
    result = make(clone, "bundle")
    assert result.returncode == 0, result.stderr[-3000:]
    assert (clone / "bundle" / "manifests" / "ansible-training-operator.clusterserviceversion.yaml").exists()


def test_make_manifests_first_changes_nothing(clone):
    result = make(clone, "manifests")
    assert result.returncode == 0, result.stderr[-3000:]
    status = subprocess.run(
        ["git", "-C", str(clone), "status", "--porcelain", "--", "config"], capture_output=True, text=True
    )
    assert status.stdout == ""


def test_make_install_first(clone):
    result = make(clone, "install")
    assert result.returncode == 0, result.stderr[-3000:]


def test_make_catalog_first_names_the_bundle_image(clone):
    result = make(clone, "catalog", "BUNDLE_IMG=registry.example/ato-bundle:v9")
    assert result.returncode == 0, result.stderr[-3000:]
    index = (clone / "catalog" / "ansible-training-operator" / "index.yaml").read_text()
    assert "\nimage: registry.example/ato-bundle:v9\n" in index
    dockerfile = (clone / "catalog.Dockerfile").read_text()
    assert "FROM quay.io/operator-framework/opm:v" in dockerfile and ":latest" not in dockerfile
