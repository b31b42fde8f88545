"""The command: write the generated files, or (--check) fail when one is out of date."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from .kind import crd
from .kinds import KINDS
from .output import dump, kustomization
from .schema import ROOT

CRD_DIR = ROOT / "config" / "crd"
ADMISSION_DIR = ROOT / "config" / "admission"

USAGE = """Generate the job APIs: the CRDs and the admission policies that back them.

    python hack/gen_crds           rewrite the generated files
    python hack/gen_crds --check   exit 1 if any generated file is out of date
"""


def documents() -> dict[Path, list[dict[str, Any]]]:
    """Every generated file and the YAML documents it holds."""
    kinds = [make() for make in KINDS]
    files: dict[Path, list[dict[str, Any]]] = {}
    for k in kinds:
        files[CRD_DIR / "bases" / k.file] = [crd(k)]
        if k.policy:
            files[ADMISSION_DIR / f"{k.id}.yaml"] = k.policy(k)
    files[CRD_DIR / "kustomization.yaml"] = [kustomization([f"bases/{k.file}" for k in kinds], "api")]
    files[ADMISSION_DIR / "kustomization.yaml"] = [
        kustomization([f"{k.id}.yaml" for k in kinds if k.policy], "admission")
    ]
    return files


def outputs() -> dict[Path, str]:
    return {path: dump(docs) for path, docs in documents().items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python hack/gen_crds", description=USAGE.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a generated file is out of date")
    args = parser.parse_args(argv)
    stale = []
    for path, text in outputs().items():
        current = path.read_text() if path.exists() else None
        if current == text:
            continue
        stale.append(path)
        if not args.check:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    for path in stale:
        verb = "out of date" if args.check else "wrote"
        print(f"{verb}: {path.relative_to(ROOT)}", file=sys.stderr)
    if args.check and stale:
        print("run: python hack/gen_crds", file=sys.stderr)
        return 1
    return 0
