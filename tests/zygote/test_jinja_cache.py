"""The zygote's compiled-template cache (``ansible_zygote.jinja_cache``) serves a compiled
template only to the same source compiled the same way: anything that changes what Jinja would
compile is compiled again, never served stale."""

from __future__ import annotations

import sys

import pytest
import zygote_harness as harness
from jinja2 import pass_environment

sys.path.insert(0, str(harness.ROOT / "lib"))
from ansible.template import AnsibleEnvironment
from ansible_zygote import jinja_cache


def shout(value):
    return f"{value}!"


def whisper(value):
    return f"{value}..."


@pytest.fixture
def cache(monkeypatch):
    """The cache installed on a class of its own (AnsibleEnvironment itself stays untouched)."""

    class Environment(AnsibleEnvironment):
        pass

    monkeypatch.setattr(jinja_cache, "_compiled", {})
    jinja_cache.install(Environment)
    return Environment


def environment(cls, **settings):
    env = cls(**settings)
    env.filters["speak"] = shout
    return env


def render(env, source: str) -> str:
    return env.from_string(source).render(name="job")


def test_the_same_source_gets_the_compiled_code(cache):
    env = environment(cache)
    assert jinja_cache.precompile(env, "{{ name | speak }}")
    (cached,) = jinja_cache._compiled.values()
    assert env.compile("{{ name | speak }}") is cached[0]
    assert render(env, "{{ name | speak }}") == "job!"


def test_a_changed_source_is_compiled_again(cache):
    env = environment(cache)
    jinja_cache.precompile(env, "{{ name | speak }}")
    assert render(env, "{{ name | speak }}?") == "job!?"
    assert render(env, "{{ name }}") == "job"


def test_a_filter_that_resolves_elsewhere_is_compiled_again(cache):
    """The compiled code passes what the filter asks for (here the environment): another filter
    of the same name that asks for it needs other code."""
    env = environment(cache)
    assert jinja_cache.precompile(env, "{{ name | speak }}")
    other = environment(cache)
    other.filters["speak"] = pass_environment(
        lambda environment, value: f"{value} in {environment.__class__.__name__}"
    )
    assert render(other, "{{ name | speak }}") == "job in Environment"
    assert render(env, "{{ name | speak }}") == "job!"


def test_other_settings_are_compiled_again(cache):
    env = environment(cache)
    jinja_cache.precompile(env, "<< name >>{{ name }}")
    other = environment(cache, variable_start_string="<<", variable_end_string=">>")
    assert render(other, "<< name >>{{ name }}") == "job{{ name }}"
    assert render(env, "<< name >>{{ name }}") == "<< name >>job"


def test_a_filter_folded_at_compile_time_is_left_to_each_run(cache):
    """Jinja calls a filter on constant arguments while compiling: cached, its result (a random
    number, a time) would be the same in every run. Such a source is compiled by each run."""
    env = environment(cache)
    ticks = iter(range(100))
    env.filters["tick"] = lambda value: f"{value}{next(ticks)}"
    assert not jinja_cache.precompile(env, "{{ 'job' | tick }}")
    assert not jinja_cache._compiled
    assert render(env, "{{ 'job' | tick }}") != render(env, "{{ 'job' | tick }}")
    assert jinja_cache.precompile(env, "{{ name | tick }}"), "a variable's filter runs at render time"
