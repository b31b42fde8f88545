"""One module per kind; KINDS is the order the generated files list them in."""

from __future__ import annotations

from .caffe2job import caffe2job
from .jaxjob import jaxjob
from .kubeflow_paddlejob import kubeflow_paddlejob
from .mpijob import mpijob
from .mxjob import mxjob
from .paddlejob import paddlejob
from .pytorchjob import pytorchjob
from .tfjob import tfjob
from .trainingruntime import clustertrainingruntime, trainingruntime
from .trainjob import trainjob
from .xgboostjob import xgboostjob

KINDS = [
    tfjob,
    mxjob,
    pytorchjob,
    xgboostjob,
    jaxjob,
    kubeflow_paddlejob,
    mpijob,
    paddlejob,
    caffe2job,
    # Kubeflow Trainer v2.
    trainjob,
    trainingruntime,
    clustertrainingruntime,
]
