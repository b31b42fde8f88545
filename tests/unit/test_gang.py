"""Gang scheduling (``training_jobs.gang``) as training-operator v1.9 does it, as tables.

Sources of the rows:

- quantities: Kubernetes' own tables in ``apimachinery/pkg/api/resource/quantity_test.go``
  (``TestQuantityParse``, ``TestQuantityString``, ``TestQuantityParseEmit``,
  ``TestQuantityAddZeroPreservesSuffix``, the ``invalid`` list);
- ``CalcPGMinResources`` / ``AddResourceList`` (``pkg/controller.v1/common/util.go``): upstream
  has no unit test for them in v1.9, so those rows follow the code; the 101-replica sums are the
  facts of trainer v2's coscheduling tests (101 replicas of 1 CPU and 4Gi: ``101``, ``404Gi``);
- PodGroup spec and the Volcano gate: ``job.go`` ``ReconcileJobs``, ``podgroup_control.go``,
  PR #1977 (non-empty queue), PR #2079 (update issue), issues #1630 / #1729 and the SDK e2e
  expectation "minAvailable 10 stays Created";
- pod decoration: ``DecoratePodTemplateSpec`` and ``createNewPod``'s ``isCustomSchedulerSet``.
"""

from __future__ import annotations

import copy

import pytest
from hypothesis import given
from hypothesis import strategies as st
from training_jobs import gang, quantity
from training_jobs.model import InvalidJob
from training_jobs.quantity import NANO, Quantity, format_quantity, parse_quantity
from training_jobs.registry import profile_for

VOLCANO = {"gang_scheduler": "volcano"}
PLUGINS = {"gang_scheduler": "scheduler-plugins-scheduler"}


def res(requests=None, limits=None):
    out = {}
    if requests is not None:
        out["requests"] = requests
    if limits is not None:
        out["limits"] = limits
    return out


def template(container, resources=None, priority=None, scheduler=None, extra=None, init=None):
    c = {"name": container, "image": "busybox"}
    if resources is not None:
        c["resources"] = resources
    spec = {"containers": [c, *(extra or [])]}
    if init:
        spec["initContainers"] = init
    if priority:
        spec["priorityClassName"] = priority
    if scheduler:
        spec["schedulerName"] = scheduler
    return {"spec": spec}


def tfjob(groups, run_policy=None, annotations=None):
    """groups: {rtype: (replicas, resources, priorityClass, schedulerName)}."""
    specs = {}
    for rtype, (replicas, resources, *rest) in groups.items():
        priority = rest[0] if rest else None
        scheduler = rest[1] if len(rest) > 1 else None
        spec = {"template": template("tensorflow", resources, priority, scheduler)}
        if replicas is not None:
            spec["replicas"] = replicas
        specs[rtype] = spec
    meta = {"name": "mnist", "namespace": "ns", "uid": "uid-1"}
    if annotations:
        meta["annotations"] = annotations
    cr = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": meta,
        "spec": {"tfReplicaSpecs": specs, "runPolicy": run_policy or {}},
    }
    return profile_for("kubeflow.org/v1", "TFJob").job(cr)


def paddlejob(top_policy=None, run_policy=None, workers=2):
    spec = {"worker": {"replicas": workers, "template": template("paddle", res({"cpu": "1"}))}}
    if top_policy is not None:
        spec["schedulingPolicy"] = top_policy
    if run_policy is not None:
        spec["runPolicy"] = run_policy
    cr = {
        "apiVersion": "batch.paddlepaddle.org/v1",
        "kind": "PaddleJob",
        "metadata": {"name": "wide", "namespace": "ns", "uid": "uid-2"},
        "spec": spec,
    }
    return profile_for("batch.paddlepaddle.org/v1", "PaddleJob").job(cr)


