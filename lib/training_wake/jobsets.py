"""Wake a TrainJob when its JobSet changes: the runtime never reconciles it for that.

A TrainJob's status comes from its JobSet's (``trainer_jobs.status``), and the JobSet controller
changes only the JobSet's ``status``: the runtime's watch on owned objects drops such updates
(operator-lib's ``DependentPredicate``), as it drops a pod's phase change. This watcher is the
TrainJob's counterpart of the pod watcher (:mod:`training_wake.watcher`): it lists and watches
the JobSets of TrainJobs and, when a JobSet's signature (``trainer_jobs.observe.
jobset_signature``: conditions, per-job counts, ``suspend``) changes or the JobSet is deleted,
merge-patches the signature into the TrainJob's annotation ``training.ato.dev/jobset-signature``.
TrainJobs are watched with ``watchAnnotationsChanges: true``, so that write reconciles the
TrainJob; the pass reads the JobSet itself. A JobSet's creation wakes nothing (the pass that
created it is the one that would run).

Nothing is polled: while no JobSet changes, the watch costs nothing. After every list (at start,
after a watch error, every ``resync`` seconds) the TrainJobs are listed too and each one that is
not finished and whose annotation is not its JobSet's signature is woken: a change the watch
missed. After a watch error, TrainJobs without a JobSet are woken once as well (their pass may
sit in the runtime's error backoff). Changes are written once per TrainJob per ``debounce``.

TrainJobs labelled idle (``trainer_jobs.idle``) are out of the runtime's watch: a wake's write
removes the label too, and a watch on the idle TrainJobs brings back each one edited since its
label was written (Kueue's ``suspend`` and runtime patches are edits) and each one whose label
digests another JobSet signature than this watcher knows (its pass read an older JobSet), as the
pod watcher does for the v1 kinds (:mod:`training_wake.watcher`).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from trainer_jobs import api
from trainer_jobs.observe import NO_JOBSET, WAKE_ANNOTATION, jobset_signature
from training_jobs.idle import IDLE_LABEL, PARKED_BEHIND, parked_behind
from training_jobs.plan import FINISHED_LABEL
from training_kube.client import ApiError, resource_path

from training_wake.watcher import DEFAULT_RESYNC, KubeClient, bring_back_if_edited, watch_events

log = logging.getLogger("training_wake.jobsets")
TrainJobKey = tuple[str, str]  # (namespace, name)
OWNER = (api.API_VERSION, api.TRAINJOB)
# How long to wait before listing a kind whose CRD is not installed again.
NOT_INSTALLED_RETRY = 60.0


def trainjob_of(jobset: dict[str, Any]) -> TrainJobKey | None:
    """The TrainJob that controls ``jobset``, if one does."""
    meta = jobset.get("metadata") or {}
    for ref in meta.get("ownerReferences") or []:
        if ref.get("controller") and (ref.get("apiVersion"), ref.get("kind")) == OWNER:
            return meta.get("namespace", ""), str(ref.get("name", ""))
    return None


class JobSetIndex:
    """The signature of every watched JobSet, by TrainJob. Pure; the watcher feeds it."""

    def __init__(self) -> None:
        self.signatures: dict[TrainJobKey, str] = {}
        # TrainJobs whose JobSet has no status yet: as their pass created it.
        self.untouched: set[TrainJobKey] = set()

    def replace(self, jobsets: list[dict[str, Any]]) -> None:
        self.signatures, self.untouched = {}, set()
        for jobset in jobsets:
            self.observe("ADDED", jobset)

    def observe(self, event_type: str, jobset: dict[str, Any]) -> TrainJobKey | None:
        """Record a watch event; the TrainJob to wake, or None."""
        job = trainjob_of(jobset)
        if job is None:
            return None
        before = self.signatures.get(job)
        self.untouched.discard(job)
        if event_type == "DELETED":
            self.signatures.pop(job, None)
            return job
        sig = jobset_signature(jobset)
        self.signatures[job] = sig
        if not jobset.get("status"):
            self.untouched.add(job)
        if event_type == "ADDED" or before is None or before == sig:
            return None
        return job

    def signature_of(self, job: TrainJobKey) -> str:
        return self.signatures.get(job, NO_JOBSET)


def stale_trainjobs(
    index: JobSetIndex, trainjobs: list[dict[str, Any]], after_error: bool
) -> dict[TrainJobKey, str]:
    """After a full list: the TrainJobs not finished whose annotation is not their JobSet's
    signature, with it. A TrainJob never woken whose JobSet has no status yet missed nothing;
    one without a JobSet is woken only after a watch error, and only once."""
    stale = {}
    for trainjob in trainjobs:
        meta = trainjob.get("metadata") or {}
        if FINISHED_LABEL in (meta.get("labels") or {}):
            continue
        job = (meta.get("namespace", ""), meta.get("name", ""))
        annotation = (meta.get("annotations") or {}).get(WAKE_ANNOTATION)
        sig = index.signature_of(job)
        if annotation == sig:
            continue
        if annotation is None and (job in index.untouched or (sig == NO_JOBSET and not after_error)):
            continue
        stale[job] = sig
    return stale


class JobSetWatcher:
    """Lists and watches JobSets in each namespace ("" = all) and wakes their TrainJobs."""

    def __init__(
        self,
        client: KubeClient,
        namespaces: list[str] | None = None,
        debounce: float = 1.0,
        resync: float = DEFAULT_RESYNC,
    ):
        self.client = client
        self.namespaces = namespaces or [""]
        self.debounce = debounce
        self.resync = resync
        self.indexes: dict[str, JobSetIndex] = {}
        self.lock = threading.Lock()
        self.dirty: dict[TrainJobKey, str] = {}
        # The idle label of each TrainJob labelled idle since the last flush.
        self.parked: dict[TrainJobKey, str] = {}
        # The label and the signature of each TrainJob woken because its pass read another
        # JobSet: each pair once, so a pass that keeps reading another JobSet is no loop.
        self.unparked: dict[TrainJobKey, tuple[str, str]] = {}
        self.stop = threading.Event()

    def _list(self, api_version: str, kind: str, namespace: str) -> tuple[list[dict], str]:
        path = resource_path(api_version, kind, namespace or None)
        result = self.client.request("GET", path, owner=False)
        return result.get("items") or [], result["metadata"]["resourceVersion"]

    def _catch_up(self, namespace: str, jobsets: list[dict], after_error: bool) -> None:
        index = JobSetIndex()
        index.replace(jobsets)
        try:
            trainjobs, _ = self._list(api.API_VERSION, api.TRAINJOB, namespace)
        except ApiError as err:
            if err.status != 404:
                raise
            trainjobs = []
        stale = stale_trainjobs(index, trainjobs, after_error)
        with self.lock:
            self.indexes[namespace] = index
            for job, sig in stale.items():
                self.dirty.setdefault(job, sig)
        if stale:
            log.info("waking %d TrainJob(s) whose JobSet changed unwatched", len(stale))
        # Labelled idle while nobody watched the labels (a companion restart): check them too.
        for trainjob in trainjobs:
            if IDLE_LABEL in ((trainjob.get("metadata") or {}).get("labels") or {}):
                self._on_idle(trainjob)

    def watch(self, namespace: str) -> None:
        """List and watch the JobSets of one namespace until :attr:`stop` is set, listing again
        every :attr:`resync` seconds and after any error."""
        after_error = False
        path = resource_path(api.JOBSET_API_VERSION, api.JOBSET, namespace or None)
        while not self.stop.is_set():
            try:
                jobsets, rv = self._list(api.JOBSET_API_VERSION, api.JOBSET, namespace)
                self._catch_up(namespace, jobsets, after_error)
                after_error = False
                until = time.monotonic() + self.resync
                while not self.stop.is_set() and time.monotonic() < until:
                    rv = self._follow(namespace, path, rv, min(300.0, until - time.monotonic()))
            except ApiError as err:
                if err.status == 404:  # JobSet's CRD is not installed (yet)
                    self.stop.wait(NOT_INSTALLED_RETRY)
                    continue
                log.info("JobSet watch restarts: %s", err)
                after_error = True
                self.stop.wait(1)
            except (OSError, ValueError) as err:
                log.info("JobSet watch restarts: %s", err)
                after_error = True
                self.stop.wait(1)
            except Exception:
                log.exception("JobSet watch failed; listing again")
                after_error = True
                self.stop.wait(1)

    def _follow(self, namespace: str, path: str, rv: str, timeout: float) -> str:
        """One watch request from ``rv``; returns the last resourceVersion seen."""
        for event in watch_events(self.client, self.stop, path, "", rv, timeout):
            obj = event.get("object") or {}
            rv = (obj.get("metadata") or {}).get("resourceVersion", rv)
            if event.get("type") == "BOOKMARK":
                continue
            with self.lock:
                index = self.indexes.setdefault(namespace, JobSetIndex())
                job = index.observe(event["type"], obj)
                if job is not None:
                    self.dirty[job] = index.signature_of(job)
        return rv

    def watch_idle(self, namespace: str) -> None:
        """List and watch the TrainJobs labelled idle in one namespace ("" = all) until
        :attr:`stop` is set (:meth:`_on_idle`): the runtime's watch leaves them out."""
        path = resource_path(api.API_VERSION, api.TRAINJOB, namespace or None)
        while not self.stop.is_set():
            try:
                listed = self.client.request("GET", path, owner=False, query={"labelSelector": IDLE_LABEL})
                for trainjob in listed.get("items") or []:
                    self._on_idle(trainjob)
                rv = listed["metadata"]["resourceVersion"]
                while not self.stop.is_set():
                    for event in watch_events(self.client, self.stop, path, IDLE_LABEL, rv, 300):
                        obj = event.get("object") or {}
                        rv = (obj.get("metadata") or {}).get("resourceVersion", rv)
                        if event.get("type") in ("ADDED", "MODIFIED"):
                            self._on_idle(obj)
            except ApiError as err:
                if err.status == 404:  # the TrainJob CRD is not installed (yet)
                    self.stop.wait(NOT_INSTALLED_RETRY)
                    continue
                log.info("idle TrainJob watch restarts: %s", err)
                self.stop.wait(1)
            except (OSError, ValueError) as err:
                log.info("idle TrainJob watch restarts: %s", err)
                self.stop.wait(1)
            except Exception:
                log.exception("idle TrainJob watch failed; listing again")
                self.stop.wait(1)

    def _on_idle(self, trainjob: dict[str, Any]) -> None:
        """A TrainJob labelled idle: brought back at once if edited since the label; else its
        label is compared with the JobSet this watcher knows at the next flush."""
        if bring_back_if_edited(self.client, api.API_VERSION, api.TRAINJOB, trainjob):
            return
        meta = trainjob.get("metadata") or {}
        label = (meta.get("labels") or {}).get(IDLE_LABEL)
        if label:
            with self.lock:
                self.parked[(meta.get("namespace", ""), meta.get("name", ""))] = label

    def _parked_behind(self) -> dict[TrainJobKey, tuple[str, str]]:
        """Under the lock: of the TrainJobs labelled idle since the last flush, those whose pass
        read another JobSet than this watcher knows, with their label and the signature it knows;
        each pair once. One whose JobSet it does not know is left to the next list."""
        parked, self.parked = self.parked, {}
        behind = {}
        for job, label in parked.items():
            index = next((i for i in self.indexes.values() if job in i.signatures), None)
            if index is None:
                continue
            sig = index.signature_of(job)
            if parked_behind(label, sig) and self.unparked.get(job) != (label, sig):
                self.unparked[job] = (label, sig)
                behind[job] = (label, sig)
        return behind

    def _wake(self, job: TrainJobKey, sig: str, parked: str | None = None) -> bool:
        """Write the signature into the TrainJob's annotation and remove its idle label; with
        ``parked`` (the label of a pass that read another JobSet), say so in an annotation of its
        own, which makes the write a change even when the signature is already there. False if
        it must be tried again."""
        namespace, name = job
        annotations = {WAKE_ANNOTATION: sig}
        if parked is not None:
            when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            annotations[PARKED_BEHIND] = f"{parked} at {when}"
            log.info(
                "TrainJob %s/%s was left idle by a pass that read another JobSet: waking it", namespace, name
            )
        # The same write brings an idle TrainJob back to the runtime's watch.
        body = {"metadata": {"annotations": annotations, "labels": {IDLE_LABEL: None}}}
        try:
            self.client.request(
                "PATCH",
                resource_path(api.API_VERSION, api.TRAINJOB, namespace, name),
                body,
                content_type="application/merge-patch+json",
                owner=False,
            )
        except (ApiError, OSError) as err:
            if getattr(err, "status", 0) == 404:
                return True
            log.warning("could not wake TrainJob %s/%s (will retry): %s", namespace, name, err)
            return False
        return True

    def flush(self) -> int:
        """Write every pending wake; returns writes. A write that failed waits for the next flush
        (unless a newer signature replaced it meanwhile)."""
        with self.lock:
            todo, self.dirty = self.dirty, {}
            behind = self._parked_behind()
        writes = 0
        for job in set(todo) | set(behind):
            label, sig = behind.get(job, (None, todo.get(job, "")))
            if self._wake(job, todo.get(job, sig), label):
                writes += 1
                continue
            with self.lock:
                if job in todo:
                    self.dirty.setdefault(job, todo[job])
                if label is not None:
                    self.unparked.pop(job, None)
                    self.parked.setdefault(job, label)
        return writes

    def run(self) -> None:
        for ns in self.namespaces:
            name = f"jobsets-{ns or 'all'}"
            threading.Thread(target=self.watch, args=(ns,), daemon=True, name=name).start()
            idle = f"idle-trainjobs-{ns or 'all'}"
            threading.Thread(target=self.watch_idle, args=(ns,), daemon=True, name=idle).start()
        while not self.stop.wait(self.debounce):
            self.flush()
