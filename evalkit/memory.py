"""The garbage-collector policy of a command, in one place, and off unless asked for.

Loading a set builds many long-lived objects and almost no reference cycles, and a run keeps
every loaded object and every result to its end: the cyclic collector walks them again and again
and frees nothing. Measured (bench/README.md): pausing it while loading saves ~45 ms on a
500-prompt set and 44 s -> 28 s on a 100,000-prompt set; during a run, freezing what is loaded
skips it in the full passes (100,000 prompts: 0.8 s a pass), and one full pass per
``RUN_GC_FULL_EVERY`` gen-1 passes instead of Python's 10 walks the growing results less often
(1.6 s of a 100,000-answer replay). Freezing the loaded objects while loading as well made the
run's own collections more frequent, and grading 100,000 answers slower: they are not frozen then.

These are process-wide side effects, so they happen only inside ``collector_policy()``: the CLI
enters it around every command; a Python API caller gets the policy only by entering it too
(README "Python API"). Outside it, ``loading()`` and ``running()`` change nothing, which is the
plain version, and each restores what it changed, on an error too.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

RUN_GC_FULL_EVERY = 100  # gen-1 passes per full pass during a run (Python: 10)

_APPLIED: ContextVar[bool] = ContextVar("evalkit_collector_policy", default=False)  # in collector_policy()


@contextmanager
def collector_policy() -> Iterator[None]:
    """Within it, loading pauses the collector and a run freezes what is loaded (see above)."""
    token = _APPLIED.set(True)
    try:
        yield
    finally:
        _APPLIED.reset(token)


def policy_applied() -> bool:
    return _APPLIED.get()


@contextmanager
def loading() -> Iterator[None]:
    """The collector paused while sets are loaded, under the policy; re-enabled after."""
    if not _APPLIED.get() or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


@contextmanager
def running() -> Iterator[None]:
    """What is loaded frozen and full passes rarer while a run calls and grades, under the
    policy; both undone after, so what they hold is then collected as usual."""
    if not _APPLIED.get():
        yield
        return
    thresholds = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(thresholds[0], thresholds[1], max(thresholds[2], RUN_GC_FULL_EVERY))
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()
