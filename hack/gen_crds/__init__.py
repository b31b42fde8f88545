"""The job APIs' source of truth: every CRD and admission policy in config/ is generated here.

    python hack/gen_crds           rewrite the generated files (make manifests)
    python hack/gen_crds --check   exit 1 if any generated file is out of date (make lint)

Where things are: ``schema`` (field and rule building blocks), ``podtemplate`` (core/v1
PodTemplateSpec and the other Kubernetes types from the pinned Kubernetes' OpenAPI), ``common``
(what the kinds share: replica spec, run policy, status, job-name rules), ``kind`` (a kind's API
and its CRD), ``admission`` (the per-kind ValidatingAdmissionPolicy), ``kinds/`` (one module per
kind), ``output`` (YAML), ``cli``. Kubeflow Trainer v2's kinds add ``jobset`` (a runtime's JobSet
template), ``runtime_patch`` (a TrainJob's runtimePatches), ``trainer_status``,
``trainer_admission`` (its policies and bindings) and ``trainer_checks`` (their CEL).
docs/api.md explains every field and rule; keep it in step.
"""
