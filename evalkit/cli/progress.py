"""Progress of ``evalkit run`` on stderr.

On a terminal a transient rich bar, one task per set with that set's own total. Elsewhere (a CI
log) a redrawn bar is noise, so the plain reporter prints lines instead (README "Commands"): ``Running
<set>: N prompts`` when a set starts, then ``<set>: <done>/<total> prompts, <n> errors, <t> s``
each time the count reaches a tenth of the set's total, and at least every ``interval`` seconds
while the set runs, so a slow endpoint still shows the job is alive.

Items finish on the event loop's thread, which alone counts them; the time-based lines come
from a daemon timer thread, which only reads the counts. One lock orders the writes. The clock and the interval are constructor
arguments, and ``tick()`` is what the timer calls, so tests drive time without sleeping.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import TYPE_CHECKING, Any, NamedTuple, TextIO

if TYPE_CHECKING:
    from evalkit.records import ItemResult, PromptSet

DEFAULT_INTERVAL_S = 10.0


class ProgressHooks(NamedTuple):
    """What ``execute_plan`` calls: ``progress=on_item, on_start=on_start``."""

    on_item: Callable[[ItemResult], None]
    on_start: Callable[[PromptSet], None]


def step_counts(total: int) -> frozenset[int]:
    """The counts that print a line: ceil(total * k / 10) for k = 1..10."""
    return frozenset(-(-total * k // 10) for k in range(1, 11)) - {0}


def plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


class PlainProgress:
    """Progress as lines on a stream that is not a terminal; a context manager running the timer."""

    def __init__(
        self,
        stream: TextIO,
        samples_per_prompt: int = 1,
        *,
        clock: Callable[[], float] = time.monotonic,
        interval: float = DEFAULT_INTERVAL_S,
    ) -> None:
        self.stream = stream
        self.samples_per_prompt = samples_per_prompt
        self.clock = clock
        self.interval = interval
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._set_id: str | None = None
        self._total = 0
        self._steps: frozenset[int] = frozenset()
        self._done = 0
        self._errors = 0
        self._started_at = 0.0
        self._last_line_at = 0.0

    def on_start(self, prompt_set: PromptSet) -> None:
        """A set starts: its total is its prompts times the samples of each (repeats x targets)."""
        with self._lock:
            self._set_id = prompt_set.id
            self._total = len(prompt_set.prompts) * self.samples_per_prompt
            self._steps = step_counts(self._total)
            self._done = self._errors = 0
            self._started_at = self._last_line_at = self.clock()
            self._write(f"Running {prompt_set.id}: {plural(len(prompt_set.prompts), 'prompt')}")

    def on_item(self, item: ItemResult) -> None:
        # Items finish on the event loop's thread, the one writer of the counts (the timer only
        # reads them): they are counted without the lock, which is taken only to write a line.
        if self._set_id is None or self._done >= self._total:
            return
        self._done += 1
        if item.error is not None:
            self._errors += 1
        if self._done in self._steps:
            with self._lock:
                self._report()

    def tick(self) -> float:
        """Print a line when none was printed for ``interval`` seconds while a set runs; return
        the seconds until the next one may be due (what the timer waits)."""
        with self._lock:
            if not self._running():
                return self.interval
            now = self.clock()
            if now - self._last_line_at >= self.interval:
                self._report(now)
            return max(0.0, self._last_line_at + self.interval - now)

    def __enter__(self) -> PlainProgress:
        self._stop.clear()
        self._thread = threading.Thread(target=self._timer, name="evalkit-progress", daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop the timer thread and wait for it (it wakes at once)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    @property
    def timer_alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _timer(self) -> None:
        wait = self.interval
        while not self._stop.wait(wait):
            wait = self.tick()

    def _running(self) -> bool:
        return self._set_id is not None and self._done < self._total

    def _report(self, now: float | None = None) -> None:
        now = self.clock() if now is None else now
        self._last_line_at = now
        self._write(
            f"{self._set_id}: {self._done}/{self._total} prompts, {plural(self._errors, 'error')}, "
            f"{now - self._started_at:.1f} s"
        )

    def _write(self, line: str) -> None:
        print(line, file=self.stream, flush=True)


@contextmanager
def terminal_progress(console: Any, samples_per_prompt: int) -> Iterator[ProgressHooks]:
    """A transient rich bar; each set gets its own task, named after it, with its own total."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=console, transient=True,
    ) as bar:  # fmt: skip
        current: list[TaskID] = []

        def start(prompt_set: PromptSet) -> None:
            current[:] = [bar.add_task(prompt_set.id, total=len(prompt_set.prompts) * samples_per_prompt)]

        def advance(item: ItemResult) -> None:
            if current:
                bar.advance(current[0])

        yield ProgressHooks(advance, start)


@contextmanager
def progress_reporter(
    samples_per_prompt: int, *, fancy: bool, console: Any = None, stream: TextIO | None = None
) -> Iterator[ProgressHooks]:
    """The bar on a terminal (``fancy``), the plain lines otherwise; ``samples_per_prompt`` is
    repeats x provider targets."""
    if fancy:
        with terminal_progress(console, samples_per_prompt) as hooks:
            yield hooks
        return
    with PlainProgress(sys.stderr if stream is None else stream, samples_per_prompt) as plain:
        yield ProgressHooks(plain.on_item, plain.on_start)
