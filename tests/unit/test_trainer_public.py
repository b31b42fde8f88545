"""The Kubeflow SDK's version ConfigMap (config/trainer-public) says the Trainer release this
operator serves, under the name, namespace and key the SDK reads and upstream's install uses, and
every install path carries it."""

from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "config"


def kustomization(path: str) -> dict:
    return yaml.safe_load((CONFIG / path / "kustomization.yaml").read_text())


def trainer_version() -> str:
    for line in (ROOT / "versions.env").read_text().splitlines():
        if line.startswith("TRAINER_VERSION="):
            return line.split("=", 1)[1]
    raise AssertionError("TRAINER_VERSION not in versions.env")


def test_the_configmap_carries_the_served_trainer_version_as_upstream_names_it():
    (generated,) = kustomization("trainer-public/base")["configMapGenerator"]
    assert generated == {
        "name": "kubeflow-trainer-public",
        "literals": [f"kubeflow_trainer_version={trainer_version()}"],
        "options": {"disableNameSuffixHash": True},
    }
    assert kustomization("trainer-public")["namespace"] == "kubeflow-system"


def test_every_install_path_carries_it():
    assert "../trainer-public" in kustomization("default")["resources"]  # make deploy
    assert "../trainer-public/base" in kustomization("manifests")["resources"]  # the bundle
    assert (
        'apply --server-side --force-conflicts -k "$root/config/trainer-public"'
        in (ROOT / "hack" / "lib.sh").read_text()
    )  # install_apis: make install, make run, the tests
