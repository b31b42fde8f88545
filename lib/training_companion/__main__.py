"""The companion of ansible-operator: a sidecar container in the operator pod, a background
process under ``make run``. It serves the job counters (:mod:`training_metrics`) and runs the
wake watchers (:mod:`training_wake`: the v1 jobs' pods, the TrainJobs' JobSets); it decides
nothing about jobs.

    python -m training_companion [--bind HOST:PORT] [--exit-with-pid PID] [--no-wake]

``--exit-with-pid`` stops it once that process (the operator) is gone, so ``make run`` leaves
nothing behind whichever way the operator ends. ``WATCH_NAMESPACE`` (comma-separated, empty =
all) limits the watch as it limits the operator. The watcher talks to the API server through the
``kubernetes`` client (:mod:`training_companion.kube`): the pod's ServiceAccount in the sidecar,
the kubeconfig (exec and auth-provider users too) under ``make run``.
"""

from __future__ import annotations

import argparse
import logging
import os
import threading
import time

from training_metrics.server import DEFAULT_BIND, make_server
from training_wake.jobsets import JobSetWatcher
from training_wake.watcher import Watcher


def _exit_with(pid: int, stop) -> None:
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            stop()
            return
        except PermissionError:
            pass
        time.sleep(1)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m training_companion")
    parser.add_argument("--bind", default=os.environ.get("JOB_METRICS_BIND", DEFAULT_BIND))
    parser.add_argument("--exit-with-pid", type=int, default=0)
    parser.add_argument("--no-wake", action="store_true", help="serve the counters only")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    server = make_server(args.bind)
    watchers: list[Watcher | JobSetWatcher] = []
    if not args.no_wake:
        namespaces = [n.strip() for n in os.environ.get("WATCH_NAMESPACE", "").split(",") if n.strip()]
        from training_companion.kube import KubeClient

        client = KubeClient()
        watchers = [Watcher(client, namespaces=namespaces), JobSetWatcher(client, namespaces=namespaces)]
        for watcher in watchers:
            name = "wake" if isinstance(watcher, Watcher) else "wake-jobsets"
            threading.Thread(target=watcher.run, daemon=True, name=name).start()

    def stop() -> None:
        for watcher in watchers:
            watcher.stop.set()
        server.shutdown()

    if args.exit_with_pid:
        threading.Thread(target=_exit_with, args=(args.exit_with_pid, stop), daemon=True).start()
    logging.getLogger("training_companion").info(
        "job metrics on http://%s/metrics; wake watcher %s", args.bind, "off" if args.no_wake else "on"
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


main()
