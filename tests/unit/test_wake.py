"""The wake watcher's decisions: which pod changes wake a job, and the signature written."""

from __future__ import annotations

import copy

import pytest
from training_jobs.idle import (
    EDITED_WHILE_IDLE,
    FOREIGN_CONDITIONS,
    IDLE_LABEL,
    PARKED_BEHIND,
    edited_while_idle,
    idle_value,
    job_part,
)
from training_jobs.plan import FINISHED_LABEL
from training_jobs.registry import PROFILES
from training_kube.client import ApiError
from training_wake.signature import (
    ANNOTATION,
    JobSeen,
    PodIndex,
    foreign_condition_jobs,
    job_of,
    job_seen,
    pod_state,
    podless_jobs,
    short_of_pods,
    signature,
    stale_jobs,
    wanted_pods,
)

OWNER = {"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "name": "mnist", "controller": True, "uid": "u"}
JOB = ("kubeflow.org/v1", "TFJob", "team", "mnist")


def pod(name="mnist-worker-0", phase="Pending", restarts=0, waiting=None, unschedulable=False, owner=OWNER):
    status = {"phase": phase}
    if restarts or waiting:
        state = {"waiting": {"reason": waiting}} if waiting else {"running": {}}
        status["containerStatuses"] = [{"name": "tensorflow", "restartCount": restarts, "state": state}]
    if unschedulable:
        status["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]
    meta = {"name": name, "namespace": "team", "ownerReferences": [owner] if owner else []}
    return {"metadata": meta, "status": status}


@pytest.mark.parametrize(
    ("owner", "expected"),
    [
        (OWNER, JOB),
        ({**OWNER, "controller": False}, None),
        ({**OWNER, "kind": "Job", "apiVersion": "batch/v1"}, None),
        (
            {**OWNER, "apiVersion": "batch.paddlepaddle.org/v1", "kind": "PaddleJob"},
            ("batch.paddlepaddle.org/v1", "PaddleJob", "team", "mnist"),
        ),
        (None, None),
    ],
)
def test_job_of_follows_the_controller_reference_of_our_kinds(owner, expected):
    assert job_of(pod(owner=owner)) == expected


@pytest.mark.parametrize(
    ("p", "state"),
    [
        (pod(), ("Pending", 0, ())),
        (pod(phase="Running", restarts=2), ("Running", 2, ())),
        (pod(waiting="ContainerCreating"), ("Pending", 0, ())),
        (pod(waiting="ImagePullBackOff"), ("Pending", 0, ("ImagePullBackOff",))),
        (pod(unschedulable=True), ("Pending", 0, ("Unschedulable",))),
        (
            {
                **pod(phase="Running"),
                "metadata": {**pod()["metadata"], "deletionTimestamp": "2026-11-23T10:00:00Z"},
            },
            ("Running", 0, ("Terminating",)),
        ),
    ],
)
def test_pod_state(p, state):
    assert pod_state(p) == state


def test_signature_counts_states_and_names_the_pods():
    pods = {
        "w-0": ("Running", 1, ()),
        "w-1": ("Succeeded", 0, ()),
        "w-2": ("Running", 0, ()),
        "w-3": ("Pending", 0, ("Unschedulable",)),
    }
    counts, names = signature(pods).split(";")
    assert counts == "Pending=1,Running=2,Succeeded=1,Unschedulable=1,restarts=1"
    assert names.startswith("pods=") and len(names) == len("pods=") + 8
    assert signature(dict(reversed(pods.items()))) == signature(pods)
    assert signature({}) == ""


def test_scaling_that_keeps_every_count_still_changes_the_signature():
    """One edit that removes ps-1 and ps-2 and adds worker-2 and worker-3 leaves five Running."""
    before = dict.fromkeys(("ps-0", "ps-1", "ps-2", "worker-0", "worker-1"), ("Running", 0, ()))
    after = dict.fromkeys(("ps-0", "worker-0", "worker-1", "worker-2", "worker-3"), ("Running", 0, ()))
    assert signature(before).split(";")[0] == signature(after).split(";")[0] == "Running=5"
    assert signature(before) != signature(after)


def terminating(phase="Running"):
    p = pod(phase=phase)
    p["metadata"]["deletionTimestamp"] = "2026-11-23T10:00:00Z"
    return p


def counts_of(sig: str) -> str:
    return sig.split(";")[0]


@pytest.mark.parametrize(
    ("events", "woken"),
    [
        # created by the reconcile itself: nobody needs waking
        ([("ADDED", pod())], [None]),
        # a phase change of a known pod wakes its job; the same state again does not
        (
            [("ADDED", pod()), ("MODIFIED", pod(phase="Running")), ("MODIFIED", pod(phase="Running"))],
            [None, JOB, None],
        ),
        # an in-place container restart (backoffLimit counts it) and a new problem wake it
        ([("ADDED", pod(phase="Running")), ("MODIFIED", pod(phase="Running", restarts=1))], [None, JOB]),
        ([("ADDED", pod()), ("MODIFIED", pod(unschedulable=True))], [None, JOB]),
        # a pod's deletion: the API server marks it first, even with grace 0, and that wakes the
        # job; its removal does not wake it again
        (
            [("ADDED", pod(phase="Running")), ("MODIFIED", terminating()), ("DELETED", terminating())],
            [None, JOB, None],
        ),
        ([("ADDED", pod()), ("DELETED", pod())], [None, None]),
        # a MODIFIED for a pod never seen (the watch started late) records it without waking
        ([("MODIFIED", pod(phase="Running"))], [None]),
        # pods of other controllers are ignored
        ([("ADDED", pod(owner=None)), ("MODIFIED", pod(owner=None, phase="Running"))], [None, None]),
    ],
)
def test_which_events_wake_the_job(events, woken):
    index = PodIndex()
    assert [index.observe(t, copy.deepcopy(p)) for t, p in events] == woken


TF = frozenset({("kubeflow.org/v1", "TFJob")})


def test_index_signature_and_forgetting_jobs():
    index = PodIndex()
    index.replace([pod("a", "Running"), pod("b", "Running")], TF)
    assert counts_of(index.signature_of(JOB)) == "Running=2"
    index.observe("MODIFIED", pod("a", "Succeeded"))
    assert counts_of(index.signature_of(JOB)) == "Running=1,Succeeded=1"
    index.observe("DELETED", pod("a"))
    index.observe("DELETED", pod("b"))
    assert JOB not in index.pods and index.signature_of(JOB) == ""


def test_annotation_is_skipped_when_a_job_is_copied_to_its_pod_group():
    from training_jobs.gang import SKIPPED_ANNOTATIONS

    assert ANNOTATION in SKIPPED_ANNOTATIONS


def _kubeflow_job(kind, field, container, types):
    from test_plan_status import cr, rspec

    return cr("kubeflow.org/v1", kind, {field: {t: rspec(container, n) for t, n in types}})


@pytest.mark.parametrize(
    ("api_version", "kind"), sorted({(p.api_version, p.kind) for p in PROFILES.values()})
)
def test_every_kind_has_its_pods_watched(api_version, kind):
    """The watcher selects pods by each profile's wake_label: every pod a profile creates must
    carry it, or that kind's jobs would only move at the safety-net poll."""
    from test_plan_status import caffe2job, created, mxjob, paddlejob, tfjob
    from training_jobs.registry import profile_of
    from training_wake.signature import JOB_KINDS, POD_SELECTORS

    job = {
        ("kubeflow.org/v1", "TFJob"): lambda: tfjob([("Worker", 2)]),
        ("kubeflow.org/v1", "MXJob"): lambda: mxjob([("Scheduler", 1), ("Server", 1), ("Worker", 1)]),
        ("batch.paddlepaddle.org/v1", "PaddleJob"): lambda: paddlejob([("worker", 2)]),
        ("kubeflow.org/v1alpha1", "Caffe2Job"): lambda: caffe2job(2),
        ("kubeflow.org/v1", "PyTorchJob"): lambda: _kubeflow_job(
            kind, "pytorchReplicaSpecs", "pytorch", [("Master", 1), ("Worker", 2)]
        ),
        ("kubeflow.org/v1", "XGBoostJob"): lambda: _kubeflow_job(
            kind, "xgbReplicaSpecs", "xgboost", [("Master", 1), ("Worker", 2)]
        ),
        ("kubeflow.org/v1", "JAXJob"): lambda: _kubeflow_job(kind, "jaxReplicaSpecs", "jax", [("Worker", 2)]),
        ("kubeflow.org/v1", "PaddleJob"): lambda: _kubeflow_job(
            kind, "paddleReplicaSpecs", "paddle", [("Master", 1), ("Worker", 2)]
        ),
        ("kubeflow.org/v1", "MPIJob"): lambda: _kubeflow_job(
            kind, "mpiReplicaSpecs", "mpi", [("Launcher", 1), ("Worker", 2)]
        ),
    }[(api_version, kind)]()
    _, observed = created(job)
    profile = profile_of(job)
    assert observed["pods"], kind
    for p in observed["pods"]:
        assert profile.wake_label in p["metadata"]["labels"]
        assert job_of(p) is not None
    assert profile.wake_label in POD_SELECTORS
    assert (profile.api_version, kind) in JOB_KINDS


def test_a_new_list_forgets_pods_that_went_unwatched_and_keeps_other_kinds():
    index = PodIndex()
    paddle_owner = {**OWNER, "apiVersion": "batch.paddlepaddle.org/v1", "kind": "PaddleJob"}
    index.replace([pod("a", "Running"), pod("b", "Running"), pod("p", "Running", owner=paddle_owner)], TF)
    index.replace([pod("a", "Succeeded")], TF)
    assert counts_of(index.signature_of(JOB)) == "Succeeded=1"
    assert (
        counts_of(index.signature_of(("batch.paddlepaddle.org/v1", "PaddleJob", "team", "mnist")))
        == "Running=1"
    )


OTHER = ("kubeflow.org/v1", "TFJob", "team", "other")


RUNNING, SUCCEEDED = ("Running", 0, ()), ("Succeeded", 0, ())


@pytest.mark.parametrize(
    ("annotated", "stale"),
    [
        ({"a": RUNNING, "b": SUCCEEDED}, False),  # nothing happened while nobody watched
        ({"a": RUNNING, "b": RUNNING}, True),  # a pod finished meanwhile
        ({"a": RUNNING, "c": SUCCEEDED}, True),  # same counts, another pod
        (None, True),  # never written (the watcher was down since the pods started)
    ],
)
def test_stale_jobs_are_those_whose_annotation_is_behind(annotated, stale):
    index = PodIndex()
    index.replace([pod("a", "Running"), pod("b", "Succeeded")], TF)
    annotation = None if annotated is None else signature(annotated)
    found, current = stale_jobs(index, {JOB: annotation, OTHER: None}, TF)
    assert found == ({JOB} if stale else set())
    assert current == ({} if stale else {JOB: annotation})


@pytest.mark.parametrize(
    ("pods", "annotation", "stale"),
    [
        ([pod("a"), pod("b")], None, False),  # as the creating pass left them: nothing missed
        ([pod("a"), pod("b", "Running")], None, True),  # one started unwatched
        ([pod("a"), pod("b", unschedulable=True)], None, True),  # one cannot be placed
        ([pod("a", restarts=1)], None, True),
        ([pod("a"), pod("b")], signature({"a": RUNNING, "b": RUNNING}), True),  # recreated
    ],
)
def test_pods_still_as_created_make_a_never_woken_job_stale_only_once_they_change(pods, annotation, stale):
    index = PodIndex()
    index.replace(pods, TF)
    found, _ = stale_jobs(index, {JOB: annotation}, TF)
    assert found == ({JOB} if stale else set())


def test_a_job_that_is_gone_or_of_another_kind_is_never_stale():
    index = PodIndex()
    index.replace([pod("a", "Running")], TF)
    assert stale_jobs(index, {}, TF) == (set(), {})
    assert stale_jobs(index, {JOB: None}, frozenset({("kubeflow.org/v1", "MXJob")})) == (set(), {})


@pytest.mark.parametrize(
    ("labels", "spec", "expected"),
    [
        ({}, {}, True),
        ({"training.ato.dev/finished": "true"}, {}, False),  # the runtime no longer sees it
        ({}, {"runPolicy": {"managedBy": "kubeflow.org/training-operator"}}, True),
        ({}, {"runPolicy": {"managedBy": "kueue.x-k8s.io/multikueue"}}, False),  # Kueue runs it
    ],
)
def test_job_seen_says_whether_a_job_is_still_the_operators_to_run(labels, spec, expected):
    job = {
        "metadata": {"name": "mnist", "labels": labels, "annotations": {ANNOTATION: "Running=1"}},
        "spec": spec,
    }
    assert job_seen("kubeflow.org/v1", "TFJob", job) == JobSeen("Running=1", expected)


@pytest.mark.parametrize(
    ("seen", "pods", "woken"),
    [
        (JobSeen(None, True), [], True),  # created just before the outage: its first pass failed
        (JobSeen("", True), [], False),  # woken once already
        (JobSeen("Running=1;pods=x", True), [], False),  # its pods went (suspended, cleaned up)
        (JobSeen(None, False), [], False),  # finished, or another manager's
        (JobSeen(None, True), [pod("a", "Running")], False),  # has pods: stale_jobs decides
    ],
)
def test_podless_jobs_are_the_unwoken_ones_without_pods_that_may_wait_for_a_pass(seen, pods, woken):
    index = PodIndex()
    index.replace(pods, TF)
    assert podless_jobs(index, {JOB: seen}, TF) == ({JOB} if woken else set())
    assert podless_jobs(index, {JOB: seen}, frozenset({("kubeflow.org/v1", "MXJob")})) == set()


def tfjob_spec(workers=2, **run_policy):
    template = {"spec": {"containers": [{"name": "tensorflow", "image": "busybox"}]}}
    spec = {"tfReplicaSpecs": {"Worker": {"replicas": workers, "template": template}}}
    if run_policy:
        spec["runPolicy"] = run_policy
    return {"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": {"name": "mnist"}, "spec": spec}


@pytest.mark.parametrize(
    ("job", "wanted"),
    [
        (tfjob_spec(2), {"mnist-worker-0", "mnist-worker-1"}),
        (tfjob_spec(2, suspend=True), set()),  # suspended: its pods are meant to be gone
        (tfjob_spec(0), set()),
        ({**tfjob_spec(1), "spec": {"tfReplicaSpecs": {"Nobody": {}}}}, set()),  # refused by its pass
    ],
)
def test_wanted_pods_are_the_names_the_spec_asks_for(job, wanted):
    assert wanted_pods("kubeflow.org/v1", "TFJob", job) == wanted


TWO = frozenset({"mnist-worker-0", "mnist-worker-1"})


@pytest.mark.parametrize(
    ("seen", "pods", "woken"),
    [
        # A pending pod deleted while the watcher was down: the other is as created.
        (JobSeen(None, True, wanted=TWO), [pod("mnist-worker-0")], True),
        (JobSeen(None, True, wanted=TWO), [], True),  # every pod gone, or no pass yet
        (JobSeen(None, True, wanted=TWO), [pod("mnist-worker-0"), pod("mnist-worker-1")], False),
        (JobSeen("", True, wanted=TWO), [pod("mnist-worker-0")], False),  # woken before: stale_jobs
        (JobSeen(None, True, wanted=TWO), [pod("mnist-worker-0", "Running")], False),  # stale_jobs
        (JobSeen(None, False, wanted=TWO), [pod("mnist-worker-0")], False),  # not the operator's
        (JobSeen(None, True), [], False),  # suspended: wants no pod
    ],
)
def test_short_of_pods_are_the_unwoken_jobs_missing_pods_their_spec_asks_for(seen, pods, woken):
    index = PodIndex()
    index.replace(pods, TF)
    assert short_of_pods(index, {JOB: seen}, TF) == ({JOB} if woken else set())
    assert short_of_pods(index, {JOB: seen}, frozenset({("kubeflow.org/v1", "MXJob")})) == set()


class RecordingClient:
    server = "http://127.0.0.1:1"

    def __init__(self, jobs, fail_patches=0, failing_lists=None):
        self.jobs = jobs
        self.fail_patches = fail_patches
        # resource -> how many lists of it fail (the API server's 429 while storage initialises)
        self.failing_lists = dict(failing_lists or {})
        self.patches = []

    def request(self, method, path, body=None, owner=True, **_kw):
        if method == "GET":
            resource = path.rsplit("/", 1)[-1]
            if self.failing_lists.get(resource):
                self.failing_lists[resource] -= 1
                raise ApiError(429, '{"message": "storage is (re)initializing"}', "GET", path)
            if isinstance(self.jobs, dict):
                return {"items": self.jobs.get(resource, [])}
            return {"items": self.jobs if resource == "tfjobs" else []}
        if self.fail_patches:
            self.fail_patches -= 1
            raise ConnectionRefusedError("the API server is down")
        self.patches.append((path, body))
        return {}


def tfjob_item(name, annotation=None):
    annotations = {} if annotation is None else {ANNOTATION: annotation}
    return {"metadata": {"name": name, "namespace": "team", "annotations": annotations}}


def test_after_a_list_the_watcher_wakes_jobs_that_missed_a_change_and_retries_failed_writes():
    from training_wake.watcher import Watcher

    client = RecordingClient([tfjob_item("mnist", "Running=2")], fail_patches=1)
    watcher = Watcher(client)
    selector = "training.kubeflow.org/operator-name"
    watcher._catch_up("", selector, [pod("a", "Running"), pod("b", "Succeeded")])
    assert watcher.flush() == 0, "the API server is still down"
    assert watcher.flush() == 1, "kept and written once it is back"
    (path, body), *_ = client.patches
    assert path == "/apis/kubeflow.org/v1/namespaces/team/tfjobs/mnist"
    assert body == {
        "metadata": {
            "annotations": {ANNOTATION: signature({"a": RUNNING, "b": SUCCEEDED})},
            "labels": {IDLE_LABEL: None},
        }
    }
    assert watcher.flush() == 0, "nothing new: nothing written"


def test_after_a_watch_error_the_watcher_also_wakes_jobs_without_pods_once():
    from training_wake.watcher import Watcher

    client = RecordingClient([tfjob_item("mnist"), tfjob_item("woken", "")])
    watcher = Watcher(client)
    selector = "training.kubeflow.org/operator-name"
    watcher._catch_up("", selector, [])
    assert watcher.flush() == 0, "a periodic list leaves a job without pods to its own requeue"
    watcher._catch_up("", selector, [], after_error=True)
    assert watcher.flush() == 1
    assert client.patches == [
        (
            "/apis/kubeflow.org/v1/namespaces/team/tfjobs/mnist",
            {"metadata": {"annotations": {ANNOTATION: ""}, "labels": {IDLE_LABEL: None}}},
        )
    ]


def test_a_kind_whose_jobs_cannot_be_listed_holds_up_no_other_and_is_tried_again():
    from training_wake.watcher import Watcher

    pytorch_owner = {**OWNER, "kind": "PyTorchJob"}
    client = RecordingClient(
        {"tfjobs": [tfjob_item("mnist", "Running=1")], "pytorchjobs": [tfjob_item("mnist", "Running=1")]},
        failing_lists={"tfjobs": 2},
    )
    watcher = Watcher(client)
    selector = "training.kubeflow.org/operator-name"
    pods = [pod("tf-0", "Succeeded"), pod("pt-0", "Succeeded", owner=pytorch_owner)]
    failed = watcher._catch_up("", selector, pods, after_error=True)
    assert failed == {("kubeflow.org/v1", "TFJob")}
    assert watcher.flush() == 1
    assert [path for path, _ in client.patches] == ["/apis/kubeflow.org/v1/namespaces/team/pytorchjobs/mnist"]
    assert watcher._wake_missed("", selector, failed, True) == failed, "still initialising"
    assert watcher._wake_missed("", selector, failed, True) == frozenset()
    assert watcher.flush() == 1
    assert client.patches[-1][0] == "/apis/kubeflow.org/v1/namespaces/team/tfjobs/mnist"


def test_kinds_that_failed_are_tried_again_after_one_second_then_twice_as_long_each_time():
    from training_wake.watcher import KIND_RETRY_MAX, KindRetry

    now = [100.0]
    tf = frozenset({("kubeflow.org/v1", "TFJob")})
    retry = KindRetry(tf, after_error=True, clock=lambda: now[0])
    assert not retry.due()
    waits = []
    for _ in range(9):
        start = now[0]
        while not retry.due():
            now[0] += 0.25
        waits.append(now[0] - start)
        retry.failed(tf)
    assert waits[:4] == [1.0, 2.0, 4.0, 8.0]
    assert max(waits) == KIND_RETRY_MAX
    retry.failed(frozenset())
    now[0] += 3600
    assert not retry.due(), "nothing left to try"
    assert not KindRetry(frozenset(), after_error=False).due()


def idle_job(generation=3, annotations=None, labelled_at=None, planned_with="Running=2"):
    job = {"metadata": {"name": "mnist", "namespace": "team", "generation": generation}}
    job["metadata"]["annotations"] = dict(annotations or {})
    value = idle_value(labelled_at or job, planned_with)
    job["metadata"]["labels"] = {IDLE_LABEL: value}
    return job


@pytest.mark.parametrize(
    ("case", "now", "edited"),
    [
        ("nothing changed", {}, False),
        ("the spec changed (suspend, replicas)", {"generation": 4}, True),
        ("an annotation was added (a TensorBoard's log dir)", {"annotations": {"x": "y"}}, True),
        ("only the wake signature changed", {"annotations": {ANNOTATION: "Running=1"}}, False),
        ("only the companion's note changed", {"annotations": {EDITED_WHILE_IDLE: "3-x at then"}}, False),
        ("only its foreign-condition wake", {"annotations": {FOREIGN_CONDITIONS: "Failure at then"}}, False),
    ],
)
def test_an_idle_job_is_brought_back_when_it_was_edited(case, now, edited):
    then = idle_job()
    job = idle_job(now.get("generation", 3), now.get("annotations"), labelled_at=then)
    assert edited_while_idle(job) == edited, case


def test_a_job_without_the_idle_label_is_not_brought_back():
    job = idle_job()
    del job["metadata"]["labels"][IDLE_LABEL]
    assert not edited_while_idle(job)


def test_the_idle_watch_removes_the_label_of_an_edited_job_only():
    from training_wake.watcher import bring_back_if_edited

    edited = idle_job(4, labelled_at=idle_job(3))
    edited["metadata"]["name"] = "edited"
    untouched = idle_job(3)
    client = RecordingClient([])
    for job in (edited, untouched):
        bring_back_if_edited(client, "kubeflow.org/v1", "TFJob", job)
    ((path, body),) = client.patches
    assert path == "/apis/kubeflow.org/v1/namespaces/team/tfjobs/edited"
    assert body["metadata"]["labels"] == {IDLE_LABEL: None}
    # The runtime reconciles on an annotation change, not on a label's: the patch carries one.
    (note,) = body["metadata"]["annotations"].values()
    assert note.startswith(f"{job_part(edited)} at ")


def test_a_label_written_before_the_pods_digest_is_still_read():
    """An operator upgraded with jobs idle: their labels say ``<generation>-<digest>``."""
    job = idle_job()
    job["metadata"]["labels"][IDLE_LABEL] = job_part(job)
    assert not edited_while_idle(job)
    job["metadata"]["generation"] = 4
    assert edited_while_idle(job)


TF_SELECTOR = "training.kubeflow.org/operator-name"


def parked_watcher(pods, parked_with, client=None):
    """A watcher that knows ``pods`` of JOB and has seen JOB labelled idle by a pass that planned
    with pods whose signature is ``parked_with``."""
    from training_wake.watcher import Watcher

    watcher = Watcher(client or RecordingClient([]))
    watcher._catch_up("", TF_SELECTOR, pods)
    watcher.flush()
    job = idle_job(planned_with=parked_with)
    watcher._on_idle_job("kubeflow.org/v1", "TFJob", job)
    return watcher, job


def known_signature(*pods):
    return signature({p["metadata"]["name"]: pod_state(p) for p in pods})


def test_a_job_left_idle_by_a_pass_that_saw_older_pods_is_woken():
    """The race of issue 37: the pass read the job after the wake that said "Succeeded" but its
    pods from a cache still saying "Running", and labelled it idle. No write of the companion
    follows (the signature is already on the job): the label's pods say what the pass saw."""
    now = pod("a", "Succeeded")
    client = RecordingClient([])
    watcher, job = parked_watcher([now], known_signature(pod("a", "Running")), client)
    assert watcher.flush() == 1
    ((path, body),) = client.patches
    assert path == "/apis/kubeflow.org/v1/namespaces/team/tfjobs/mnist"
    assert body["metadata"]["labels"] == {IDLE_LABEL: None}
    assert body["metadata"]["annotations"][ANNOTATION] == known_signature(now)
    assert body["metadata"]["annotations"][PARKED_BEHIND].startswith(job["metadata"]["labels"][IDLE_LABEL])
    assert watcher.flush() == 0, "woken once"


@pytest.mark.parametrize(
    ("case", "pods", "parked_with"),
    [
        ("the pass saw the pods the companion knows", [pod("a", "Running")], "same"),
        ("the companion knows no pods of the job (not listed yet)", [], "Running=1"),
    ],
)
def test_a_job_left_idle_with_the_pods_the_companion_knows_is_left_alone(case, pods, parked_with):
    client = RecordingClient([])
    watcher, _ = parked_watcher(
        pods, known_signature(*pods) if parked_with == "same" else parked_with, client
    )
    assert watcher.flush() == 0, case
    assert client.patches == [], case


def test_a_pass_that_keeps_seeing_other_pods_is_woken_once_per_label_and_pods():
    """Pods the pass reads but the companion does not index would otherwise wake it in a loop."""
    client = RecordingClient([])
    watcher, job = parked_watcher([pod("a", "Succeeded")], "Running=9", client)
    assert watcher.flush() == 1
    watcher._on_idle_job("kubeflow.org/v1", "TFJob", job)
    assert watcher.flush() == 0, "the same label again, the same pods"
    watcher.indexes[("", TF_SELECTOR)].observe("MODIFIED", pod("a", "Failed"))
    watcher._on_idle_job("kubeflow.org/v1", "TFJob", job)
    assert watcher.flush() == 1, "the pods changed since: woken again"


def test_a_parked_wake_that_fails_is_tried_again():
    client = RecordingClient([], fail_patches=1)
    watcher, _ = parked_watcher([pod("a", "Succeeded")], "Running=1", client)
    assert watcher.flush() == 0, "the API server is down"
    assert watcher.flush() == 1
    assert PARKED_BEHIND in client.patches[0][1]["metadata"]["annotations"]


def test_the_catch_up_checks_jobs_labelled_idle_while_nobody_watched():
    """A companion that restarts lists the jobs: an idle one whose pass saw other pods is woken,
    though its annotation already says what the pods are."""
    from training_wake.watcher import Watcher

    now = pod("a", "Succeeded")
    listed = tfjob_item("mnist", known_signature(now))
    listed["metadata"]["generation"] = 3
    listed["metadata"]["labels"] = {IDLE_LABEL: idle_value(listed, "Running=1")}
    client = RecordingClient([listed])
    watcher = Watcher(client)
    watcher._catch_up("", TF_SELECTOR, [now])
    assert watcher.flush() == 1
    assert PARKED_BEHIND in client.patches[0][1]["metadata"]["annotations"]


CREATED_COND = {"type": "Created", "status": "True", "reason": "TFJobCreated"}
SUCCEEDED_COND = {"type": "Succeeded", "status": "True", "reason": "TFJobSucceeded"}
FAILURE = {
    "type": "Failure",
    "status": "True",
    "reason": "Failed",
    "message": "Failed to get ansible-runner stdout",
}


def job_with(name, conditions, labels=None, spec=None):
    return {
        "metadata": {"name": name, "namespace": "team", "labels": dict(labels or {}), "annotations": {}},
        "spec": dict(spec or {}),
        "status": {"conditions": conditions},
    }


@pytest.mark.parametrize(
    ("conditions", "labels", "spec", "foreign"),
    [
        ([CREATED_COND, SUCCEEDED_COND], {FINISHED_LABEL: "true"}, {}, ()),
        ([CREATED_COND, SUCCEEDED_COND, FAILURE], {FINISHED_LABEL: "true"}, {}, ("Failure",)),
        ([CREATED_COND, FAILURE, {"type": "Successful"}], {IDLE_LABEL: "3-x"}, {}, ("Failure", "Successful")),
        ([CREATED_COND, FAILURE], {}, {}, ("Failure",)),
        # Kueue's MultiKueue copies the status from the worker cluster: not ours to repair.
        ([CREATED_COND, FAILURE], {}, {"runPolicy": {"managedBy": "kueue.x-k8s.io/multikueue"}}, ()),
    ],
)
def test_job_seen_names_condition_types_that_are_not_kubeflows(conditions, labels, spec, foreign):
    seen = job_seen("kubeflow.org/v1", "TFJob", job_with("mnist", conditions, labels, spec))
    assert seen.foreign == foreign


def test_foreign_condition_jobs_are_those_of_the_listed_kinds_with_foreign_types():
    mx = ("kubeflow.org/v1", "MXJob", "team", "mnist")
    jobs = {JOB: JobSeen(None, False, ("Failure",)), mx: JobSeen(None, True, ("Failure",))}
    other = ("kubeflow.org/v1", "TFJob", "team", "fine")
    jobs[other] = JobSeen(None, True)
    assert foreign_condition_jobs(jobs, TF) == {JOB: ("Failure",)}


def test_the_catch_up_wakes_a_finished_or_idle_job_with_a_foreign_condition():
    """The runtime's Failure on a job labelled finished (or idle) stays until a pass of it runs:
    the watcher takes both labels off with an annotation change, which the runtime reconciles."""
    from training_wake.watcher import Watcher

    client = RecordingClient(
        [
            job_with("done", [CREATED_COND, SUCCEEDED_COND, FAILURE], {FINISHED_LABEL: "true"}),
            job_with("fine", [CREATED_COND, SUCCEEDED_COND], {FINISHED_LABEL: "true"}),
            job_with(
                "kueue",
                [CREATED_COND, FAILURE],
                spec={"runPolicy": {"managedBy": "kueue.x-k8s.io/multikueue"}},
            ),
        ]
    )
    watcher = Watcher(client)
    watcher._catch_up("", "training.kubeflow.org/operator-name", [])
    ((path, body),) = client.patches
    assert path == "/apis/kubeflow.org/v1/namespaces/team/tfjobs/done"
    assert body["metadata"]["labels"] == {FINISHED_LABEL: None, IDLE_LABEL: None}
    assert body["metadata"]["annotations"][FOREIGN_CONDITIONS].startswith("Failure at ")
    assert watcher.flush() == 0, "no signature write besides"


def test_a_foreign_condition_wake_that_fails_is_tried_at_the_next_catch_up():
    from training_wake.watcher import Watcher

    client = RecordingClient(
        [job_with("done", [CREATED_COND, FAILURE], {FINISHED_LABEL: "true"})], fail_patches=1
    )
    watcher = Watcher(client)
    selector = "training.kubeflow.org/operator-name"
    watcher._catch_up("", selector, [])
    assert client.patches == [], "the API server is down"
    watcher._catch_up("", selector, [])
    assert [path for path, _ in client.patches] == ["/apis/kubeflow.org/v1/namespaces/team/tfjobs/done"]
