"""The zygote's compiled-template cache (``ansible_zygote.jinja_cache``) serves a compiled
template only to the same source compiled the same way: anything that changes what Jinja would
compile is compiled again, never served stale."""

from __future__ import annotations

import sys

import pytest
import zygote_harness as harness

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
    """Constant folding calls the filter at compile time: the cached code holds shout's result."""
    env = environment(cache)
    jinja_cache.precompile(env, "{{ 'job' | speak }}")
    other = environment(cache)
    other.filters["speak"] = whisper
    assert render(other, "{{ 'job' | speak }}") == "job..."
    assert render(env, "{{ 'job' | speak }}") == "job!"


def test_other_settings_are_compiled_again(cache):
    env = environment(cache)
    jinja_cache.precompile(env, "<< name >>{{ name }}")
    other = environment(cache, variable_start_string="<<", variable_end_string=">>")
    assert render(other, "<< name >>{{ name }}") == "job{{ name }}"
    assert render(env, "<< name >>{{ name }}") == "<< name >>job"
