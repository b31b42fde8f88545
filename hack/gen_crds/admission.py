"""Admission policies: checks inside pod templates that need more than the CRD's schema and rules
(the framework container's name, an image on every container, at least one container)."""

from __future__ import annotations

from typing import Any

from .kind import Kind

NO_IMAGE = "!has(c.image) || c.image == ''"


def containers_var(specs: dict[str, str]) -> str:
    """CEL map key -> container list of that replica type's template ([] when absent).

    ``specs`` maps each key to CEL for an optional of its replica spec (``x[?'k']``,
    ``object.spec.?ps``), so a missing type, template or container list reads as [].
    """
    entries = [f"'{key}': {spec}.?template.?spec.?containers.orValue([])" for key, spec in specs.items()]
    # A long entry goes on two lines (CEL takes newlines as spaces): YAML cannot fold literal blocks.
    entries = [e.replace(": ", ":\n  ", 1) if len(e) > 100 else e for e in entries]
    return "{\n" + ",\n".join(entries) + "\n}"


def template_validations(
    prefix: str, container: str | None, why: str, containers: str = "variables.containers[k]"
) -> list[dict[str, Any]]:
    """The checks inside pod templates, over ``variables.present`` (keys) and ``containers``, CEL
    for the container list of the key ``k`` (by default from ``variables.containers``).

    ``prefix`` is CEL for the path in front of a key in messages (e.g. 'spec.tfReplicaSpecs.').
    """
    empty = f"size({containers}) == 0"
    no_image = f"{containers}.exists(c, {NO_IMAGE})"
    add = f"add the \\'{container}\\' container" if container else "add the training container"
    out = [
        validation(
            f"!variables.present.exists(k, {empty})",
            f"every replica template needs at least one container: {add.replace(chr(92), '')}",
            f"variables.present.filter(k, {empty}).map(k, {prefix} + k + "
            f"'.template.spec.containers must list at least one container: {add}')[0]",
        ),
        validation(
            f"!variables.present.exists(k, {no_image})",
            "every container needs an image: set containers[].image",
            f"variables.present.filter(k, {no_image}).map(k, {prefix} + k + '.template: container \\'' + "
            f"{containers}.filter(c, {NO_IMAGE}).map(c, has(c.name) ? c.name : '')[0] + "
            "'\\' has no image: set its image')[0]",
        ),
    ]
    if container:
        missing = f"{empty.replace('== 0', '> 0')} && !{containers}.exists(c, has(c.name) && c.name == '{container}')"
        out.append(
            validation(
                f"!variables.present.exists(k, {missing})",
                f"every replica template must have a container named '{container}': rename the training "
                f"container to '{container}'",
                f"variables.present.filter(k, {missing}).map(k, {prefix} + k + '.template must have a container "
                f"named \\'{container}\\': rename the training container to \\'{container}\\' ({why})')[0]",
            )
        )
    return out


def policy_docs(k: Kind, variables: list[dict], validations: list[dict]) -> list[dict[str, Any]]:
    name = f"ato-{k.id.replace('_', '-')}-pod-templates"
    labels = {"app.kubernetes.io/part-of": "ansible-training-operator"}
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": [k.group],
                        "apiVersions": [k.version],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": [k.plural],
                    }
                ]
            },
            "matchConditions": [
                # Only a written spec is checked: metadata-only updates (finalizers, labels) and
                # deletions of jobs admitted before this policy existed must not be blocked.
                {
                    "name": "spec-written",
                    "expression": "request.operation == 'CREATE' || "
                    "(!has(object.metadata.deletionTimestamp) && object.spec != oldObject.spec)",
                }
            ],
            "variables": variables,
            "validations": validations,
        },
    }
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name, "labels": labels},
        "spec": {"policyName": name, "validationActions": ["Deny"]},
    }
    return [policy, binding]


def validation(expr: str, message: str, message_expression: str) -> dict[str, Any]:
    return {
        "expression": expr,
        "message": message,
        "messageExpression": message_expression,
        "reason": "Invalid",
    }


def map_policy(field_name: str, types: list[str], folded: list[str], container: str, why: str):
    """Policy for the kinds whose replica specs are a map (TFJob, MXJob, ...). ``folded`` are the
    types whose key may be any case (gen_crds.common.ReplicaKeys)."""

    def build(k: Kind) -> list[dict[str, Any]]:
        containers = "variables.containers[k]"
        if folded:
            # Keyed by the lower-case type, each from the key that names it whatever its case (the
            # CRD has refused two such keys, and other spellings of the exact types, before this
            # policy runs); a key finds its containers by its lower-case form.
            first = "variables.present.filter(k, k.lowerAscii() == '{}').map(k, variables.present[k])[?0]"
            specs = {
                t.lower(): first.format(t.lower()) if t in folded else f"variables.present[?'{t}']"
                for t in types
            }
            containers = "variables.containers[k.lowerAscii()]"
        else:
            specs = {t: f"variables.present[?'{t}']" for t in types}
        variables = [
            # Iterating a map yields its keys, so the replica spec map is the list of present types.
            {"name": "present", "expression": f"object.spec.{field_name}"},
            {"name": "containers", "expression": containers_var(specs)},
        ]
        validations = template_validations(f"'spec.{field_name}.'", container, why, containers)
        return policy_docs(k, variables, validations)

    return build
