"""The garbage-collector policy of a command, in one place, and off unless asked for.

Loading a set builds many long-lived objects and almost no reference cycles, and a run keeps
every loaded object and every result to its end: the cyclic collector walks them again and again
and frees nothing. Measured (bench/README.md): pausing it while loading saves ~45 ms on a
500-prompt set and 44 s -> 28 s on a 100,000-prompt set; during a run, freezing what is loaded
skips it in the full passes (100,000 prompts: 0.8 s a pass), and one full pass per
``RUN_GC_FULL_EVERY`` gen-1 passes instead of Python's 10 walks the growing results less often
(1.6 s of a 100,000-answer replay). Freezing the loaded objects while loading as well made the
run's own collections more frequent, and grading 100,000 answers slower: they are not frozen then.
Opening the database (duckdb's import, the migrations), storing the runs and reporting them are
steps of the same kind as loading, and paused the same way (``storing``, around the whole of a
run's execution: the run itself excepted). During the run's calls it stays on: they leave
reference cycles behind (about 40 objects a call, 27 MB over 5,000 calls with it off), so pausing
it there would grow memory with the run.

These are process-wide side effects, so they happen only inside ``collector_policy()``: the CLI
enters it around every command; a Python API caller gets the policy only by entering it too
(README "Python API"). Outside it, ``loading()``, ``storing()`` and ``running()`` change nothing,
which is the plain version, and each restores what it changed, on an error too.
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
    with _paused():
        yield


@contextmanager
def storing() -> Iterator[None]:
    """The collector paused while the database is opened and a run's results are stored, under
    the policy; re-enabled after."""
    with _paused():
        yield


@contextmanager
def _paused() -> Iterator[None]:
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
    policy, and the collector on, inside a pause too (the calls leave cycles); all undone after,
    so what they hold is then collected as usual. Inside a pause (``storing``), the pause takes
    over again before the thresholds come back: the first full pass after a run walks all it
    holds (~0.1 s after 5,000 answers), which a command that only stores and reports it spares."""
    if not _APPLIED.get():
        yield
        return
    paused = not gc.isenabled()
    thresholds = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(thresholds[0], thresholds[1], max(thresholds[2], RUN_GC_FULL_EVERY))
    gc.enable()
    try:
        yield
    finally:
        if paused:
            gc.disable()
        gc.set_threshold(*thresholds)
        gc.unfreeze()
