"""The client's JSON (lib/ansible_zygote/client.py), written without the json module: what it
encodes reads back with json.loads as the same request, and it reads what the server and the
templates send (json.dumps) as json.loads does."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from ansible_zygote import client
from hypothesis import given
from hypothesis import strategies as st

# Environment values may carry lone surrogates (bytes that are not UTF-8, os.environ's
# surrogateescape), control characters and any other code point.
TEXT = st.text(alphabet=st.characters(codec=None, exclude_categories=()))
REQUEST_VALUE = st.recursive(
    st.none() | st.booleans() | st.integers() | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=20,
)


@given(st.dictionaries(TEXT, REQUEST_VALUE, max_size=6))
def test_a_request_reads_back_as_sent(request):
    text = client.encode(request)
    assert text.isascii()
    assert json.loads(text) == request


@given(st.dictionaries(TEXT, st.integers() | TEXT, max_size=4))
def test_a_reply_reads_as_json_loads_reads_it(reply):
    for text in (json.dumps(reply), json.dumps(reply, ensure_ascii=False), json.dumps(reply, indent=1)):
        assert client.decode(text) == reply


def test_the_replies_the_zygote_sends():
    for reply in (
        {"pid": 4242},
        {"exec": "no warm template for this environment"},
        {"exit": 0},
        {"killed": 15},
    ):
        assert client.decode(json.dumps(reply)) == reply


@pytest.mark.parametrize(
    "text", ["", "[]", '{"pid": 1', '{"pid" 1}', '{"a": 1 "b": 2}', '{"a": 1} x', "{pid: 1}"]
)
def test_anything_else_is_refused(text):
    with pytest.raises(ValueError):
        client.decode(text)


def test_the_request_carries_inherited_signal_state():
    """An ignored SIGHUP (nohup) and a blocked SIGUSR2 reach the request, read through _signal."""
    lib = Path(client.__file__).resolve().parents[1]
    code = (
        f"import sys; sys.path.insert(0, {str(lib)!r}); from ansible_zygote import client; "
        "r = client.request('ansible-runner', '/bin/true'); print(client.encode([r['ignored'], r['blocked']]))"
    )

    def inherit() -> None:
        # Whatever this test inherited itself (a shell's background job ignores SIGINT and SIGQUIT)
        # is reset first: only what the test sets may reach the request.
        for sig in (signal.SIGINT, signal.SIGQUIT, signal.SIGTERM, signal.SIGPIPE, signal.SIGUSR1):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        signal.pthread_sigmask(signal.SIG_SETMASK, [signal.SIGUSR2])

    out = subprocess.run(
        [sys.executable, "-S", "-c", code], preexec_fn=inherit, capture_output=True, text=True, check=True
    )
    ignored, blocked = json.loads(out.stdout)
    assert ignored == [int(signal.SIGHUP)]
    assert int(signal.SIGUSR2) in blocked and int(signal.SIGHUP) not in blocked
