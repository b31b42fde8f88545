"""The wake watcher: a watch on the operator's pods that writes a job's pod signature into the
job's annotation when it changes (see :mod:`training_wake.signature` for why).

One list, then a watch from its resourceVersion, re-listed when the watch expires. Changes are
collected for ``debounce`` seconds and written once per job (a merge patch of one annotation),
so pods that change together cost one write. Writes that fail are logged and dropped: the
reconcile's own poll (``JOB_POLL_SECONDS``) is the safety net.
"""

from __future__ import annotations

import json
import logging
import threading
import urllib.error
import urllib.parse
import urllib.request

from training_kube.client import ApiError, Client, resource_path

from training_wake.signature import ANNOTATION, POD_SELECTORS, JobKey, PodIndex

log = logging.getLogger("training_wake")


class Watcher:
    def __init__(self, client: Client, debounce: float = 1.0, namespaces: list[str] | None = None):
        self.client = client
        self.debounce = debounce
        self.namespaces = namespaces or [""]
        self.index = PodIndex()
        self.lock = threading.Lock()
        self.dirty: set[JobKey] = set()
        self.written: dict[JobKey, str] = {}
        self.stop = threading.Event()

    # --- reading -------------------------------------------------------------------------------
    def _pods_path(self, namespace: str) -> str:
        return f"/api/v1/namespaces/{namespace}/pods" if namespace else "/api/v1/pods"

    def _list(self, namespace: str, selector: str) -> tuple[list[dict], str]:
        result = self.client.request(
            "GET", self._pods_path(namespace), owner=False, query={"labelSelector": selector}
        )
        return result.get("items") or [], result["metadata"]["resourceVersion"]

    def _stream(self, namespace: str, selector: str, resource_version: str):
        query = {
            "labelSelector": selector,
            "watch": "true",
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": "300",
        }
        url = self.client.server + self._pods_path(namespace) + "?" + urllib.parse.urlencode(query)
        req = urllib.request.Request(url, headers={"Accept": "application/json", **self.client.headers})
        with urllib.request.urlopen(req, timeout=330, context=self.client.context) as resp:
            for line in resp:
                if self.stop.is_set():
                    return
                if line.strip():
                    yield json.loads(line)

    def watch(self, namespace: str, selector: str) -> None:
        """List and watch the pods matching ``selector`` in one namespace ("" = all) until
        :attr:`stop` is set."""
        while not self.stop.is_set():
            try:
                pods, rv = self._list(namespace, selector)
                with self.lock:
                    for pod in pods:
                        self.index.observe("ADDED", pod)
                while not self.stop.is_set():
                    for event in self._stream(namespace, selector, rv):
                        obj = event.get("object") or {}
                        if event.get("type") == "ERROR":
                            raise ApiError(
                                int(obj.get("code") or 500), obj.get("message", ""), "WATCH", "pods"
                            )
                        rv = (obj.get("metadata") or {}).get("resourceVersion", rv)
                        if event.get("type") == "BOOKMARK":
                            continue
                        with self.lock:
                            job = self.index.observe(event["type"], obj)
                            if job:
                                self.dirty.add(job)
            except (ApiError, OSError, ValueError, urllib.error.URLError) as err:
                # 410 Gone (expired resourceVersion) and dropped connections: list again.
                log.info("pod watch restarts: %s", err)
                self.stop.wait(1)

    # --- writing -------------------------------------------------------------------------------
    def flush(self) -> int:
        """Write the signature of every job that changed since the last flush; returns writes."""
        with self.lock:
            jobs, self.dirty = self.dirty, set()
            todo = [(job, self.index.signature_of(job)) for job in jobs]
        writes = 0
        for job, sig in todo:
            if self.written.get(job) == sig:
                continue
            api_version, kind, namespace, name = job
            path = resource_path(api_version, kind, namespace, name)
            try:
                self.client.request(
                    "PATCH",
                    path,
                    {"metadata": {"annotations": {ANNOTATION: sig}}},
                    content_type="application/merge-patch+json",
                    owner=False,
                )
                self.written[job] = sig
                writes += 1
            except (ApiError, OSError) as err:
                if getattr(err, "status", 0) != 404:
                    log.warning("could not wake %s %s/%s: %s", kind, namespace, name, err)
        # Forget jobs that have no pods any more.
        with self.lock:
            for job in [j for j in self.written if j not in self.index.pods]:
                del self.written[job]
        return writes

    def run(self) -> None:
        for ns in self.namespaces:
            for selector in POD_SELECTORS:
                name = f"watch-{ns or 'all'}-{selector}"
                threading.Thread(target=self.watch, args=(ns, selector), daemon=True, name=name).start()
        while not self.stop.wait(self.debounce):
            self.flush()
