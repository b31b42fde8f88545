"""paddle-operator v0.3.5's PaddleJob (batch.paddlepaddle.org): roles as fields, not a map."""

from __future__ import annotations

from typing import Any

from ..admission import containers_var, policy_docs, template_validations
from ..common import (
    RUN_POLICY_RULES,
    dns1035_rule,
    field_name_length_rule,
    job_status,
    replica_spec,
    run_policy,
    scheduling_policy,
)
from ..kind import AGE_COLUMN, STATE_COLUMN, Kind
from ..schema import integer, obj, rule, string

PADDLE_ROLES = ["ps", "worker", "heter"]


def paddlejob() -> Kind:
    role = replica_spec(
        "PaddleJob role",
        None,
        "Unset: OnFailure for elastic jobs; otherwise the template's restartPolicy, else OnFailure for "
        "workers with intranet Service and Never for the rest (paddle-operator's choice).",
        replicas_required=True,
        extra_properties={
            "requests": integer("Elastic jobs: the fewest replicas the job may run with.", minimum=0),
            "limits": integer("Elastic jobs: the most replicas the job may run with.", minimum=0),
        },
        rules=[
            rule(
                "!has(self.requests) || !has(self.limits) || self.requests <= self.limits",
                "requests (fewest replicas) must not exceed limits (most replicas): lower requests or "
                "raise limits",
            )
        ],
    )
    roles = {
        "ps": "Parameter servers (TRAINING_ROLE=PSERVER); their presence makes the job PS mode.",
        "worker": "Trainers (TRAINING_ROLE=TRAINER); more than one without ps makes the job Collective mode.",
        "heter": "Heterogeneous trainers (TRAINING_ROLE=HETER) of PS mode.",
    }
    role_props = {name: {**role, "description": text} for name, text in roles.items()}
    paddle_sched = scheduling_policy(
        "paddle-operator's Volcano settings; same meaning as spec.runPolicy.schedulingPolicy, set only one."
    )
    paddle_sched["properties"]["queue"]["x-kubernetes-validations"][0]["message"] = (
        "spec.schedulingPolicy.queue is immutable: recreate the job to use another queue"
    )
    del paddle_sched["properties"]["scheduleTimeoutSeconds"]
    spec_rules = [
        *RUN_POLICY_RULES,
        rule(
            "has(self.ps) || has(self.worker) || has(self.heter)",
            "a PaddleJob needs at least one of spec.ps, spec.worker, spec.heter: add spec.worker",
        ),
        rule(
            "(has(self.withGloo) ? self.withGloo : 0) == (has(oldSelf.withGloo) ? oldSelf.withGloo : 0)",
            "spec.withGloo is immutable: recreate the job to change it",
        ),
        rule(
            "(has(self.intranet) ? self.intranet : 'PodIP') == (has(oldSelf.intranet) ? oldSelf.intranet : 'PodIP')",
            "spec.intranet is immutable: recreate the job to change it",
        ),
        rule(
            "!has(self.cleanPodPolicy) || !has(self.runPolicy) || !has(self.runPolicy.cleanPodPolicy)",
            "set only one of spec.cleanPodPolicy (paddle-operator values) and spec.runPolicy.cleanPodPolicy: "
            "remove one of them",
        ),
        rule(
            "!has(self.schedulingPolicy) || !has(self.runPolicy) || !has(self.runPolicy.schedulingPolicy)",
            "set only one of spec.schedulingPolicy and spec.runPolicy.schedulingPolicy: remove one of them",
        ),
    ]
    resource_status = obj(
        "Pods of one role by state, as paddle-operator reports them.",
        {
            "pending": integer("Pods waiting to be scheduled or started."),
            "starting": integer("Pods started but not ready (or still in the coordination init container)."),
            "running": integer("Pods running and ready."),
            "failed": integer("Pods in phase Failed."),
            "succeeded": integer("Pods in phase Succeeded."),
            "unknown": integer("Pods in phase Unknown."),
            "refs": {
                "description": "References to the role's pods.",
                "type": "array",
                "items": obj(
                    "A reference to one pod (core/v1 ObjectReference).",
                    {
                        "apiVersion": string("API version of the referent."),
                        "kind": string("Kind of the referent."),
                        "name": string("Name of the referent."),
                        "namespace": string("Namespace of the referent."),
                        "uid": string("UID of the referent."),
                        "resourceVersion": string("Resource version of the referent."),
                        "fieldPath": string("Field within the referent, if any."),
                    },
                    map_type="atomic",
                ),
            },
        },
    )
    status = job_status(
        "PaddleJob",
        {
            "phase": string(
                "paddle-operator's job phase: Pending, Starting, Running, Restarting, Suspended, Completed, "
                "Failed or Terminating (Completed and Failed are final)."
            ),
            "mode": string("PS (ps set), Collective (several workers, no ps) or Single."),
            **{r: {**resource_status, "description": f"Pods of spec.{r} by state."} for r in PADDLE_ROLES},
            "elastic": string("State of an elastic resize: NONE, DOING, DONE or ERROR."),
            "observedGeneration": integer("metadata.generation the status describes.", fmt="int64"),
        },
    )
    return Kind(
        group="batch.paddlepaddle.org",
        version="v1",
        kind="PaddleJob",
        plural="paddlejobs",
        short_names=["pdj"],
        description="A distributed PaddlePaddle job in PS or Collective mode (PaddleFlow paddle-operator "
        "v0.3.5 compatible). The first container of each pod gets the PADDLE_* variables.",
        spec=obj(
            "Desired state of the PaddleJob.",
            {
                "cleanPodPolicy": string(
                    "paddle-operator's pod cleanup: Always deletes pods once the job ends, OnCompletion on "
                    "success, OnFailure on failure, Never keeps them. Unset, as upstream: deleted on success, kept on "
                    "failure. Alternatively use "
                    "spec.runPolicy.cleanPodPolicy (not both).",
                    enum=["Always", "Never", "OnFailure", "OnCompletion"],
                ),
                "schedulingPolicy": paddle_sched,
                "intranet": string(
                    "How pods reach each other: PodIP (pod IPs in the endpoint lists), Service (pod names, "
                    "port 36000) or Host (host network). Every pod gets a headless Service of its name in "
                    "every mode, as upstream. Cannot be changed after creation.",
                    enum=["PodIP", "Service", "Host"],
                    default="PodIP",
                ),
                "withGloo": integer(
                    "Gloo in PS mode: 0 off, 1 for workers (recommended), 2 for workers and servers. "
                    "Ignored in Collective mode. Cannot be changed after creation.",
                    enum=[0, 1, 2],
                ),
                **role_props,
                "elastic": integer(
                    "Elastic level; any value but 0 runs the job elastically: pods get PADDLE_ELASTIC_* "
                    "variables instead of the endpoint ConfigMap."
                ),
                "runPolicy": run_policy(),
            },
            rules=spec_rules,
        ),
        status=status,
        root_rules=[dns1035_rule(), *(field_name_length_rule(r, f"self.spec.{r}") for r in PADDLE_ROLES)],
        columns=[
            {
                "name": "Status",
                "type": "string",
                "description": "paddle-operator's phase.",
                "jsonPath": ".status.phase",
            },
            {
                "name": "Mode",
                "type": "string",
                "description": "PS, Collective or Single.",
                "jsonPath": ".status.mode",
            },
            STATE_COLUMN,
            AGE_COLUMN,
        ],
        policy=paddle_policy,
    )


def paddle_policy(k: Kind) -> list[dict[str, Any]]:
    present = " + ".join(f"(has(object.spec.{r}) ? ['{r}'] : [])" for r in PADDLE_ROLES)
    variables = [
        {"name": "present", "expression": present},
        {"name": "containers", "expression": containers_var({r: f"object.spec.?{r}" for r in PADDLE_ROLES})},
    ]
    return policy_docs(k, variables, template_validations("'spec.'", None, ""))
