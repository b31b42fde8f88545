"""OLM installs the operator on the real node and upgrades it with jobs in flight (issue 38 §3).

hack/olm-test.sh runs with OLM_REAL_NODE=true (the CSV's Deployment on the real node, its image
assembled here) and OLM_GATE: it installs the first CSV and creates jobs of four kinds in the
namespace `operators`, then hands them to these tests before and after it upgrades to the later
CSV. Between the steps the tests check what only a running operator shows: the first CSV's
operator runs the jobs (one to the end), and after the upgrade the new CSV's pod takes the rest
over with the very pods they had and their conditions neither lost nor doubled. No other operator
runs meanwhile (`hack/test.sh real-node` runs these after the Deployment's tests, undeployed)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml
from kube import HANG_S, REAL_NODE, ROOT, finish_the_unfinished, get, wait_for
from operator_pod import KUBEFLOW_CONDITIONS, OperatorPod, owned_pods, ready, uids

pytestmark = pytest.mark.olm_real_node

NS = "operators"
OPERATOR = OperatorPod(NS)
# The jobs hack/olm-test.sh creates (config/samples), by resource.
V1_SAMPLES = ["tfjob_dist.yaml", "pytorchjob_simple.yaml", "xgboostjob_iris.yaml"]
TRAINJOB = "torch-ddp"
# Finished by the first CSV's operator, before the upgrade.
FINISHED_FIRST = "xgboostjob"
LOG = ROOT / ".local/test/olm-real-node.log"


def v1_jobs() -> dict[str, tuple[str, int]]:
    """resource: (name, number of pods) of each v1 sample."""
    jobs = {}
    for sample in V1_SAMPLES:
        doc = yaml.safe_load((ROOT / "config/samples" / sample).read_text())
        replicas = next(v for k, v in doc["spec"].items() if k.endswith("ReplicaSpecs"))
        jobs[doc["kind"].lower()] = (
            doc["metadata"]["name"],
            sum(r.get("replicas", 1) for r in replicas.values()),
        )
    return jobs


def next_version() -> str:
    """The later bundle's version (hack/olm-test.sh: the next patch version), its image's tag."""
    line = next(
        x for x in (ROOT / "versions.env").read_text().splitlines() if x.startswith("OPERATOR_VERSION=")
    )
    major_minor, _, patch = line.split("=", 1)[1].strip("\"'").rpartition(".")
    return f"{major_minor}.{int(patch) + 1}"


# How long hack/olm-test.sh may wait for OLM's steps, all together (its OLM_TEST_TIMEOUT).
OLM_BOUND_S = 2 * HANG_S


class Olm:
    """hack/olm-test.sh in the background, and its gate."""

    def __init__(self, gate: Path):
        self.gate = gate
        LOG.parent.mkdir(parents=True, exist_ok=True)
        env = {
            **os.environ,
            "OLM_REAL_NODE": "true",
            "OLM_GATE": str(gate),
            "OLM_TEST_TIMEOUT": str(OLM_BOUND_S),
        }
        with LOG.open("w") as log:
            self.process = subprocess.Popen(
                [str(ROOT / "hack/olm-test.sh")], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT
            )

    def reached(self, step: str) -> bool:
        if self.process.poll() is not None:
            tail = "".join(LOG.read_text().splitlines(keepends=True)[-40:])
            raise AssertionError(f"hack/olm-test.sh ended ({self.process.returncode}) before {step}:\n{tail}")
        return (self.gate / step).exists()

    def wait(self, step: str) -> None:
        # The script bounds OLM's steps itself (OLM_TEST_TIMEOUT) and then ends, which ``reached``
        # reports with the script's reason; this bound only catches the script hanging.
        wait_for(
            lambda: self.reached(step),
            timeout=OLM_BOUND_S + HANG_S,
            interval=1,
            what=f"hack/olm-test.sh: {step}",
        )

    def go(self, step: str) -> None:
        (self.gate / step).touch()

    def finish(self) -> int:
        self.go("done")
        try:
            return self.process.wait(timeout=HANG_S)
        except subprocess.TimeoutExpired:
            self.process.terminate()
            return self.process.wait()


@pytest.fixture(scope="module")
def olm(tmp_path_factory):
    olm = Olm(tmp_path_factory.mktemp("olm-gate"))
    try:
        yield olm
    finally:
        rc = olm.finish()
    assert rc == 0, f"hack/olm-test.sh failed ({rc}): {LOG}"


def trainjob_pods() -> list[dict]:
    return get("pods", "-n", NS, "-l", f"jobset.sigs.k8s.io/jobset-name={TRAINJOB}")["items"]


def conditions(resource: str, name: str) -> list[dict]:
    return get(resource, "-n", NS, name).get("status", {}).get("conditions") or []


def true_types(resource: str, name: str) -> set[str]:
    return {c["type"] for c in conditions(resource, name) if c["status"] == "True"}


def running_with_all_pods(resource: str, name: str, count: int) -> bool:
    return "Running" in true_types(resource, name) and len(owned_pods(NS, name)) == count


# What the tests saw before the upgrade: the first CSV's pod, each job's pods and conditions.
seen: dict = {}


def test_the_first_csv_runs_on_the_real_node_and_its_operator_runs_the_jobs(olm):
    olm.wait("installed")
    pod = wait_for(
        lambda: next((p for p in OPERATOR.pods() if ready(p)), None), what="the operator pod Ready"
    )
    assert pod["spec"]["nodeName"] == REAL_NODE
    assert all(s["containerID"].startswith("containerd://") for s in pod["status"]["containerStatuses"])
    for resource, (name, count) in v1_jobs().items():
        wait_for(lambda r=resource, n=name, c=count: running_with_all_pods(r, n, c), what=f"{name} Running")
    wait_for(lambda: len(trainjob_pods()) == 2, what=f"{TRAINJOB}'s pods")
    finished, _ = v1_jobs()[FINISHED_FIRST]
    finish_the_unfinished(owned_pods(NS, finished))
    wait_for(lambda: "Succeeded" in true_types(FINISHED_FIRST, finished), what=f"{finished} Succeeded")
    OPERATOR.assert_the_zygote_served_its_passes()
    seen["operator pod"] = pod["metadata"]["uid"]
    seen["pods"] = {name: uids(owned_pods(NS, name)) for name, _ in v1_jobs().values()}
    seen["pods"][TRAINJOB] = uids(trainjob_pods())
    seen["conditions"] = {name: conditions(resource, name) for resource, (name, _) in v1_jobs().items()}
    seen["conditions"][TRAINJOB] = conditions("trainjob", TRAINJOB)
    olm.go("upgrade")


def the_new_operator_pod() -> dict | None:
    """The later CSV's pod, once it is the only one: Ready on the real node with the later image.
    OLM re-applies the first CSV's Deployment during the upgrade without the Subscription's config
    (overrides/config.go: the config is the Subscription's whose installedCSV is the CSV, and that is
    already the later one), so a pod of the first CSV may come and go on a KWOK node meanwhile."""
    pods = OPERATOR.pods()
    if len(pods) != 1 or pods[0]["metadata"]["uid"] == seen["operator pod"] or not ready(pods[0]):
        return None
    images = {c["image"] for c in pods[0]["spec"]["containers"]}
    on_the_node = pods[0]["spec"].get("nodeName") == REAL_NODE
    return pods[0] if on_the_node and all(i.endswith(f":{next_version()}") for i in images) else None


def assert_kept(name: str, before: list[dict], after: list[dict]) -> None:
    """No condition lost (every type still there; one that did not change status kept its
    transition time) or doubled (a type once)."""
    types = [c["type"] for c in after]
    assert len(types) == len(set(types)), (name, types)
    now = {c["type"]: c for c in after}
    for condition in before:
        assert condition["type"] in now, (name, condition["type"], types)
        if now[condition["type"]]["status"] == condition["status"]:
            assert now[condition["type"]]["lastTransitionTime"] == condition["lastTransitionTime"], (
                name,
                condition,
            )


def test_the_upgrade_hands_the_jobs_to_the_new_csvs_operator_losing_nothing(olm):
    assert seen, "the first test did not get the jobs to the upgrade"
    olm.wait("upgraded")
    wait_for(
        the_new_operator_pod,
        what="the later CSV's pod, alone, Ready on the real node, its image the later one",
    )
    # The job finished before the upgrade stays as it was; the others end under the new operator.
    finished, _ = v1_jobs()[FINISHED_FIRST]
    assert conditions(FINISHED_FIRST, finished) == seen["conditions"][finished]
    for resource, (name, _) in v1_jobs().items():
        if resource != FINISHED_FIRST:
            finish_the_unfinished(owned_pods(NS, name))
    finish_the_unfinished(trainjob_pods())
    for resource, (name, _) in v1_jobs().items():
        wait_for(lambda r=resource, n=name: "Succeeded" in true_types(r, n), what=f"{name} Succeeded")
        assert {c["type"] for c in conditions(resource, name)} <= KUBEFLOW_CONDITIONS
    wait_for(lambda: "Complete" in true_types("trainjob", TRAINJOB), what=f"{TRAINJOB} Complete")
    for resource, (name, _) in [*v1_jobs().items(), ("trainjob", (TRAINJOB, 0))]:
        assert_kept(name, seen["conditions"][name], conditions(resource, name))
        now = uids(owned_pods(NS, name) if resource != "trainjob" else trainjob_pods())
        # A clean-pod policy may delete pods once the job ended; none may be new.
        assert now.items() <= seen["pods"][name].items(), (name, "a pod was recreated", now)
    OPERATOR.assert_the_zygote_served_its_passes()
