"""A warm template: one interpreter that has imported a program's modules with one environment
(its fingerprint, see :mod:`ansible_zygote.server`) and forks a child per run.

    python template.py PROGRAM REAL CONTROL_FD   (started by the server, never by hand)

Warm-up must be silent: anything written to stdout/stderr while importing (a config warning, a
deprecation) would be missing from every child's output, so such a template declines and the
server keeps exec'ing the real program for that environment. Started with a fresh random
``PYTHONHASHSEED`` by the server; its children share it (a hash seed is fixed at interpreter start),
which is why the server retires a template after a number of children.

The template reaps its children and reports their exit status to their clients; a client that
disappears gets its child's process group killed, as its own death would have killed an exec'ed
program's pipe readers.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import os
import pkgutil
import selectors
import signal
import socket
import sys
import tempfile
import time

# A project file modified after this moment may have been imported before or after its edit: it
# is reported as changed, so the server replaces this template at once (see project_files).
STARTED_NS = time.time_ns()

# What each program's script imports, and the plugins ansible-playbook loads in every run (the
# callback loader imports every callback; the plugin loader reuses a module already in
# sys.modules under its full name). "pkg.*" is every module of the package. Never awx_display:
# ansible-runner's callback patches Display and reads the run's artifact dir at import.
PRELOAD = {
    "ansible-runner": [
        "ansible_runner.__main__",
        "ansible_runner.runner",
        "ansible_runner.config.runner",
        "ansible_runner.streaming",
        "pexpect",
        "netrc",
    ],
    "ansible-playbook": [
        "ansible.cli.playbook",
        "ansible.executor.playbook_executor",
        "ansible.executor.task_queue_manager",
        "ansible.executor.process.worker",
        "ansible.playbook",
        "ansible.playbook.play",
        "ansible.playbook.role_include",
        "ansible.playbook.handler_task_include",
        "ansible.playbook.included_file",
        "ansible.template",
        "ansible.inventory.manager",
        "ansible.vars.manager",
        "ansible.plugins.callback.*",
        "ansible.plugins.connection.*",
        "ansible.plugins.shell.*",
        "ansible.plugins.become.*",
        "ansible.plugins.strategy.linear",
        "ansible.plugins.cache.jsonfile",
        "ansible.plugins.cache.memory",
        "ansible.plugins.inventory.ini",
        "ansible.plugins.vars.host_group_vars",
        "ansible.plugins.action.normal",
        "ansible.plugins.action.command",
        "ansible.plugins.action.debug",
        "ansible.plugins.action.set_fact",
        "ansible.plugins.action.fail",
        # Loaded by the first template with a filter, test or lookup, in each task's worker again
        # (a worker is a fresh fork of the run's main process, which never templates them).
        "ansible.plugins.filter.*",
        "ansible.plugins.test.*",
        "ansible.plugins.lookup.env",
        "ansible.plugins.lookup.file",
        # The plugins' HTTP client resolves "localhost": getaddrinfo encodes the name with the
        # idna codec, which each task's worker would import (with stringprep) again.
        "encodings.idna",
    ],
}


def preload(names: list[str]) -> None:
    for name in names:
        if not name.endswith(".*"):
            importlib.import_module(name)
            continue
        package = importlib.import_module(name[:-2])
        for module in pkgutil.iter_modules(package.__path__):
            importlib.import_module(f"{package.__name__}.{module.name}")


def cache_builtin_routing() -> None:
    """ansible.builtin's routing table (ansible_builtin_runtime.yml, 9.7k lines) is parsed in every
    run, about half of a no-op ansible-playbook's own CPU. ansible-core documents
    ``_meta_yml_to_dict`` as the place to cache it: parse it once here and answer the same bytes
    with the same dict (each child mutates its own copy-on-write copy); anything else is parsed."""
    import ansible
    from ansible.utils.collection_loader import _collection_finder

    original = _collection_finder._meta_yml_to_dict
    path = os.path.join(os.path.dirname(ansible.__file__), "config", "ansible_builtin_runtime.yml")
    with open(path, "rb") as f:
        raw = f.read()
    parsed = original(raw, ("ansible.builtin", "runtime.yml"))

    def cached(yaml_string_data, content_id):
        if yaml_string_data == raw:
            return parsed
        return original(yaml_string_data, content_id)

    _collection_finder._meta_yml_to_dict = cached


class _ParsedDocumentation:
    """Stands in for ``AnsibleLoader`` in ``ansible.plugins.loader``, whose only use there is
    ``_load_config_defs`` parsing a configurable plugin's DOCUMENTATION: for the plugins
    preloaded here, the parse was done once in the template and each process takes its
    copy-on-write result once (the caller merges doc fragments into it, so a second load in the
    same process parses again). Any other text or file is parsed as before."""

    parsed: dict[tuple[str, str], object] = {}
    real: type

    def __init__(self, stream, file_name=None, vault_secrets=None):
        self.key = (stream, file_name)
        self.args = (stream, file_name, vault_secrets)

    def get_single_data(self):
        if isinstance(self.key[0], str) and self.key in self.parsed:
            return self.parsed.pop(self.key)
        return self.real(*self.args).get_single_data()


def cache_plugin_documentation() -> None:
    """Every configurable plugin module imported so far: its DOCUMENTATION parsed as
    ``_load_config_defs`` would (about 15 ms of each run's main process, ≈ 27 plugins)."""
    from ansible import constants
    from ansible.plugins import loader

    _ParsedDocumentation.real = loader.AnsibleLoader
    for name, module in list(sys.modules.items()):
        parts = name.split(".")
        if (
            len(parts) != 4
            or parts[:2] != ["ansible", "plugins"]
            or parts[2] not in constants.CONFIGURABLE_PLUGINS
        ):
            continue
        doc, path = getattr(module, "DOCUMENTATION", ""), getattr(module, "__file__", None)
        if doc and path:
            _ParsedDocumentation.parsed[(doc, path)] = loader.AnsibleLoader(
                doc, file_name=path
            ).get_single_data()
    loader.AnsibleLoader = _ParsedDocumentation  # type: ignore[misc]


# Keys whose string is a bare Jinja expression that ansible-core wraps before templating it
# (ansible.playbook.conditional: the wrapper below is 2.18's).
CONDITIONALS = ("when", "changed_when", "failed_when", "until")
CONDITIONAL_WRAPPER = (
    "{{% set __cres = {} %}}{{{{ [true if __cres else false, __cres.__class__.__name__] }}}}"
)


def project_roots() -> list[str]:
    """The configured roles directories and, beside each, the project's ``playbooks``."""
    from ansible import constants

    roots = []
    for roles in constants.DEFAULT_ROLES_PATH:
        roots += [roles, os.path.join(os.path.dirname(os.path.abspath(roles)), "playbooks")]
    return [root for root in roots if os.path.isdir(root)]


def template_strings(value, key: str = ""):
    """Every string of a parsed YAML document, and for conditional keys their wrapped form."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from template_strings(v, str(k))
    elif isinstance(value, list):
        for item in value:
            yield from template_strings(item, key)
    elif isinstance(value, str):
        yield value
        if key in CONDITIONALS:
            yield CONDITIONAL_WRAPPER.format(value)


def project_yaml_documents():
    import yaml

    for root in project_roots():
        for directory, _, files in os.walk(root):
            for name in sorted(files):
                if not name.endswith((".yml", ".yaml")):
                    continue
                try:
                    with open(os.path.join(directory, name), encoding="utf-8") as f:
                        yield yaml.load(f, Loader=yaml.CSafeLoader)
                except (OSError, yaml.YAMLError, UnicodeDecodeError):
                    continue


def precompile_project_templates() -> int:
    """Compile the template strings of the project's playbooks and roles as a run's Templar would
    (``Templar.do_template``: backslashes escaped, ``from_string``), once for every run."""
    from ansible import template as ansible_template

    from ansible_zygote import jinja_cache

    jinja_cache.install(ansible_template.AnsibleEnvironment)
    env = ansible_template.Templar(loader=None).environment
    done = 0
    for document in project_yaml_documents():
        for text in template_strings(document):
            if ansible_template.is_possibly_template(text, env) and not text.startswith("#jinja2:"):
                done += jinja_cache.precompile(env, ansible_template._escape_backslashes(text, env))
    return done


def preload_project_plugins() -> None:
    """Import the configured action and filter plugins (and the ``lib/`` modules they import) as
    a run's loader would: its workers then find them imported. The server checks before every
    run that none of the files imported here changed (:func:`project_files`)."""
    from ansible import constants
    from ansible.plugins.loader import action_loader, filter_loader

    for directory in constants.DEFAULT_ACTION_PLUGIN_PATH:
        for name in sorted(os.listdir(directory)) if os.path.isdir(directory) else ():
            if name.endswith(".py") and not name.startswith("_"):
                action_loader.get(name[:-3], class_only=True)
    list(filter_loader.all())


def project_files() -> list[list]:
    """What the server checks before every run (``server.changed``): the identity of every
    imported module file that is neither Python's, the environment's (ansible-core and the rest
    of site-packages are in the fingerprint through the programs' scripts) nor the zygote's own
    (the project's plugins and ``lib/``), and the listing of every plugin directory that the
    template's loaders have searched (they keep what they found: a plugin added later would be
    "couldn't resolve" in every run)."""
    from ansible_zygote.server import EDITED, watched_identity

    installed = {os.path.realpath(p) + os.sep for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    ours = os.path.dirname(os.path.realpath(__file__)) + os.sep
    files = set()
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if not path:
            continue
        real = os.path.realpath(path)
        if not real.startswith((ours, *installed)):
            files.add(real)
    entries = [["file", path] for path in sorted(files)] + [["dir", path] for path in plugin_directories()]
    watched = []
    for kind, path in entries:
        # Modified while this template was starting: which version it has is unknown.
        st = _stat(path)
        seen = EDITED if st and st.st_mtime_ns >= STARTED_NS else watched_identity(kind, path)
        if kind == "dir" or seen is not None:
            watched.append([kind, path, seen])
    return watched


def _stat(path: str) -> os.stat_result | None:
    try:
        return os.stat(path)
    except OSError:
        return None


def plugin_directories() -> list[str]:
    """The directories (configured, and those found one or two levels below) that a plugin
    loader of this template has computed as its search path, existing or not (a plugin
    directory made later would be searched by a process of its own); not ansible-core's own."""
    loader = sys.modules.get("ansible.plugins.loader")
    if loader is None:
        return []
    directories: set[str] = set()
    for value in vars(loader).values():
        if isinstance(value, loader.PluginLoader) and value._paths is not None:
            directories.update(p.path for p in value._paths if not p.internal)
            directories.update(os.path.abspath(os.path.expanduser(p)) for p in value.config or ())
    return sorted(d for d in directories if os.path.basename(d) != "__pycache__")


def preload_project() -> None:
    preload_project_plugins()
    precompile_project_templates()


def project_preload_is_clean() -> bool:
    """Preloading runs the project's code: a plugin that fails to import would end the template
    (and the next one, at every run), one that warns would make it decline. Try it first in a
    throwaway fork; if it raised or printed anything, the template does without it and each run
    imports and compiles as before (and shows the error or warning itself)."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            with tempfile.TemporaryFile() as captured:
                os.dup2(captured.fileno(), 1)
                os.dup2(captured.fileno(), 2)
                preload_project()
                sys.stdout.flush()
                sys.stderr.flush()
                code = 0 if os.fstat(captured.fileno()).st_size == 0 else 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0


def warm_playbook() -> None:
    cache_builtin_routing()
    cache_plugin_documentation()
    if os.environ.get("ANSIBLE_ZYGOTE_PRELOAD_PROJECT", "true") != "false" and project_preload_is_clean():
        preload_project()


def warm_runner() -> None:
    from ansible_zygote import runner_warm

    runner_warm.warm()


WARM_UP = {"ansible-playbook": warm_playbook, "ansible-runner": warm_runner}


def warm(program: str) -> str:
    """Import the program's modules with output captured; returns whatever they printed."""
    with tempfile.TemporaryFile() as captured:
        saved = [os.dup(1), os.dup(2)]
        os.dup2(captured.fileno(), 1)
        os.dup2(captured.fileno(), 2)
        try:
            preload(PRELOAD[program])
            if program in WARM_UP:
                WARM_UP[program]()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)
        captured.seek(0)
        return captured.read().decode(errors="replace")


class Children:
    """The running children: pid -> (the client's connection, a pidfd for the exit)."""

    def __init__(self, control: socket.socket):
        self.control = control
        self.selector = selectors.DefaultSelector()
        self.selector.register(control, selectors.EVENT_READ, ("control", 0))
        self.conns: dict[int, socket.socket] = {}
        self.pidfds: dict[int, int] = {}
        self.accepting = True

    def spawn(self, request: dict, fds: list[int]) -> None:
        """fds: the client's connection, then its stdin, stdout, stderr."""
        conn = socket.socket(fileno=fds[0])
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            self.close_all()
            conn.close()
            from ansible_zygote import child

            child.become(request, fds[1:4])
            child.run(request)
        for fd in fds[1:]:
            os.close(fd)
        pidfd = os.pidfd_open(pid)
        self.conns[pid], self.pidfds[pid] = conn, pidfd
        self.selector.register(conn, selectors.EVENT_READ, ("client", pid))
        self.selector.register(pidfd, selectors.EVENT_READ, ("exit", pid))
        _send_quietly(conn, {"pid": pid})

    def close_all(self) -> None:
        """In a new child: drop every descriptor of the template through its owner object, so no
        stale object closes a number the child reuses later."""
        self.selector.close()
        self.control.close()
        for conn in self.conns.values():
            conn.close()
        for pidfd in self.pidfds.values():
            os.close(pidfd)

    def on_client(self, pid: int) -> None:
        from ansible_zygote import wire

        message, _ = wire.recv(self.conns[pid])
        if message is None:
            # The client is gone: nobody waits for this run any more, and its output has nowhere
            # to go. Its whole process group goes with it (Ansible's forked workers too).
            self.selector.unregister(self.conns[pid])
            _kill_group(pid)
        elif "signal" in message:
            _signal_quietly(pid, int(message["signal"]))

    def on_exit(self, pid: int) -> None:
        _, status = os.waitpid(pid, 0)
        conn, pidfd = self.conns.pop(pid), self.pidfds.pop(pid)
        self.selector.unregister(pidfd)
        os.close(pidfd)
        if os.WIFSIGNALED(status):
            result = {"killed": os.WTERMSIG(status)}
        else:
            result = {"exit": os.waitstatus_to_exitcode(status)}
        _send_quietly(conn, result)
        with contextlib.suppress(KeyError):
            self.selector.unregister(conn)
        conn.close()

    def on_control(self) -> None:
        from ansible_zygote import wire

        message, fds = wire.recv(self.control)
        if message is None:
            # The server retired this template (or is gone): finish the running children, then exit.
            self.selector.unregister(self.control)
            self.accepting = False
            return
        if not self.accepting:
            # Stopping (SIGTERM): the client, left without an answer, execs the real program.
            for fd in fds:
                os.close(fd)
            return
        self.spawn(message, fds)

    def stop(self, _signum=None, _frame=None) -> None:
        """SIGTERM, from a server whose stop has waited long enough: kill every run's group now,
        so that each is reaped and reported as killed (dying with them would leave their clients
        without any status)."""
        self.accepting = False
        for pid in list(self.pidfds):
            _kill_group(pid)

    def serve(self) -> None:
        while self.accepting or self.pidfds:
            for key, _ in self.selector.select():
                kind, pid = key.data
                if kind == "control":
                    self.on_control()
                elif pid not in self.pidfds:
                    # Reaped earlier in this batch (its exit came before its client's signal).
                    continue
                elif kind == "client":
                    self.on_client(pid)
                else:
                    self.on_exit(pid)


# ansible-core's settings whose relative values it resolves against the working directory.
PATH_TYPES = ("path", "pathspec", "pathlist", "tmppath", "tmp")
RELATIVE = (
    "{} set to a relative path in the environment: ansible-core resolves it at import against the "
    "working directory, which is each run's own (set an absolute path to use the zygote)"
)


def relative_path_settings() -> list[str]:
    """The environment variables that set a path setting of ansible-core to a relative path. A
    template resolved them against the directory of the run that started it; each real run,
    against its own (ansible-runner starts ansible-playbook in the run's project directory)."""
    constants = sys.modules.get("ansible.constants")
    if constants is None:
        return []
    names = set()
    for definition in constants.config.get_configuration_definitions().values():  # type: ignore[attr-defined]
        if definition.get("type") not in PATH_TYPES:
            continue
        for variable in definition.get("env") or ():
            value = os.environ.get(variable.get("name", ""), "")
            parts = value.replace(",", os.pathsep).split(os.pathsep)
            if any(p and not os.path.isabs(os.path.expanduser(os.path.expandvars(p))) for p in parts):
                names.add(variable["name"])
    return sorted(names)


def _send_quietly(conn: socket.socket, message: dict) -> None:
    from ansible_zygote import wire

    with contextlib.suppress(OSError):
        wire.send(conn, message)


def _signal_quietly(pid: int, signum: int) -> None:
    with contextlib.suppress(OSError):
        os.kill(pid, signum)


def _kill_group(pid: int) -> None:
    """The child and its group: the child first, which may not have called ``setsid()`` yet
    (then it has no group, nor any child, and once killed it makes neither)."""
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGKILL)


def main() -> None:
    program, real, control_fd = sys.argv[1], sys.argv[2], int(sys.argv[3])
    control = socket.socket(fileno=control_fd)
    from ansible_zygote import child, wire  # noqa: F401 (the children need it imported)

    # As if the real script had been started: its directory first on sys.path, not ours.
    sys.path[0] = os.path.dirname(real)
    noise = warm(program)
    relative = relative_path_settings()
    if noise or relative:
        why = f"its warm-up printed:\n{noise}" if noise else RELATIVE.format(", ".join(relative))
        print(f"ansible-zygote: {program} template declines, {why}", file=sys.stderr)
        wire.send(control, {"ready": False})
        return
    # Everything imported so far lives as long as the template: the children's cyclic GC need
    # not walk it again in every run.
    gc.collect()
    gc.freeze()
    wire.send(control, {"ready": True, "watched": project_files()})
    children = Children(control)
    signal.signal(signal.SIGTERM, children.stop)
    children.serve()


if __name__ == "__main__":
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    main()