# --- quantities ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "canonical", "fmt"),
    [
        # TestQuantityParseEmit
        ("1024Mi", "1Gi", quantity.BINARY_SI),
        ("1000M", "1G", quantity.DECIMAL_SI),
        (".001Ki", "1024m", quantity.BINARY_SI),
        # TestQuantityParseEmit "rounds up, changes format": below 1, a binary amount is decimal.
        (".000000000001Ki", "2n", quantity.DECIMAL_SI),
        # TestQuantityParse "things that saturate/round": beyond nano rounds up (away from zero).
        ("3.001n", "4n", quantity.DECIMAL_SI),
        ("0.00000012345", "124n", quantity.DECIMAL_SI),
        ("-0.00000012345", "-124n", quantity.DECIMAL_SI),
        # TestQuantityString: trailing zeros move into the largest SI suffix.
        ("1.08", "1080m", quantity.DECIMAL_SI),
        ("1000", "1k", quantity.DECIMAL_SI),
        ("1500000", "1500k", quantity.DECIMAL_SI),
        ("0.5Gi", "512Mi", quantity.BINARY_SI),
        ("1025Ki", "1025Ki", quantity.BINARY_SI),
        # TestQuantityString: DecimalExponent keeps exponent notation, multiples of 3.
        ("1e3", "1e3", quantity.DECIMAL_EXPONENT),
        ("0.08e0", "80e-3", quantity.DECIMAL_EXPONENT),
        ("1.2e3", "1200", quantity.DECIMAL_EXPONENT),
        # TestQuantityString (Kubernetes >= 1.34): no SI suffix past E, exponent notation instead.
        ("1000E", "1e21", quantity.DECIMAL_SI),
        # TestQuantityParse: zero prints as 0 whatever its suffix; "1." is a number.
        ("0Gi", "0", quantity.BINARY_SI),
        ("1.", "1", quantity.DECIMAL_SI),
        ("+1.5Gi", "1536Mi", quantity.BINARY_SI),
        # YAML numbers: cpu: 2, cpu: 0.5
        (2, "2", quantity.DECIMAL_SI),
        (0.5, "500m", quantity.DECIMAL_SI),
    ],
)
def test_quantity_canonical_form(text, canonical, fmt):
    q = parse_quantity(text)
    assert q.format == fmt
    assert format_quantity(q) == canonical
    # What we emit is itself canonical: the API server would keep it byte for byte.
    assert format_quantity(parse_quantity(canonical)) == canonical
    assert parse_quantity(canonical).nanos == q.nanos


def sum_of(values):
    """``resource.Quantity.Add`` over several quantity strings."""
    total = Quantity(0)
    for v in values:
        total = total + parse_quantity(v)
    return total


@pytest.mark.parametrize(
    ("values", "total"),
    [
        (["500m", "1"], "1500m"),  # cpu: the first operand's DecimalSI
        (["1Gi", "512Mi"], "1536Mi"),  # memory: BinarySI, largest suffix dividing the sum
        (["1", "1"], "2"),  # nvidia.com/gpu
        (["0", "100m"], "100m"),  # TestQuantityAddZeroPreservesSuffix: zero + x keeps x's suffix
        (["1Gi", "0"], "1Gi"),  # TestQuantityAddZeroPreservesSuffix: x + zero
        (["1G", "1Gi"], "2073741824"),  # mixed: DecimalSI of the first, no suffix fits
        (["512Mi", "512Mi", "1Gi"], "2Gi"),
        (["1"] * 101, "101"),  # trainer v2 coscheduling test: 101 replicas of 1 CPU
        (["4Gi"] * 101, "404Gi"),  # ... and of 4Gi
    ],
)
def test_quantity_add(values, total):
    assert format_quantity(sum_of(values)) == total


@pytest.mark.parametrize(
    "text",
    # quantity_test.go's invalid list, plus what the CRD pattern refuses ("." and "1e").
    [
        *["", " 1", "1 ", "1.1.M", "1+1.0M", "0.1mi", "0.1am", "aoeu", ".5i", "1i", "-3.01i", "-3.01e-"],
        *["1e4294967297", ".", "1e", "1KiB", True, None],
    ],
)
def test_quantity_invalid(text):
    with pytest.raises(ValueError):
        parse_quantity(text)


FORMATS = st.sampled_from([quantity.DECIMAL_SI, quantity.BINARY_SI, quantity.DECIMAL_EXPONENT])
NANOS = st.one_of(
    st.integers(min_value=-(10**30), max_value=10**30),
    # binary-looking amounts: k * 1024^p bytes
    st.builds(lambda k, p: k * 1024**p * NANO, st.integers(-5000, 5000), st.integers(0, 7)),
)


