"""PaddleJob clean-up and per-pod Services through the engine, as paddle-operator v0.3.5 does them.

Upstream has no test for either; the rows follow its source (PaddleFlow/paddle-operator, tag
v0.3.5):

- ``controllers/paddlejob_controller.go`` ``Reconcile``: the finished-job clean-up

      if pdj.Status.Phase == pdv1.Failed {
          if pdj.Spec.CleanPodPolicy == pdv1.CleanAlways || pdj.Spec.CleanPodPolicy == pdv1.CleanOnFailure {
      if pdj.Status.Phase == pdv1.Completed {
          if pdj.Spec.CleanPodPolicy == "" || pdj.Spec.CleanPodPolicy == pdv1.CleanAlways ||
             pdj.Spec.CleanPodPolicy == pdv1.CleanOnCompletion {

  where ``cleanOne`` deletes every listed pod (whatever its phase), then every Service, and never
  the ConfigMap; and "Ensure service for running pod", a Service for every pod, with the
  ``//if pdj.Spec.Intranet == pdv1.Service {`` around it commented out;
- ``controllers/paddlejob_helper.go`` ``constructService4Pod``: name and namespace of the pod,
  ``ClusterIP: "None"``, ``PublishNotReadyAddresses: true``, ports ``p-<i>`` = ``36000 + i`` for
  ``i < HOST_PORT_NUM`` (20), selector ``paddle-res-name: <pod name>``;
- ``api/v1/paddlejob_types.go``: ``CleanAlways``/``CleanNever``/``CleanOnFailure``/
  ``CleanOnCompletion`` and ``Intranet`` ``PodIP``/``Service``/``Host``.
"""

from __future__ import annotations

import pytest
from test_plan_status import LATER, created, failed, ok, paddlejob, with_phases
from training_jobs import conditions as cond
from training_jobs.plan import plan

PODS = ["job-ps-0", "job-worker-0", "job-worker-1"]
ROLES = [("ps", 1, "Never"), ("worker", 2, "Never")]
# Completed: every replica succeeded. Failed: one worker failed under Never while the others
# still run - upstream's clean-up takes the running pods too.
OUTCOMES = {
    "Completed": {name: ok() for name in PODS},
    "Failed": {"job-worker-1": failed()},
}


def job_with(intranet="Service", **spec):
    job = paddlejob(ROLES, intranet=intranet, **spec)
    if intranet is None:
        del job["spec"]["intranet"]
    return job


def finish(job, outcome):
    job, observed = created(job)
    observed = {**observed, "pods": with_phases(observed["pods"], OUTCOMES[outcome])}
    result = plan(job, observed, {}, LATER)
    want = cond.SUCCEEDED if outcome == "Completed" else cond.FAILED
    assert cond.current_state(result["status"]["conditions"]) == want
    return observed, result


def deleted(result, kind):
    return sorted(r["name"] for r in result["delete"] if r["kind"] == kind)


@pytest.mark.parametrize(
    ("policy", "outcome", "cleans"),
    [
        # Unset cleans a Completed job and keeps a Failed one for inspection.
        (None, "Completed", True),
        (None, "Failed", False),
        ("Always", "Completed", True),
        ("Always", "Failed", True),
        ("Never", "Completed", False),
        ("Never", "Failed", False),
        ("OnFailure", "Completed", False),
        ("OnFailure", "Failed", True),
        ("OnCompletion", "Completed", True),
        ("OnCompletion", "Failed", False),
    ],
)
def test_clean_pod_policy_when_finished(policy, outcome, cleans):
    spec = {} if policy is None else {"cleanPodPolicy": policy}
    observed, result = finish(job_with(**spec), outcome)
    assert deleted(result, "Pod") == (PODS if cleans else [])
    assert deleted(result, "Service") == (PODS if cleans else [])
    # The ConfigMap outlives the clean-up in every case: it goes with the job.
    assert [o["metadata"]["name"] for o in observed["configmaps"]] == ["job"]
    assert deleted(result, "ConfigMap") == []
    assert result["create"] == []


@pytest.mark.parametrize(
    ("run_policy", "outcome", "cleans"),
    [
        # Our alternative spelling decides when paddle-operator's field is unset.
        ("None", "Completed", False),
        ("All", "Failed", True),
    ],
)
def test_run_policy_clean_pod_policy_replaces_the_unset_default(run_policy, outcome, cleans):
    _, result = finish(job_with(runPolicy={"cleanPodPolicy": run_policy}), outcome)
    assert deleted(result, "Pod") == (PODS if cleans else [])


def upstream_service(name):
    """``constructService4Pod`` for pod ``name``, as it reaches the API server."""
    return {
        "clusterIP": "None",
        "publishNotReadyAddresses": True,
        "ports": [{"name": f"p-{i}", "port": 36000 + i} for i in range(20)],
        "selector": {"paddle-res-name": name},
    }


def selects(selector, labels):
    return all(labels.get(k) == v for k, v in selector.items())


@pytest.mark.parametrize(
    ("intranet", "spec"),
    [
        (None, {}),  # unset: upstream's PodIP behaviour
        ("PodIP", {}),
        ("Service", {}),
        ("Host", {}),
        ("PodIP", {"elastic": 1}),  # elastic pods have no ConfigMap, but still their Services
    ],
)
def test_every_intranet_mode_gets_a_headless_service_per_pod(intranet, spec):
    job, observed = created(job_with(intranet, **spec))
    pods = {p["metadata"]["name"]: p for p in observed["pods"]}
    services = {s["metadata"]["name"]: s for s in observed["services"]}
    assert sorted(pods) == PODS
    assert sorted(services) == PODS
    owner = job["metadata"]["uid"]
    for name, svc in services.items():
        want = upstream_service(name)
        got = svc["spec"]
        assert svc["metadata"]["namespace"] == pods[name]["metadata"]["namespace"]
        assert [r["uid"] for r in svc["metadata"]["ownerReferences"]] == [owner]
        assert {k: got[k] for k in ("clusterIP", "publishNotReadyAddresses", "ports")} == {
            k: want[k] for k in ("clusterIP", "publishNotReadyAddresses", "ports")
        }
        # Ours also selects by the job's labels; it must pick the same single pod as upstream's.
        assert selects(want["selector"], got["selector"])
        matched = [p for p, pod in pods.items() if selects(got["selector"], pod["metadata"]["labels"])]
        assert matched == [name]


def test_services_are_created_with_their_pods():
    # Upstream creates a pod's Service on a later reconcile than the pod; one pass does both here,
    # so a pod's name resolves as soon as the pod has an address.
    result = plan(job_with("PodIP"), {"pods": [], "services": [], "configmaps": []}, {}, LATER)
    kinds = [(o["kind"], o["metadata"]["name"]) for o in result["create"]]
    assert sorted(n for k, n in kinds if k == "Pod") == PODS
    assert sorted(n for k, n in kinds if k == "Service") == PODS
