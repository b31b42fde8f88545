"""Trainer v2.3's webhook rules as admission policies (no webhook server).

A TrainJob is checked against the runtime it names through a policy whose parameter kind is that
runtime's kind: its binding selects every runtime (in the TrainJob's namespace for a
TrainingRuntime), and a match condition keeps only the named one. A policy cannot see that no
runtime has the name, so a TrainJob naming a missing runtime is admitted (docs/api.md).
"""

from __future__ import annotations

from typing import Any

from .kind import Kind
from .trainer_checks import (
    deprecated_runtime_validation,
    runtime_variables,
    step_job_validations,
    trainjob_runtime_validations,
    trainjob_validations,
)

GROUP = "trainer.kubeflow.org"
LABELS = {"app.kubernetes.io/part-of": "ansible-training-operator"}
# The built-in runtimes carry this label, as upstream's release manifests set it: its webhooks skip them.
SKIP_LABEL = "trainer.kubeflow.org/webhook-validation"
SPEC_WRITTEN = {
    "name": "spec-written",
    # Only a written spec is checked, as the v1 kinds' policies (gen_crds.admission); spec is
    # optional in Trainer's kinds.
    "expression": "request.operation == 'CREATE' || (!has(object.metadata.deletionTimestamp) && "
    "(has(object.spec) != has(oldObject.spec) || (has(object.spec) && object.spec != oldObject.spec)))",
}


def cel_lines(expr: str, width: int = 110) -> str:
    """``expr`` on lines of about ``width`` characters (CEL takes newlines as spaces), broken at a space
    or before a '.' outside string literals, so the YAML stays within yamllint's line length."""
    lines, line, quote, last = [], "", "", -1
    for ch in expr:
        if quote:
            quote = "" if ch == quote and not line.endswith("\\") else quote
        elif ch in "'\"":
            quote = ch
        elif ch == " " or (ch == "." and line and line[-1] not in " ("):
            last = len(line)
        line += ch
        if len(line) > width and last > 0:
            lines.append(line[:last].rstrip())
            line, last = line[last:].lstrip(), -1
    lines.append(line)
    return "\n".join(lines)


def _wrapped(entries: list[dict[str, Any]], *keys: str) -> list[dict[str, Any]]:
    return [{k: cel_lines(v) if k in keys and len(v) > 120 else v for k, v in e.items()} for e in entries]


def policy(
    name: str,
    resource: str,
    operations: list[str],
    validations: list[dict[str, Any]],
    **spec: Any,
) -> dict[str, Any]:
    """A ValidatingAdmissionPolicy on ``resource`` (trainer.kubeflow.org/v1alpha1)."""
    constraints: dict[str, Any] = {
        "resourceRules": [
            {
                "apiGroups": [GROUP],
                "apiVersions": ["v1alpha1"],
                "operations": operations,
                "resources": [resource],
            }
        ]
    }
    if "objectSelector" in spec:
        constraints["objectSelector"] = spec.pop("objectSelector")
    for key in ("matchConditions", "variables"):
        if key in spec:
            spec[key] = _wrapped(spec[key], "expression")
    body: dict[str, Any] = {"failurePolicy": "Fail", "matchConstraints": constraints, **spec}
    body["validations"] = _wrapped(validations, "expression", "messageExpression")
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name, "labels": LABELS},
        "spec": body,
    }


def binding(name: str, action: str = "Deny", param_ref: dict[str, Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"policyName": name, "validationActions": [action]}
    if param_ref is not None:
        spec["paramRef"] = param_ref
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name, "labels": LABELS},
        "spec": spec,
    }


# Every runtime is a parameter; a policy without parameters (none exist) lets the TrainJob pass.
EVERY_RUNTIME = {"selector": {}, "parameterNotFoundAction": "Allow"}


def trainjob_policies(k: Kind) -> list[dict[str, Any]]:
    out = [
        *_pair(
            policy(
                "ato-trainjob",
                k.plural,
                ["CREATE", "UPDATE"],
                trainjob_validations(),
                matchConditions=[SPEC_WRITTEN],
            )
        )
    ]
    for kind in ("ClusterTrainingRuntime", "TrainingRuntime"):
        name = f"ato-trainjob-{kind.lower()}"
        checks = policy(
            name,
            k.plural,
            ["CREATE", "UPDATE"],
            trainjob_runtime_validations(),
            paramKind={"apiVersion": f"{GROUP}/v1alpha1", "kind": kind},
            matchConditions=[SPEC_WRITTEN, _names_runtime(kind)],
            variables=runtime_variables(),
        )
        out += [checks, binding(name, param_ref=EVERY_RUNTIME)]
    name = "ato-trainjob-deprecated-runtime"
    warn = policy(
        name,
        k.plural,
        ["CREATE", "UPDATE"],
        [deprecated_runtime_validation("Referenced ClusterTrainingRuntime")],
        paramKind={"apiVersion": f"{GROUP}/v1alpha1", "kind": "ClusterTrainingRuntime"},
        matchConditions=[SPEC_WRITTEN, _names_runtime("ClusterTrainingRuntime")],
    )
    return [*out, warn, binding(name, "Warn", EVERY_RUNTIME)]


def _pair(p: dict[str, Any]) -> list[dict[str, Any]]:
    return [p, binding(p["metadata"]["name"])]


def _names_runtime(kind: str) -> dict[str, str]:
    return {
        "name": "names-this-runtime",
        "expression": f"object.?spec.?runtimeRef.?apiGroup.orValue('') == '{GROUP}' && "
        f"object.?spec.?runtimeRef.?kind.orValue('') == '{kind}' && "
        "object.?spec.?runtimeRef.?name.orValue('') == params.metadata.name",
    }


def runtime_policy(k: Kind) -> list[dict[str, Any]]:
    """Upstream's runtime webhooks: a TrainingRuntime is checked when created, a
    ClusterTrainingRuntime when created or updated; both skip runtimes labelled as the built-in ones."""
    operations = ["CREATE", "UPDATE"] if k.scope == "Cluster" else ["CREATE"]
    skip = {"matchExpressions": [{"key": SKIP_LABEL, "operator": "NotIn", "values": ["disabled"]}]}
    name = f"ato-{k.singular}"
    checks = policy(
        name,
        k.plural,
        operations,
        step_job_validations(),
        matchConditions=[SPEC_WRITTEN],
        objectSelector=skip,
    )
    out = _pair(checks)
    if k.scope == "Cluster":
        warn_name = f"{name}-deprecated"
        warn = policy(
            warn_name,
            k.plural,
            ["CREATE"],
            [deprecated_runtime_validation("ClusterTrainingRuntime", "object")],
        )
        out += [warn, binding(warn_name, "Warn")]
    return out