@given(NANOS, FORMATS)
def test_quantity_format_round_trips(nanos, fmt):
    q = Quantity(nanos, fmt)
    text = format_quantity(q)
    back = parse_quantity(text)
    assert back.nanos == nanos
    assert format_quantity(back) == text


@given(NANOS, NANOS, FORMATS, FORMATS)
def test_quantity_add_is_exact(a, b, fa, fb):
    qa, qb = Quantity(a, fa), Quantity(b, fb)
    total = parse_quantity(format_quantity(qa)) + parse_quantity(format_quantity(qb))
    assert total.nanos == a + b
    assert parse_quantity(format_quantity(sum_of([format_quantity(qa), format_quantity(qb)]))).nanos == a + b


# --- scheduler, minMember, minResources ----------------------------------------------------


@pytest.mark.parametrize(
    ("config", "kind", "name"),
    [
        (VOLCANO, gang.VOLCANO, "volcano"),
        (PLUGINS, gang.SCHEDULER_PLUGINS, "scheduler-plugins-scheduler"),
        ({"gang_scheduler": " volcano "}, gang.VOLCANO, "volcano"),
        ({"gang_scheduler": ""}, "", ""),
        ({}, "", ""),
        (None, "", ""),
    ],
)
def test_scheduler_kind(config, kind, name):
    assert gang.scheduler_kind(config) == kind
    assert gang.scheduler_name(config) == name


TF = {"Chief": (1, None), "Worker": (2, None), "PS": (1, None)}


@pytest.mark.parametrize(
    ("job", "expected"),
    [
        (tfjob(TF), 4),  # GetTotalReplicas
        (tfjob({"Worker": (None, None)}), 1),  # unset replicas count as 1
        (tfjob(TF, {"schedulingPolicy": {"minAvailable": 2}}), 2),
        (tfjob(TF, {"schedulingPolicy": {"minAvailable": 0}}), 0),  # a set pointer, even 0
        (tfjob(TF, {"schedulingPolicy": {"queue": "q"}}), 4),
        (paddlejob(top_policy={"minAvailable": 1}), 1),  # paddle-operator's spec.schedulingPolicy
        (paddlejob(run_policy={"schedulingPolicy": {"minAvailable": 3}}), 3),
        (paddlejob(), 2),
    ],
)
def test_min_member(job, expected):
    assert gang.min_member(job) == expected


CPU1_1GI = res({"cpu": "1", "memory": "1Gi"})
HALF_CPU = res({"cpu": "500m", "memory": "512Mi"})


@pytest.mark.parametrize(
    ("case", "job", "classes", "expected"),
    [
        (
            "schedulingPolicy.minResources wins and is canonicalised",
            tfjob(TF, {"schedulingPolicy": {"minResources": {"cpu": "1.5", "memory": "1024Mi"}}}),
            {},
            {"cpu": "1500m", "memory": "1Gi"},
        ),
        (
            "every replica's requests when minAvailable is unset",
            tfjob({"Chief": (1, CPU1_1GI), "Worker": (2, HALF_CPU)}),
            {},
            {"cpu": "2", "memory": "2Gi"},
        ),
        (
            "limits when requests is unset (AddResourceList)",
            tfjob({"Worker": (2, res(limits={"nvidia.com/gpu": 1, "cpu": "2"}))}),
            {},
            {"cpu": "4", "nvidia.com/gpu": "2"},
        ),
        (
            "requests: {} is set, so limits are not used (Go: req != nil)",
            tfjob({"Worker": (2, res(requests={}, limits={"cpu": "2"}))}),
            {},
            {},
        ),
        (
            "minAvailable 1: the higher PriorityClass value goes first",
            tfjob(
                {"Chief": (1, CPU1_1GI), "Worker": (2, res({"nvidia.com/gpu": "1"}), "high")},
                {"schedulingPolicy": {"minAvailable": 1}},
            ),
            {"high": 1000},
            {"nvidia.com/gpu": "1"},
        ),
        (
            "unknown PriorityClass counts as 0; ties keep the profile's order (Chief, PS, Worker)",
            tfjob(
                {"Worker": (2, HALF_CPU), "PS": (1, CPU1_1GI, "gone"), "Chief": (1, res({"cpu": "3"}))},
                {"schedulingPolicy": {"minAvailable": 2}},
            ),
            {"low": -5},
            {"cpu": "4", "memory": "1Gi"},
        ),
        (
            "a negative priority sorts after the default 0",
            tfjob(
                {"Chief": (1, res({"cpu": "3"}), "low"), "Worker": (2, HALF_CPU)},
                {"schedulingPolicy": {"minAvailable": 2}},
            ),
            {"low": -5},
            {"cpu": "1", "memory": "1Gi"},
        ),
        (
            "minAvailable beyond the replicas counts every pod once",
            tfjob({"Worker": (2, HALF_CPU)}, {"schedulingPolicy": {"minAvailable": 10}}),
            {},
            {"cpu": "1", "memory": "1Gi"},
        ),
        (
            "minAvailable 0: no minimum",
            tfjob({"Worker": (2, HALF_CPU)}, {"schedulingPolicy": {"minAvailable": 0}}),
            {},
            {},
        ),
        (
            "no resources anywhere",
            tfjob({"Worker": (3, None)}),
            {},
            {},
        ),
    ],
)
def test_min_resources(case, job, classes, expected):
    assert gang.min_resources(job, classes) == expected, case


