"""The wake watcher: a watch on the operator's pods that writes a job's pod signature into the
job's annotation when it changes (see :mod:`training_wake.signature` for why).

One list, then a watch from its resourceVersion. Changes are collected for ``debounce`` seconds
and written once per job (a merge patch of one annotation), so pods that change together cost
one write; a write that fails (the API server is down) is tried again on the next flush.

It is also the safety net for what a watch can miss, so the operator never has to poll: after
every list (at start, after a watch error or an outage, and every ``resync`` seconds) it reads
the jobs' annotations and wakes each job whose pods changed while nobody was watching. A
restarted companion therefore catches up by itself, and jobs move again within seconds of an
API server coming back. The same list wakes each job whose status holds a condition type that is
not Kubeflow's (the Ansible runtime's ``Failure`` after a run that crashed, finished jobs too),
so that its next pass drops it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
from collections.abc import Generator
from typing import Any, Protocol

from training_jobs.idle import (
    EDITED_WHILE_IDLE,
    FOREIGN_CONDITIONS,
    IDLE_LABEL,
    PARKED_BEHIND,
    edited_while_idle,
    parked_behind,
)
from training_jobs.idle import job_part as idle_job_part
from training_jobs.plan import FINISHED_LABEL
from training_kube.client import ApiError, resource_path

from training_wake.signature import (
    ANNOTATION,
    KINDS_BY_SELECTOR,
    POD_SELECTORS,
    JobKey,
    JobSeen,
    PodIndex,
    foreign_condition_jobs,
    job_seen,
    podless_jobs,
    short_of_pods,
    stale_jobs,
)

log = logging.getLogger("training_wake")
# Seconds between full re-lists; each costs one pod list and one job list per kind.
DEFAULT_RESYNC = float(os.environ.get("WAKE_RESYNC_SECONDS") or 120)
# The longest wait between two tries of a kind whose jobs could not be listed.
KIND_RETRY_MAX = 60.0

Kinds = frozenset[tuple[str, str]]  # (apiVersion, kind)


class KindRetry:
    """The kinds whose jobs a catch-up could not list, and when to try them again: 1 s after
    the first failure, then twice as long after each (up to :data:`KIND_RETRY_MAX`)."""

    def __init__(self, kinds: Kinds, after_error: bool, clock=time.monotonic):
        self.kinds = kinds
        self.after_error = after_error  # what the catch-up that failed was after
        self.clock = clock
        self.wait = 1.0
        self.at = clock() + self.wait

    def due(self) -> bool:
        return bool(self.kinds) and self.clock() >= self.at

    def failed(self, kinds: Kinds) -> None:
        """The kinds that failed again, out of those tried."""
        self.kinds = kinds
        self.wait = min(self.wait * 2, KIND_RETRY_MAX)
        self.at = self.clock() + self.wait


class KubeClient(Protocol):
    """What the watcher needs of a client (the companion's :mod:`training_companion.kube`):
    ``request`` raises :class:`~training_kube.client.ApiError` for an HTTP error and
    :class:`OSError` when the API server cannot be reached."""

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        content_type: str = ...,
        owner: bool = ...,
        query: dict[str, str] | None = None,
    ) -> Any: ...

    def stream(self, path: str, query: dict[str, str], timeout: float) -> Generator[bytes, None, None]:
        """The lines of a watch whose ``timeoutSeconds`` is ``timeout``."""
        ...


def watch_events(
    client: KubeClient, stop: threading.Event, path: str, selector: str, resource_version: str, timeout: float
) -> Generator[dict, None, None]:
    """The events of a watch on ``path`` from ``resource_version`` until ``stop`` is set, ERROR
    events raised as :class:`ApiError`; ``selector`` "" watches every object."""
    query = {
        "watch": "true",
        "resourceVersion": resource_version,
        "allowWatchBookmarks": "true",
        "timeoutSeconds": str(max(1, int(timeout))),
    }
    if selector:
        query["labelSelector"] = selector
    with contextlib.closing(client.stream(path, query, timeout)) as lines:
        for line in lines:
            if stop.is_set():
                return
            if not line.strip():
                continue
            event = json.loads(line)
            if event.get("type") == "ERROR":
                obj = event.get("object") or {}
                raise ApiError(int(obj.get("code") or 500), obj.get("message", ""), "WATCH", path)
            yield event


def bring_back_if_edited(client: KubeClient, api_version: str, kind: str, job: dict) -> bool:
    """Bring a job labelled idle back to the runtime's watch if it was edited since the label was
    written (:func:`~training_jobs.idle.edited_while_idle`); whether it was."""
    if not edited_while_idle(job):
        return False
    meta = job.get("metadata") or {}
    namespace, name = meta.get("namespace", ""), meta.get("name", "")
    log.info("%s %s/%s was edited while idle: watched again", kind, namespace, name)
    # The runtime's selector filters its events: the label's removal alone would pass none of
    # them (it reconciles on a spec or an annotation change), so an annotation says why.
    when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    try:
        client.request(
            "PATCH",
            resource_path(api_version, kind, namespace, name),
            {
                "metadata": {
                    "labels": {IDLE_LABEL: None},
                    "annotations": {EDITED_WHILE_IDLE: f"{idle_job_part(job)} at {when}"},
                }
            },
            content_type="application/merge-patch+json",
            owner=False,
        )
    except ApiError as err:
        if err.status != 404:
            raise
    return True


class Watcher:
    def __init__(
        self,
        client: KubeClient,
        debounce: float = 1.0,
        namespaces: list[str] | None = None,
        resync: float = DEFAULT_RESYNC,
    ):
        self.client = client
        self.debounce = debounce
        self.resync = resync
        self.namespaces = namespaces or [""]
        # One index per (namespace, selector): each watch replaces only what it listed.
        self.indexes: dict[tuple[str, str], PodIndex] = {}
        self.lock = threading.Lock()
        self.dirty: set[JobKey] = set()
        self.written: dict[JobKey, str] = {}
        # The idle label of each job labelled idle since the last flush (training_jobs.idle).
        self.parked: dict[JobKey, str] = {}
        # The label and the pods' signature of each job woken because its pass planned with other
        # pods: a pass that keeps seeing other pods than the watcher (pods it does not index) is
        # woken once, not in a loop.
        self.unparked: dict[JobKey, tuple[str, str]] = {}
        self.stop = threading.Event()

    # --- reading -------------------------------------------------------------------------------
    def _pods_path(self, namespace: str) -> str:
        return f"/api/v1/namespaces/{namespace}/pods" if namespace else "/api/v1/pods"

    def _list(self, namespace: str, selector: str) -> tuple[list[dict], str]:
        result = self.client.request(
            "GET", self._pods_path(namespace), owner=False, query={"labelSelector": selector}
        )
        return result.get("items") or [], result["metadata"]["resourceVersion"]

    def _stream(self, namespace: str, selector: str, resource_version: str, timeout: float):
        return self._watch(self._pods_path(namespace), selector, resource_version, timeout)

    def _watch(self, path: str, selector: str, resource_version: str, timeout: float):
        return watch_events(self.client, self.stop, path, selector, resource_version, timeout)

    def _jobs(self, namespace: str, kinds: Kinds) -> tuple[dict[JobKey, JobSeen], Kinds]:
        """Every job of ``kinds`` in the namespace ("" = all), as :func:`job_seen` reads it, and
        the kinds whose list failed. One kind the API server cannot serve yet (a custom resource's
        storage is still initialising for seconds after a restart: 429 or 503) or that the
        operator may not list holds up no other kind."""
        found: dict[JobKey, JobSeen] = {}
        failed = set()
        for api_version, kind in sorted(kinds):
            path = resource_path(api_version, kind, namespace or None)
            try:
                items = self.client.request("GET", path, owner=False).get("items") or []
            except (ApiError, OSError) as err:
                if getattr(err, "status", 0) == 404:  # the kind's CRD is not installed
                    continue
                log.info("could not list %s (will try again): %s", kind, err)
                failed.add((api_version, kind))
                continue
            for job in items:
                meta = job.get("metadata") or {}
                key = (api_version, kind, meta.get("namespace", ""), meta.get("name", ""))
                found[key] = job_seen(api_version, kind, job)
        return found, frozenset(failed)

    def _catch_up(self, namespace: str, selector: str, pods: list[dict], after_error: bool = False) -> Kinds:
        """After a full list: forget what went meanwhile and wake the jobs that missed a change
        (:meth:`_wake_missed`). Returns the kinds whose jobs could not be listed."""
        kinds = KINDS_BY_SELECTOR.get(selector, frozenset())
        with self.lock:
            self.indexes.setdefault((namespace, selector), PodIndex()).replace(pods, kinds)
        return self._wake_missed(namespace, selector, kinds, after_error)

    def _wake_missed(self, namespace: str, selector: str, kinds: Kinds, after_error: bool) -> Kinds:
        """Wake the jobs of ``kinds`` whose annotation is behind their pods as the index has them
        and, after a watch error, the jobs the runtime's error backoff may hold
        (:func:`podless_jobs`). Returns the kinds whose jobs could not be listed, to try again."""
        jobs, failed = self._jobs(namespace, kinds)
        listed = kinds - failed
        annotations = {job: seen.annotation for job, seen in jobs.items()}
        with self.lock:
            index = self.indexes.setdefault((namespace, selector), PodIndex())
            stale, current = stale_jobs(index, annotations, listed)
            stale |= short_of_pods(index, jobs, listed)
            podless = podless_jobs(index, jobs, listed) if after_error else set()
            # A job the watch saw change is already waiting for the next flush: not missed.
            missed = stale - self.dirty
            self.written.update(current)
            self.dirty |= stale | podless
            # Labelled idle while nobody watched the labels (a companion restart): check them too.
            self.parked.update(
                {job: seen.idle for job, seen in jobs.items() if seen.idle and job[:2] in listed}
            )
            # What the annotation said and what the pods are: a wake here is a change the watch
            # missed, or one it saw and judged not worth a wake (a pod added or gone).
            shown = [
                f"{job[1]} {job[2]}/{job[3]} {annotations[job]!r} -> {index.signature_of(job)!r}"
                for job in sorted(missed)[:5]
            ]
        if missed:
            log.info("waking %d job(s) whose pods changed unwatched: %s", len(missed), "; ".join(shown))
        if podless:
            log.info("waking %d job(s) without pods after the API server was unreachable", len(podless))
        for job, types in sorted(foreign_condition_jobs(jobs, listed).items()):
            self._wake_foreign(job, types)
        return failed

    def _wake_foreign(self, job: JobKey, types: tuple[str, ...]) -> None:
        """Bring back a job whose status holds a condition type that is not Kubeflow's (the
        runtime's ``Failure`` after a run that crashed): its next pass drops it. The job may be
        labelled finished or idle, which the runtime's selector leaves out: both labels go, with
        an annotation change, since the runtime reconciles on that and not on a label's change.
        A write that fails is tried again at the next catch-up."""
        api_version, kind, namespace, name = job
        log.info(
            "%s %s/%s has condition(s) %s that are not Kubeflow's: waking it", kind, namespace, name, types
        )
        when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        patch = {
            "metadata": {
                "labels": {FINISHED_LABEL: None, IDLE_LABEL: None},
                "annotations": {FOREIGN_CONDITIONS: f"{','.join(types)} at {when}"},
            }
        }
        path = resource_path(api_version, kind, namespace, name)
        try:
            self.client.request(
                "PATCH", path, patch, content_type="application/merge-patch+json", owner=False
            )
        except (ApiError, OSError) as err:
            if getattr(err, "status", 0) != 404:
                log.warning("could not wake %s %s/%s (will retry): %s", kind, namespace, name, err)

    def watch(self, namespace: str, selector: str) -> None:
        """List and watch the pods matching ``selector`` in one namespace ("" = all) until
        :attr:`stop` is set, listing again every :attr:`resync` seconds and after any error.
        Kinds whose jobs could not be listed are tried again while the watch goes on, after
        1 s, then twice as long each time (up to :data:`KIND_RETRY_MAX`)."""
        resumed = True  # the first list, or the first after an error: worth a log line
        after_error = False  # the API server may have refused the runtime's passes too
        while not self.stop.is_set():
            try:
                pods, rv = self._list(namespace, selector)
                (log.info if resumed else log.debug)(
                    "listed %d pod(s) with %s in %s", len(pods), selector, namespace or "all namespaces"
                )
                resumed = False
                retry = KindRetry(self._catch_up(namespace, selector, pods, after_error), after_error)
                after_error = False
                index = self.indexes[(namespace, selector)]
                until = time.monotonic() + self.resync
                while not self.stop.is_set() and time.monotonic() < until:
                    if retry.due():
                        retry.failed(self._wake_missed(namespace, selector, retry.kinds, retry.after_error))
                    horizon = min(until, retry.at) if retry.kinds else until
                    for event in self._stream(namespace, selector, rv, min(300, horizon - time.monotonic())):
                        obj = event.get("object") or {}
                        rv = (obj.get("metadata") or {}).get("resourceVersion", rv)
                        if event.get("type") == "BOOKMARK":
                            continue
                        with self.lock:
                            job = index.observe(event["type"], obj)
                            if job:
                                self.dirty.add(job)
            except (ApiError, OSError, ValueError) as err:
                # 410 Gone (expired resourceVersion), dropped connections, an API server that is
                # down: list again, which catches up on whatever happened meanwhile.
                log.info("pod watch restarts: %s", err)
                resumed = after_error = True
                self.stop.wait(1)
            except Exception:
                # Never let the safety net die quietly: log and start over from a list.
                log.exception("pod watch failed; listing again")
                resumed = after_error = True
                self.stop.wait(1)

    def watch_idle(self, namespace: str, api_version: str, kind: str) -> None:
        """Bring back the idle jobs of one kind that were edited or whose pass planned with older
        pods than the watcher knows: list and watch the jobs labelled IDLE_LABEL (see
        :meth:`_on_idle_job`). The runtime's watch leaves idle jobs out, so it would not see a
        ``suspend`` or a new replica count."""
        path = resource_path(api_version, kind, namespace or None)
        while not self.stop.is_set():
            try:
                listed = self.client.request("GET", path, owner=False, query={"labelSelector": IDLE_LABEL})
                for job in listed.get("items") or []:
                    self._on_idle_job(api_version, kind, job)
                rv = listed["metadata"]["resourceVersion"]
                while not self.stop.is_set():
                    for event in self._watch(path, IDLE_LABEL, rv, 300):
                        obj = event.get("object") or {}
                        rv = (obj.get("metadata") or {}).get("resourceVersion", rv)
                        if event.get("type") in ("ADDED", "MODIFIED"):
                            self._on_idle_job(api_version, kind, obj)
            except ApiError as err:
                if err.status == 404:  # the kind's CRD is not installed (yet)
                    self.stop.wait(60)
                    continue
                log.info("idle %s watch restarts: %s", kind, err)
                self.stop.wait(1)
            except (OSError, ValueError) as err:
                log.info("idle %s watch restarts: %s", kind, err)
                self.stop.wait(1)
            except Exception:
                log.exception("idle %s watch failed; listing again", kind)
                self.stop.wait(1)

    def _on_idle_job(self, api_version: str, kind: str, job: dict) -> None:
        """A job labelled idle, as listed or watched: brought back at once if it was edited since
        (:func:`~training_jobs.idle.edited_while_idle`: its spec or annotations are no longer what
        they were when the label was written); otherwise its label's pods are compared with the
        pods this watcher knows at the next flush (:meth:`_parked_behind`)."""
        if bring_back_if_edited(self.client, api_version, kind, job):
            return
        meta = job.get("metadata") or {}
        label = (meta.get("labels") or {}).get(IDLE_LABEL)
        if label:
            with self.lock:
                self.parked[(api_version, kind, meta.get("namespace", ""), meta.get("name", ""))] = label

    def signature_of(self, job: JobKey) -> str:
        for index in self.indexes.values():
            if job in index.pods:
                return index.signature_of(job)
        return ""

    def _known(self, job: JobKey) -> bool:
        return any(job in index.pods for index in self.indexes.values())

    # --- writing -------------------------------------------------------------------------------
    def _parked_behind(self) -> dict[JobKey, str]:
        """Under the lock: of the jobs labelled idle since the last flush, those whose pass
        planned with other pods than this watcher knows now (``training_jobs.idle.parked_behind``),
        with their label; each label and signature once. A job whose pods it does not know (not
        listed yet) is checked after the list instead (:meth:`_wake_missed`)."""
        parked, self.parked = self.parked, {}
        behind = {}
        for job, label in parked.items():
            if not self._known(job):
                continue
            sig = self.signature_of(job)
            if parked_behind(label, sig) and self.unparked.get(job) != (label, sig):
                self.unparked[job] = (label, sig)
                behind[job] = label
        return behind

    def _wake(self, job: JobKey, sig: str, parked: str | None) -> bool:
        """Write the job's pod signature and remove its idle label; with ``parked`` (the label of
        a pass that planned with other pods), say so in an annotation of its own, which makes the
        write a change even when the signature is already there. False if it must be tried again."""
        api_version, kind, namespace, name = job
        annotations = {ANNOTATION: sig}
        if parked is not None:
            when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            annotations[PARKED_BEHIND] = f"{parked} at {when}"
            log.info(
                "%s %s/%s was left idle by a pass that saw other pods (%s): waking it",
                kind,
                namespace,
                name,
                sig,
            )
        body = {"metadata": {"annotations": annotations, "labels": {IDLE_LABEL: None}}}
        try:
            # The same write brings an idle job back to the runtime's watch.
            self.client.request(
                "PATCH",
                resource_path(api_version, kind, namespace, name),
                body,
                content_type="application/merge-patch+json",
                owner=False,
            )
        except (ApiError, OSError) as err:
            if getattr(err, "status", 0) == 404:
                return True
            log.warning("could not wake %s %s/%s (will retry): %s", kind, namespace, name, err)
            return False
        self.written[job] = sig
        return True

    def flush(self) -> int:
        """Write the signature of every job that changed since the last flush, and of every job
        left idle by a pass that saw other pods; returns writes. A write the API server did not
        take is kept for the next flush."""
        with self.lock:
            jobs, self.dirty = self.dirty, set()
            behind = self._parked_behind()
            todo = [(job, self.signature_of(job), behind.get(job)) for job in jobs | set(behind)]
        writes = 0
        failed = set()
        for job, sig, parked in todo:
            if parked is None and self.written.get(job) == sig:
                continue
            if self._wake(job, sig, parked):
                writes += 1
            elif parked is None:
                failed.add(job)
            else:
                with self.lock:
                    self.unparked.pop(job, None)
                    self.parked.setdefault(job, parked)
        with self.lock:
            self.dirty |= failed
            # Forget jobs that have no pods any more.
            for job in [j for j in self.written if not self._known(j)]:
                del self.written[job]
            for job in [j for j in self.unparked if not self._known(j)]:
                del self.unparked[job]
        return writes

    def run(self) -> None:
        for ns in self.namespaces:
            for selector in POD_SELECTORS:
                name = f"watch-{ns or 'all'}-{selector}"
                threading.Thread(target=self.watch, args=(ns, selector), daemon=True, name=name).start()
            for api_version, kind in sorted(set().union(*KINDS_BY_SELECTOR.values())):
                name = f"idle-{ns or 'all'}-{kind}"
                args = (ns, api_version, kind)
                threading.Thread(target=self.watch_idle, args=args, daemon=True, name=name).start()
        while not self.stop.wait(self.debounce):
            self.flush()
