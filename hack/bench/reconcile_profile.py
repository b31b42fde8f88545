"""Where a reconcile's ansible-playbook CPU goes, per task: run as ``ansible-playbook`` (first on
ansible-runner's PATH, see ``reconcile_cost.py --profile``), it warms exactly as a zygote template
does (``ansible_zygote.template.warm``), then times a few functions of ansible-core and of our
plugins and runs the real ``ansible-playbook`` in-process, as a zygote child does.

Each process (the playbook's and every forked worker) writes what it measured to
``$RECONCILE_PROFILE_DIR/<pid>.json``: CPU seconds (``time.process_time``, which a forked worker
starts at zero) per ``[task, what]``, outermost calls only, so a recursive function is not
counted twice. Only ``reconcile_cost.py`` reads these files.
"""

from __future__ import annotations

import atexit
import functools
import gc
import json
import os
import runpy
import sys
import time
from collections import defaultdict

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SPENT: dict[str, float] = defaultdict(float)
COUNT: dict[str, int] = defaultdict(int)
_ACTIVE: set[str] = set()
STATE = {"task": "(no task)", "role": "main", "start": 0.0}


def timed(owner, name: str, what: str, task_of=None) -> None:
    """Wrap ``owner.name`` so its CPU adds to ``SPENT[task/what]``; ``task_of(args)`` names the
    task (else the task running in this process)."""
    original = getattr(owner, name)

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        task = task_of(args, kwargs) if task_of else STATE["task"]
        key = f"{task}\t{what}"
        if key in _ACTIVE:
            return original(*args, **kwargs)
        _ACTIVE.add(key)
        start = time.process_time()
        try:
            return original(*args, **kwargs)
        finally:
            SPENT[key] += time.process_time() - start
            COUNT[key] += 1
            _ACTIVE.discard(key)

    setattr(owner, name, wrapper)


def dump() -> None:
    SPENT[f"{STATE['task']}\t(process total)"] += time.process_time() - STATE["start"]
    out = os.path.join(os.environ["RECONCILE_PROFILE_DIR"], f"{os.getpid()}.json")
    with open(out, "w") as f:
        json.dump({"role": STATE["role"], "spent": SPENT, "count": COUNT}, f)


def _task_name(task) -> str:
    return task.get_name() if task is not None else "(no task)"


def instrument_main() -> None:
    """The playbook's own process: forking workers, variables, results, callbacks (events)."""
    import jinja2
    from ansible.executor.task_queue_manager import TaskQueueManager
    from ansible.playbook.included_file import IncludedFile
    from ansible.plugins.loader import PluginLoader
    from ansible.plugins.strategy import StrategyBase
    from ansible.vars.manager import VariableManager

    timed(StrategyBase, "_queue_task", "fork the worker", lambda a, k: _task_name(a[2]))
    timed(VariableManager, "get_vars", "task variables", lambda a, k: _task_name(k.get("task")))
    timed(StrategyBase, "_process_pending_results", "read results")
    timed(IncludedFile, "process_include_results", "load the included role")
    timed(StrategyBase, "_load_included_file", "load the included role")
    timed(TaskQueueManager, "send_callback", "callbacks (events on stdout)")
    timed(PluginLoader, "_load_config_defs", "plugin documentation parsed")
    timed(jinja2.Environment, "from_string", "Jinja templates compiled")