def test_min_resources_sums_every_container_but_not_init_containers():
    job = tfjob({"Worker": (2, HALF_CPU)})
    spec = job.groups[0].template["spec"]
    spec["containers"].append({"name": "sidecar", "image": "x", "resources": res({"cpu": "100m"})})
    spec["initContainers"] = [{"name": "init", "image": "x", "resources": res({"cpu": "8"})}]
    assert gang.min_resources(job, {}) == {"cpu": "1200m", "memory": "1Gi"}


def test_min_resources_bad_quantity_is_an_invalid_job():
    job = tfjob({"Worker": (1, res({"cpu": "one"}))})
    with pytest.raises(InvalidJob, match="'one' is not a valid Kubernetes quantity"):
        gang.min_resources(job, {})


# --- the PodGroup ----------------------------------------------------------------------------

LABELS = {
    "training.kubeflow.org/operator-name": "tfjob-controller",
    "training.kubeflow.org/job-name": "mnist",
}
OWNER = {
    "apiVersion": "kubeflow.org/v1",
    "kind": "TFJob",
    "name": "mnist",
    "uid": "uid-1",
    "controller": True,
    "blockOwnerDeletion": True,
}


@pytest.mark.parametrize(
    ("case", "config", "policy", "existing", "spec"),
    [
        (
            "Volcano defaults: queue default (PR #1977), no priorityClassName",
            VOLCANO,
            {},
            None,
            {"minMember": 3, "queue": "default", "minResources": {"cpu": "2", "memory": "2Gi"}},
        ),
        (
            "Volcano with a schedulingPolicy",
            VOLCANO,
            {"queue": "research", "priorityClass": "high", "minAvailable": 2},
            None,
            {
                "minMember": 2,
                "queue": "research",
                "priorityClassName": "high",
                "minResources": {"cpu": "1500m", "memory": "1536Mi"},
            },
        ),
        (
            "Volcano keeps the existing PodGroup's queue",
            VOLCANO,
            {"queue": "research"},
            {"spec": {"queue": "team-a", "minMember": 3}},
            {"minMember": 3, "queue": "team-a", "minResources": {"cpu": "2", "memory": "2Gi"}},
        ),
        (
            "scheduler-plugins: minMember, minResources, scheduleTimeoutSeconds; no queue",
            PLUGINS,
            {"queue": "ignored", "scheduleTimeoutSeconds": 120},
            None,
            {"minMember": 3, "minResources": {"cpu": "2", "memory": "2Gi"}, "scheduleTimeoutSeconds": 120},
        ),
        (
            "scheduler-plugins with explicit minResources",
            PLUGINS,
            {"minResources": {"cpu": "8"}},
            None,
            {"minMember": 3, "minResources": {"cpu": "8"}},
        ),
    ],
)
def test_pod_group(case, config, policy, existing, spec):
    job = tfjob(
        {"Chief": (1, CPU1_1GI), "Worker": (2, HALF_CPU)},
        {"schedulingPolicy": policy} if policy else None,
        annotations={"team": "ml", "kubectl.kubernetes.io/last-applied-configuration": "{...}"},
    )
    pg = gang.pod_group(job, config, {}, existing=existing, labels=LABELS)
    assert pg["spec"] == spec, case
    assert pg["apiVersion"] == (gang.VOLCANO_API if config is VOLCANO else gang.SCHEDULER_PLUGINS_API)
    assert pg["kind"] == "PodGroup"
    assert pg["metadata"] == {
        "name": "mnist",
        "namespace": "ns",
        "labels": LABELS,
        "annotations": {"team": "ml"},
        "ownerReferences": [OWNER],
    }


