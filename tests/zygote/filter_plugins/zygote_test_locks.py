"""A filter of tests/zygote's own (test_failures.py): in a task's worker, takes every module
write lock ansible-core has made (``ansible.executor.action_write_locks``), says so with a file in
the given directory, and waits there to be killed, as a run SIGKILLed while building a module
would leave them."""

from __future__ import annotations

import os
import time

from ansible.executor import action_write_locks


def hold_write_locks(directory: str) -> str:
    for lock in action_write_locks.action_write_locks.values():
        lock.acquire()
    with open(os.path.join(directory, "holding"), "w"):
        pass
    time.sleep(600)
    return "never"


class FilterModule:
    def filters(self):
        return {"zygote_test_hold_write_locks": hold_write_locks}
