"""The operator-sdk delivery targets run the commands operator-sdk projects run (``make -n``: no
container engine here), with docker or podman, and ``make help`` lists them."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
IMAGES = ["IMG=registry.example/ato:1.2.3", "BUNDLE_IMG=registry.example/ato-bundle:v1.2.3"]
IMAGES.append("CATALOG_IMG=registry.example/ato-catalog:v1.2.3")


def dry_run(target: str, tool: str) -> list[str]:
    out = subprocess.run(
        ["make", "-n", "--no-print-directory", "-C", str(ROOT), target, f"CONTAINER_TOOL={tool}", *IMAGES],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [line.strip() for line in out.splitlines()]


@pytest.mark.parametrize("tool", ["docker", "podman"])
@pytest.mark.parametrize(
    ("target", "command"),
    [
        ("docker-build", "{tool} build -t registry.example/ato:1.2.3 ."),
        ("docker-push", "{tool} push registry.example/ato:1.2.3"),
        ("bundle-build", "{tool} build -f bundle/bundle.Dockerfile -t registry.example/ato-bundle:v1.2.3 ."),
        ("bundle-push", "{tool} push registry.example/ato-bundle:v1.2.3"),
        ("catalog-build", "{tool} build -f catalog.Dockerfile -t registry.example/ato-catalog:v1.2.3 ."),
        ("catalog-push", "{tool} push registry.example/ato-catalog:v1.2.3"),
    ],
)
def test_delivery_target(target, command, tool):
    lines = dry_run(target, tool)
    assert lines[-1] == command.format(tool=tool)
    if target in ("bundle-build", "catalog-build"):
        # The image is built from a bundle (and catalog) written for these images first.
        assert "hack/bundle.sh" in lines
    if target == "catalog-build":
        assert lines.index("hack/bundle.sh") < lines.index("hack/catalog.sh") < len(lines) - 1


def test_make_help_lists_the_delivery_targets():
    out = subprocess.run(["make", "-C", str(ROOT), "help"], capture_output=True, text=True, check=True).stdout
    for target in (
        "docker-build",
        "docker-push",
        "bundle-build",
        "bundle-push",
        "catalog-build",
        "catalog-push",
    ):
        assert target in out