def test_no_pod_group_when_gang_scheduling_is_off():
    job = tfjob(TF)
    assert gang.pod_group(job, {}, {}) is None


# --- pods ----------------------------------------------------------------------------------


def desired(job):
    group = job.groups[0]
    return {
        "metadata": {"name": f"mnist-{group.label}-0", "labels": {"a": "b"}},
        "spec": copy.deepcopy(group.template["spec"]),
    }


@pytest.mark.parametrize(
    ("case", "config", "template_scheduler", "scheduler", "annotations", "labels", "warned"),
    [
        (
            "Volcano fills an empty schedulerName and the gang annotations",
            VOLCANO,
            None,
            "volcano",
            {gang.GROUP_NAME_ANNOTATION: "mnist", gang.TASK_SPEC_ANNOTATION: "worker"},
            {"a": "b"},
            False,
        ),
        (
            "a template naming volcano itself still joins the gang, no warning",
            VOLCANO,
            "volcano",
            "volcano",
            {gang.GROUP_NAME_ANNOTATION: "mnist", gang.TASK_SPEC_ANNOTATION: "worker"},
            {"a": "b"},
            False,
        ),
        (
            "another scheduler is kept and warned about (SetPodTemplateSchedulerName)",
            VOLCANO,
            "default-scheduler",
            "default-scheduler",
            {gang.GROUP_NAME_ANNOTATION: "mnist", gang.TASK_SPEC_ANNOTATION: "worker"},
            {"a": "b"},
            True,
        ),
        (
            "scheduler-plugins: its name and the pod-group label",
            PLUGINS,
            None,
            "scheduler-plugins-scheduler",
            None,
            {"a": "b", gang.POD_GROUP_LABEL: "mnist"},
            False,
        ),
        (
            "scheduler-plugins with another scheduler in the template",
            PLUGINS,
            "my-scheduler",
            "my-scheduler",
            None,
            {"a": "b", gang.POD_GROUP_LABEL: "mnist"},
            True,
        ),
        ("gang scheduling off: the pod is left alone", {}, None, None, None, {"a": "b"}, False),
    ],
)
def test_decorate_pod(case, config, template_scheduler, scheduler, annotations, labels, warned):
    job = tfjob({"Worker": (2, None, None, template_scheduler)})
    pod = desired(job)
    event = gang.decorate_pod(pod, job, job.groups[0], config)
    assert pod["spec"].get("schedulerName") == scheduler, case
    assert pod["metadata"].get("annotations") == annotations, case
    assert pod["metadata"]["labels"] == labels, case
    if warned:
        assert event["type"] == "Warning" and event["reason"] == "SetPodTemplateSchedulerName"
        assert "will not be overwritten" in event["message"]
    else:
        assert event is None


def pg_status(phase, conditions=None):
    pg = {"metadata": {"name": "mnist", "namespace": "ns"}, "spec": {"minMember": 10, "queue": "default"}}
    if phase is not None:
        pg["status"] = {"phase": phase, "conditions": conditions or []}
    return pg


