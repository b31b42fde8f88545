"""What the ansible-runner template changes in the runs it forks, beyond importing: each change
keeps what the runtime receives and what ansible-runner writes (tests/zygote compares both with
the real program's) and only removes work or waiting.
"""

from __future__ import annotations


def encode_event_files_at_once() -> None:
    """ansible-runner writes every event into its artifact directory with ``json.dump``, which
    encodes in pure Python, chunk by chunk (CPython's C encoder serves ``json.dumps`` only): about
    a quarter of ansible-runner's CPU in a reconcile whose events carry the job's objects. The
    same text, encoded by ``json.dumps`` and written at once."""
    import json
    import types

    from ansible_runner import runner

    def dump(obj, fp, **kwargs):
        fp.write(json.dumps(obj, **kwargs))

    public = {name: getattr(json, name) for name in json.__all__}
    runner.json = types.SimpleNamespace(**{**public, "dump": dump})  # type: ignore[attr-defined]


def close_reaped_pty_at_once() -> None:
    """ansible-runner leaves its loop over ansible-playbook's output once the child is no longer
    alive (pexpect has reaped it), then closes the pty; ptyprocess's ``close`` sleeps 0.1 s
    first "to give the kernel time to update process status" before it checks whether to kill
    the child. For a child already reaped there is nothing to wait for: the sleep held every
    reconcile's worker 0.1 s after its play had ended. A child still alive is closed as before
    (the sleep, then SIGHUP/SIGINT/SIGKILL)."""
    from ptyprocess import ptyprocess

    close = ptyprocess.PtyProcess.close

    def close_at_once_when_reaped(self, force=True):
        if self.closed or not self.terminated:
            return close(self, force)
        delay, self.delayafterclose = self.delayafterclose, 0
        try:
            return close(self, force)
        finally:
            self.delayafterclose = delay

    ptyprocess.PtyProcess.close = close_at_once_when_reaped


def warm() -> None:
    from ansible_zygote import event_post

    encode_event_files_at_once()
    close_reaped_pty_at_once()
    event_post.install()
