"""Jinja templates compiled once, in the ansible-playbook template, for every run it forks.

ansible-core 2.18 compiles each template string again whenever it templates it
(``Templar.do_template`` → ``Environment.from_string`` → ``Environment.compile``: lex, parse,
generate Python, ``compile()``), in every task's worker: 0.5-0.8 ms a string. The template
process compiles the strings of the project's playbooks and roles once; a run that compiles the
same string with the same compile-time state gets the same code object (code objects are
immutable; ``from_code`` binds each to the asking environment, so nothing is shared beyond it).

What Jinja's compiler reads besides the source, and so what a cached entry must match:
- the arguments of ``compile`` (name, filename, defer_init) and the environment's class, code
  generator and context classes;
- the lexer's settings (delimiters, trim/lstrip, newline handling: ``jinja2.lexer.get_lexer``'s
  own cache key), the extensions, ``optimized``, ``is_async``, ``autoescape``, ``finalize`` (its
  pass-argument kind, and it is called on constant output) and ``undefined``;
- each filter and test the source uses: whether it exists, its pass-argument kind, and its
  result on constant arguments (constant folding). The entry keeps, per name, the function the
  compiler saw (module, qualified name, pass-argument kind, and its module file's identity);
  a lookup resolves the names again in the asking environment and serves only if all match.
Anything else - a new source, other settings, a filter that resolves elsewhere or whose file
changed - is compiled by Jinja as before, and not cached (only the template process fills it).
Jinja also calls a filter or test while compiling when its arguments are constants (constant
folding): such a source is never cached (:func:`precompile`), so no value a filter computed is
reused across runs.
"""

from __future__ import annotations

import functools
import os
import sys
from types import CodeType

from jinja2 import Environment, nodes
from jinja2.utils import _PassArg

# (source, compile arguments, environment settings) -> (code, ((kind, name, resolution), ...)).
_compiled: dict[tuple, tuple[CodeType, tuple]] = {}


def _function_identity(func) -> tuple | None:
    """What the compiler takes from a filter or test function, and where its code comes from."""
    if func is None:
        return None
    inner = getattr(func, "__wrapped__", func)
    module = sys.modules.get(getattr(inner, "__module__", "") or "")
    path = getattr(module, "__file__", None)
    try:
        st = os.stat(path) if path else None
    except OSError:
        st = None
    file_id = (path, st.st_size, st.st_mtime_ns, st.st_ino) if st else None
    return (
        getattr(func, "__qualname__", repr(func)),
        getattr(inner, "__module__", None),
        getattr(inner, "__qualname__", repr(inner)),
        _PassArg.from_obj(func),
        file_id,
    )


def _callable_identity(value) -> object:
    if callable(value):
        return (
            getattr(value, "__module__", None),
            getattr(value, "__qualname__", repr(value)),
            _PassArg.from_obj(value),
        )
    return value


def settings(env) -> tuple:
    """Everything of the environment that Jinja's lexer, parser and code generator read."""
    return (
        type(env),
        env.code_generator_class,
        env.context_class,
        env.template_class,
        (
            env.block_start_string,
            env.block_end_string,
            env.variable_start_string,
            env.variable_end_string,
            env.comment_start_string,
            env.comment_end_string,
            env.line_statement_prefix,
            env.line_comment_prefix,
            env.trim_blocks,
            env.lstrip_blocks,
            env.newline_sequence,
            env.keep_trailing_newline,
        ),
        tuple((name, type(ext)) for name, ext in sorted(env.extensions.items())),
        env.optimized,
        env.is_async,
        env.sandboxed,
        _callable_identity(env.autoescape),
        _callable_identity(env.finalize),
        env.undefined,
    )


def _resolve(env, kind: str, name: str) -> tuple | None:
    mapping = env.filters if kind == "filter" else env.tests
    try:
        return _function_identity(mapping.get(name))
    except Exception:  # a lookup that raises is one the cache must not answer
        return ("unresolvable",)


def _dependencies(env, tree: nodes.Template) -> tuple:
    names = {("filter", n.name) for n in tree.find_all(nodes.Filter)}
    names |= {("test", n.name) for n in tree.find_all(nodes.Test)}
    return tuple((kind, name, _resolve(env, kind, name)) for kind, name in sorted(names))


def _key(env, source: str, name, filename, defer_init) -> tuple:
    return (source, name, filename, defer_init, settings(env))


def cached_compile(original):
    """``Environment.compile`` answering a string it was pre-compiled for from the cache."""

    def compile(self, source, name=None, filename=None, raw=False, defer_init=False):
        if isinstance(source, str) and not raw and _compiled:
            entry = _compiled.get(_key(self, source, name, filename, defer_init))
            if entry is not None and all(_resolve(self, k, n) == r for k, n, r in entry[1]):
                return entry[0]
        return original(self, source, name, filename, raw, defer_init)

    compile.__wrapped__ = original  # type: ignore[attr-defined]
    return compile


def _probe(env, tree: nodes.Template, calls: list) -> Environment:
    """A copy of ``env`` whose filters and tests (those the tree uses) note each call: the
    compiler calls one only to fold it over constant arguments."""

    def traced(func):
        @functools.wraps(func)  # keeps the pass-argument kind the compiler reads
        def call(*args, **kwargs):
            calls.append(func)
            return func(*args, **kwargs)

        return call

    probe = object.__new__(type(env))
    probe.__dict__.update(env.__dict__)
    probe.filters, probe.tests = {}, {}
    for kind, node_type, mapping in (
        ("filters", nodes.Filter, env.filters),
        ("tests", nodes.Test, env.tests),
    ):
        for name in {n.name for n in tree.find_all(node_type)}:
            func = mapping.get(name)
            if func is not None:
                getattr(probe, kind)[name] = traced(func)
    return probe


def precompile(env, source: str) -> bool:
    """Compile one source as ``Environment.from_string`` would, and keep it. Not kept (each run
    compiles it as before): a source Jinja rejects; one whose compilation called a filter or test
    (constant folding: ``{{ 6 | random }}`` is folded to a number at each compile, so a cached
    one would be the same number in every run); any environment with extensions (their parsing
    is their own code)."""
    if env.extensions:
        return False
    calls: list = []
    try:
        tree = env._parse(source, None, None)
        dependencies = _dependencies(env, tree)
        code = env._compile(
            _probe(env, tree, calls)._generate(tree, None, None, defer_init=False), "<template>"
        )
    except Exception:  # whatever Jinja rejects is left to the run
        return False
    if calls:
        return False
    _compiled[_key(env, source, None, None, False)] = (code, dependencies)
    return True


def install(environment_class) -> None:
    environment_class.compile = cached_compile(environment_class.compile)
