#!/usr/bin/env python3
"""A kubeflow.org/v1 PyTorchJob, XGBoostJob, JAXJob or MPIJob as a TrainJob on a built-in runtime.

    .venv/bin/python hack/convert-to-trainjob.py [FILE ...] > trainjobs.yaml   (FILE or - : stdin)

Reads YAML or JSON, one or several documents (or a List, as ``kubectl get -o yaml`` writes),
writes the TrainJobs as YAML to stdout and, to stderr, what did not carry over or changed
meaning. Exits 1 when a document has no TrainJob (TFJob, PaddleJob, MXJob, Caffe2Job, ...),
after writing the others. The decisions are lib/trainer_jobs/convert.py's; docs/user-guide-trainjob.md
("Moving a v1 job to a TrainJob") says what carries over.
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))
from trainer_jobs.convert import Refused, convert, documents, name_of


def read(path: str) -> list:
    text = sys.stdin.read() if path == "-" else Path(path).read_text()
    return documents(list(yaml.safe_load_all(text)))


def main(paths: list[str]) -> int:
    trainjobs, refused = [], 0
    for path in paths or ["-"]:
        for job in read(path):
            label = f"{job.get('kind', '?')}/{name_of(job)}" if isinstance(job, dict) else path
            try:
                converted = convert(job)
            except Refused as reason:
                print(f"{label}: not converted: {reason}", file=sys.stderr)
                refused += 1
                continue
            trainjobs.append(converted.trainjob)
            for note in converted.notes:
                print(f"{label}: {note}", file=sys.stderr)
    if trainjobs:
        yaml.safe_dump_all(trainjobs, sys.stdout, sort_keys=False, width=4096, explicit_start=True)
    return 1 if refused else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
