"""A child of a warm template: it becomes the process the client would have exec'ed, then runs
the real program's script in-process (its imports are already done).

What an exec would have given it and a fork does not, it sets here: a session of its own (so a
dying client's server can kill the whole group), the client's stdin/stdout/stderr, environment,
working directory, umask and signal state; fresh per-run state that the template computed at
import time (Ansible's task-id seed, its controller temp dir, its module write locks, the
fact-cache path that ansible-runner sets per run); and an exit that flushes, runs atexit handlers and ends the
process without a second interpreter shutdown.
"""

from __future__ import annotations

import atexit
import importlib
import os
import runpy
import signal
import sys
import tempfile
import threading
import traceback

# Signals the template may have handled for itself; the child starts from Python's defaults.
_RESET = (signal.SIGHUP, signal.SIGQUIT, signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2, signal.SIGCHLD)


def become(request: dict, fds: list[int]) -> None:
    """Take over the client's process state (everything an exec would have inherited)."""
    os.setsid()
    for target, fd in enumerate(fds[:3]):
        os.dup2(fd, target)
    for fd in fds[3:] if len(fds) > 3 else ():
        os.close(fd)
    for fd in fds[:3]:
        if fd > 2:
            os.close(fd)
    os.umask(int(request["umask"]))
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    _signals(request)
    sys.argv = [request["real"], *request["argv"]]
    sys.stdin.reconfigure(line_buffering=os.isatty(0))  # type: ignore[union-attr]
    sys.stdout.reconfigure(line_buffering=os.isatty(1))  # type: ignore[union-attr]


def _signals(request: dict) -> None:
    for signum in _RESET:
        signal.signal(signum, signal.SIG_DFL)
    # Python's own start-up state: SIGINT raises KeyboardInterrupt unless inherited as ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for signum in request.get("ignored", []):
        signal.signal(signum, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_SETMASK, request.get("blocked", []))


def fresh_ansible_state() -> None:
    """Reset what ansible-core computed once at import and must differ per run."""
    constants = sys.modules.get("ansible.constants")
    if constants is None:
        return
    ansible_vars = sys.modules.get("ansible.utils.vars")
    if ansible_vars is not None:
        # Task and play ids are node + this random part + a counter: never repeat them across runs.
        import secrets

        ansible_vars.random_int = f"{secrets.randbelow(2**32):08x}"[:8]  # type: ignore[attr-defined]
        ansible_vars.cur_id = 0  # type: ignore[attr-defined]
    _fresh_local_tmp(constants)
    _fresh_write_locks()
    # ansible-runner points the fact cache into each run's artifact directory.
    constants.CACHE_PLUGIN_CONNECTION = constants.config.get_config_value("CACHE_PLUGIN_CONNECTION")  # type: ignore[attr-defined]
    # Decided from the template's stdout at import: whether output is coloured (a terminal) and
    # how wide the Display singleton wraps. Re-run with the child's own stdout. Reloading keeps
    # the module object, so the functions others imported from it read the new value.
    color = sys.modules.get("ansible.utils.color")
    if color is not None:
        importlib.reload(color)
    sys.modules["ansible.utils.display"].Display()._set_column_width()


def _fresh_local_tmp(constants) -> None:
    """The controller temp dir (``ansible-local-<pid>…``) is made at import and removed at exit:
    each child makes and removes its own, as a process of its own would."""
    from ansible.config.manager import cleanup_tmp_file

    parent = os.path.dirname(constants.DEFAULT_LOCAL_TMP)
    atexit.unregister(cleanup_tmp_file)
    constants.DEFAULT_LOCAL_TMP = tempfile.mkdtemp(prefix=f"ansible-local-{os.getpid()}", dir=parent)
    atexit.register(cleanup_tmp_file, constants.DEFAULT_LOCAL_TMP, warn=True)


def _fresh_write_locks() -> None:
    """ansible-core makes its module write locks (``multiprocessing`` semaphores, shared by every
    process forked after) at import, in the template: a run killed while one of its workers held
    one (building a module) would leave it taken for every later run. Each run gets its own, as
    a process of its own would; the dict stays the one the strategy and module_common read."""
    locks = sys.modules.get("ansible.executor.action_write_locks")
    if locks is None:
        return
    from ansible.utils.multiprocessing import context

    table = locks.action_write_locks  # type: ignore[attr-defined]
    for name in table:
        table[name] = context.Lock()


def run(request: dict) -> None:
    """Run the real program's script as ``__main__`` and end the process as Python would."""
    tempfile.tempdir = None
    fresh_ansible_state()
    code = 0
    try:
        runpy.run_path(request["real"], run_name="__main__")
    except SystemExit as exit_:
        code = _exit_code(exit_.code)
    except KeyboardInterrupt:
        _finish(130, killed_by=signal.SIGINT)
    except BaseException:
        traceback.print_exc()
        code = 1
    _finish(code)


def _exit_code(value) -> int:
    if value is None:
        return 0
    if isinstance(value, int):
        return value & 0xFF
    print(value, file=sys.stderr)
    return 1


def _finish(code: int, killed_by: int = 0) -> None:
    """Py_FinalizeEx's visible part: wait for non-daemon threads, atexit, flush; then leave
    without tearing the interpreter down (the template's objects need no finalizing)."""
    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            code = code or 120
    if killed_by:
        # An uncaught KeyboardInterrupt ends a Python process by SIGINT (since 3.8).
        signal.signal(killed_by, signal.SIG_DFL)
        os.kill(os.getpid(), killed_by)
    os._exit(code)