def instrument_worker() -> None:
    """A forked worker: the task's templating, plugin loading, the plugin's own run, the result."""
    import jinja2
    from ansible.executor.process.worker import WorkerProcess
    from ansible.executor.task_executor import TaskExecutor
    from ansible.playbook.task import Task
    from ansible.plugins.loader import PluginLoader

    original_run = WorkerProcess._run

    def worker_run(self):
        STATE.update(task=_task_name(self._task), role="worker", start=time.process_time())
        SPENT.clear()
        COUNT.clear()
        profiler = None
        if os.environ.get("RECONCILE_PROFILE_CPROFILE"):
            import cProfile

            profiler = cProfile.Profile(time.process_time)
            profiler.enable()
        try:
            return original_run(self)
        finally:
            if profiler is not None:
                profiler.disable()
                profiler.dump_stats(os.path.join(os.environ["RECONCILE_PROFILE_DIR"], f"{os.getpid()}.prof"))
            dump()

    WorkerProcess._run = worker_run
    timed(TaskExecutor, "_get_connection", "connection plugin")
    timed(TaskExecutor, "_get_action_handler_with_module_context", "action plugin loaded")
    timed(Task, "post_validate", "arguments templated")
    timed(Task, "evaluate_conditional_with_result", "when")
    timed(PluginLoader, "_load_config_defs", "plugin documentation parsed")
    timed(PluginLoader, "_load_module_source", "plugin modules imported")
    timed(jinja2.Environment, "from_string", "Jinja templates compiled")
    # Called only when the zygote's compiled-template cache has no entry (jinja_cache).
    timed(jinja2.Environment, "_parse", "Jinja templates parsed (not in the zygote's cache)")
    _instrument_handler_run()
    _instrument_our_filters()


def _instrument_handler_run() -> None:
    from ansible.executor.task_executor import TaskExecutor

    original = TaskExecutor._get_action_handler_with_module_context

    def get_handler(self, templar):
        handler, context = original(self, templar)
        timed(handler, "run", "the action plugin's run")
        return handler, context

    TaskExecutor._get_action_handler_with_module_context = get_handler


def _instrument_our_filters() -> None:
    """The engine's own decisions, inside the templating of the apply task's arguments."""
    from ansible.plugins.loader import PluginLoader

    original = PluginLoader._load_module_source

    def load(self, name, path):
        module = original(self, name, path)
        if hasattr(module, "training_job_plan") and not hasattr(module, "_profiled"):
            module._profiled = True
            timed(module, "training_job_plan", "the plan filter (engine)")
            timed(module, "training_job_observe_args", "the observe_args filter (engine)")
        return module

    PluginLoader._load_module_source = load
    # The zygote's template has loaded them already (template.preload_project_plugins): each
    # run takes the function from the loader's wrapper, not from the module.
    from ansible.plugins.loader import filter_loader

    engine = {
        "training_job_plan": "the plan filter (engine)",
        "training_job_observe_args": "the observe_args filter (engine)",
    }
    for wrapper in filter_loader._cached_non_collection_wrappers.values():
        name = getattr(wrapper._function, "__name__", "")
        if name in engine and not hasattr(wrapper, "_profiled"):
            wrapper._profiled = True
            timed(wrapper, "_function", engine[name])


def main() -> None:
    real = os.environ["RECONCILE_PROFILE_REAL"]
    sys.path[0] = os.path.dirname(real)
    # The zygote of the checkout being measured (reconcile_cost.py --checkout).
    sys.path.insert(1, os.environ.get("RECONCILE_PROFILE_LIB", os.path.join(ROOT, "lib")))
    from ansible_zygote import child, template

    if template.warm("ansible-playbook"):
        sys.exit("the warm-up printed something: the zygote would decline this environment")
    gc.collect()
    gc.freeze()
    instrument_main()
    instrument_worker()
    sys.argv = [real, *sys.argv[1:]]
    child.fresh_ansible_state()
    STATE["start"] = time.process_time()
    atexit.register(dump)
    if os.environ.get("RECONCILE_PROFILE_CPROFILE"):
        import cProfile

        profiler = cProfile.Profile(time.process_time)
        out = os.path.join(os.environ["RECONCILE_PROFILE_DIR"], f"{os.getpid()}-main.prof")
        atexit.register(lambda: (profiler.disable(), profiler.dump_stats(out)))
        profiler.enable()
    runpy.run_path(real, run_name="__main__")


if __name__ == "__main__":
    main()