@pytest.mark.parametrize(
    ("case", "kind", "observed", "allowed"),
    [
        ("Volcano PodGroup not created yet (DelayPodCreationDueToPodGroup(nil))", gang.VOLCANO, None, False),
        ("Volcano has not set a phase yet (#1630)", gang.VOLCANO, pg_status(None), False),
        (
            "Volcano Pending: e2e minAvailable 10 stays Created (#1729)",
            gang.VOLCANO,
            pg_status("Pending"),
            False,
        ),
        ("Volcano Inqueue: admitted", gang.VOLCANO, pg_status("Inqueue"), True),
        ("Volcano Running", gang.VOLCANO, pg_status("Running"), True),
        ("scheduler-plugins never delays pod creation", gang.SCHEDULER_PLUGINS, pg_status("Pending"), True),
        ("no gang scheduling", "", None, True),
    ],
)
def test_may_create_pods(case, kind, observed, allowed):
    ok, why = gang.may_create_pods(kind, observed)
    assert ok is allowed, case
    assert bool(why) is not allowed


def test_may_create_pods_explains_with_volcanos_condition():
    observed = pg_status(
        "Pending",
        [
            {
                "type": "Unschedulable",
                "reason": "NotEnoughResources",
                "message": "old",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            },
            {
                "type": "Unschedulable",
                "reason": "NotEnoughResources",
                "message": "10/10 tasks in gang unschedulable: pod group is not ready, 10 Pending",
                "lastTransitionTime": "2026-01-01T00:05:00Z",
            },
        ],
    )
    ok, why = gang.may_create_pods(gang.VOLCANO, observed)
    assert not ok
    assert why.startswith("PodGroup ns/mnist is Pending: Volcano has not admitted the gang")
    assert "minMember 10" in why and why.endswith(
        "10/10 tasks in gang unschedulable: pod group is not ready, 10 Pending"
    )


@pytest.mark.parametrize(
    ("case", "min_resources", "says"),
    [
        ("no minResources: nothing to say about them", None, None),
        ("what the gang needs, sorted", {"memory": "2Gi", "cpu": "1k"}, "minResources cpu 1k, memory 2Gi"),
    ],
)
def test_may_create_pods_says_what_the_gang_needs(case, min_resources, says):
    observed = pg_status("Pending")
    if min_resources:
        observed["spec"]["minResources"] = min_resources
    ok, why = gang.may_create_pods(gang.VOLCANO, observed)
    assert not ok, case
    if says:
        assert f"the gang needs {says}, admitted only when queue 'default'" in why, case
    else:
        assert "minResources" not in why, case


DESIRED = {"spec": {"minMember": 3, "queue": "default", "minResources": {"cpu": "2", "memory": "2Gi"}}}


def observed_with(**spec):
    pg = copy.deepcopy(DESIRED)
    pg["spec"].update(spec)
    pg["status"] = {"phase": "Running", "running": 3}
    pg["metadata"] = {"resourceVersion": "42"}
    return pg


@pytest.mark.parametrize(
    ("case", "observed", "update"),
    [
        ("unchanged", observed_with(), False),
        (
            "quantities compare by value: 2048Mi is 2Gi",
            observed_with(minResources={"cpu": "2000m", "memory": "2048Mi"}),
            False,
        ),
        (
            "fields a scheduler adds are not ours (PR #2079)",
            observed_with(minTaskMember={"worker": 2}),
            False,
        ),
        ("minMember changed (minAvailable edited)", observed_with(minMember=2), True),
        ("a resource changed", observed_with(minResources={"cpu": "1", "memory": "2Gi"}), True),
        ("a resource is missing", observed_with(minResources={"cpu": "2"}), True),
        ("queue differs", observed_with(queue="other"), True),
        ("priorityClassName added", observed_with(priorityClassName="high"), True),
        ("scheduleTimeoutSeconds set by someone else", observed_with(scheduleTimeoutSeconds=60), True),
        (
            "an unparsable observed quantity",
            observed_with(minResources={"cpu": "two", "memory": "2Gi"}),
            True,
        ),
    ],
)
def test_needs_update(case, observed, update):
    assert gang.needs_update(DESIRED, observed) is update, case


def test_needs_update_treats_a_missing_resource_as_zero():
    desired_pg = {"spec": {"minMember": 1, "minResources": {"cpu": "1"}}}
    assert not gang.needs_update(
        desired_pg, {"spec": {"minMember": 1, "minResources": {"cpu": "1", "memory": "0"}}}
    )
    assert not gang.needs_update({"spec": {"minMember": 1}}, {"spec": {"minMember": 1, "minResources": {}}})
