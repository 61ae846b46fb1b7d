"""Progress in a CI log (README "Commands"): plain lines on stderr at every 10% of a set and at least
every 10 s, never a redrawn bar. Time is a fake clock; the timer thread is driven by tick()."""

from __future__ import annotations

import io
import json
import re
import threading
from pathlib import Path
from typing import Any

import pytest

from evalkit.cli.progress import PlainProgress, ProgressHooks, progress_reporter, step_counts
from evalkit.records import ItemResult, Prompt, PromptSet
from tests.fakeserver import FakeServer, Recorded, Reply, last_user_message, openai_reply
from tests.test_runner import THREE as RUNNER_THREE
from tests.test_runner import echo as runner_echo


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def prompt_set(set_id: str, count: int) -> PromptSet:
    return PromptSet(set_id, set_id, tuple(Prompt(f"p{i}", f"question {i}") for i in range(count)))


def item(errored: bool = False) -> ItemResult:
    return ItemResult("p", passed=not errored, score=0.0, reason="", error="HTTP 500" if errored else None)


def lines(stream: io.StringIO) -> list[str]:
    return stream.getvalue().splitlines()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def stream() -> io.StringIO:
    return io.StringIO()


@pytest.fixture
def reporter(clock: FakeClock, stream: io.StringIO) -> PlainProgress:
    """Not entered: no timer thread, the test calls tick() itself."""
    return PlainProgress(stream, clock=clock, interval=10.0)


@pytest.mark.parametrize(
    ("total", "steps"),
    [
        (20, {2, 4, 6, 8, 10, 12, 14, 16, 18, 20}),
        (500, {50 * k for k in range(1, 11)}),
        (15, {2, 3, 5, 6, 8, 9, 11, 12, 14, 15}),
        (3, {1, 2, 3}),
        (1, {1}),
        (0, set()),
    ],
)
def test_step_counts_are_the_ceiling_of_each_tenth(total: int, steps: set[int]) -> None:
    assert step_counts(total) == steps


def test_a_line_at_each_tenth_and_nothing_between(reporter: PlainProgress, clock: FakeClock, stream) -> None:
    reporter.on_start(prompt_set("acme_search.faq", 20))
    assert lines(stream) == ["Running acme_search.faq: 20 prompts"]
    printed_after: list[int] = []
    for done in range(1, 21):
        clock.now += 0.25
        before = len(lines(stream))
        reporter.on_item(item())
        if len(lines(stream)) > before:
            printed_after.append(done)
    assert printed_after == [2, 4, 6, 8, 10, 12, 14, 16, 18, 20]
    assert lines(stream)[1] == "acme_search.faq: 2/20 prompts, 0 errors, 0.5 s"
    assert lines(stream)[-1] == "acme_search.faq: 20/20 prompts, 0 errors, 5.0 s"


def test_errors_counted_with_the_singular(reporter: PlainProgress, stream) -> None:
    reporter.on_start(prompt_set("s.errs", 10))
    for errored in [True, False, False, True, True, False, False, False, False, False]:
        reporter.on_item(item(errored))
    assert lines(stream)[1:] == [
        "s.errs: 1/10 prompts, 1 error, 0.0 s",
        "s.errs: 2/10 prompts, 1 error, 0.0 s",
        "s.errs: 3/10 prompts, 1 error, 0.0 s",
        "s.errs: 4/10 prompts, 2 errors, 0.0 s",
        "s.errs: 5/10 prompts, 3 errors, 0.0 s",
        "s.errs: 6/10 prompts, 3 errors, 0.0 s",
        "s.errs: 7/10 prompts, 3 errors, 0.0 s",
        "s.errs: 8/10 prompts, 3 errors, 0.0 s",
        "s.errs: 9/10 prompts, 3 errors, 0.0 s",
        "s.errs: 10/10 prompts, 3 errors, 0.0 s",
    ]


def test_a_small_set_prints_one_line_per_item_at_most(reporter: PlainProgress, stream) -> None:
    reporter.on_start(prompt_set("s.small", 3))
    for _ in range(3):
        reporter.on_item(item())
    assert lines(stream)[1:] == [f"s.small: {n}/3 prompts, 0 errors, 0.0 s" for n in (1, 2, 3)]


def test_the_total_counts_repeats_and_targets(clock: FakeClock, stream) -> None:
    reporter = PlainProgress(stream, 6, clock=clock)  # --repeat 3 on two providers
    reporter.on_start(prompt_set("s.rep", 5))
    for _ in range(3):
        reporter.on_item(item())
    assert lines(stream) == ["Running s.rep: 5 prompts", "s.rep: 3/30 prompts, 0 errors, 0.0 s"]


def test_a_line_after_the_interval_without_any_item(reporter: PlainProgress, clock: FakeClock, stream) -> None:
    reporter.on_start(prompt_set("s.slow", 100))
    clock.now += 9.9
    assert reporter.tick() == pytest.approx(0.1)
    assert lines(stream) == ["Running s.slow: 100 prompts"]
    clock.now += 0.1
    assert reporter.tick() == 10.0
    assert lines(stream)[1:] == ["s.slow: 0/100 prompts, 0 errors, 10.0 s"]
    clock.now += 3.0
    reporter.on_item(item(errored=True))
    clock.now += 7.0
    reporter.tick()
    assert lines(stream)[2:] == ["s.slow: 1/100 prompts, 1 error, 20.0 s"]


def test_a_step_line_restarts_the_interval(reporter: PlainProgress, clock: FakeClock, stream) -> None:
    reporter.on_start(prompt_set("s.step", 10))
    clock.now += 6.0
    reporter.on_item(item())  # 1/10: a step
    clock.now += 6.0
    assert reporter.tick() == pytest.approx(4.0)
    assert len(lines(stream)) == 2
    clock.now += 4.0
    reporter.tick()
    assert lines(stream)[2:] == ["s.step: 1/10 prompts, 0 errors, 16.0 s"]


def test_no_time_line_once_the_set_is_done_or_before_any_set(reporter: PlainProgress, clock: FakeClock, stream) -> None:
    clock.now += 60.0
    assert reporter.tick() == 10.0
    reporter.on_start(prompt_set("s.done", 1))
    reporter.on_item(item())
    clock.now += 60.0
    reporter.tick()
    assert lines(stream) == ["Running s.done: 1 prompt", "s.done: 1/1 prompts, 0 errors, 0.0 s"]


def test_each_set_has_its_own_count_and_clock(reporter: PlainProgress, clock: FakeClock, stream) -> None:
    reporter.on_start(prompt_set("s.one", 1))
    reporter.on_item(item(errored=True))
    clock.now += 30.0
    reporter.on_start(prompt_set("s.two", 2))
    clock.now += 1.5
    reporter.on_item(item())
    assert lines(stream)[2:] == ["Running s.two: 2 prompts", "s.two: 1/2 prompts, 0 errors, 1.5 s"]


def test_the_timer_thread_calls_tick_and_stops_with_the_context(clock: FakeClock, stream) -> None:
    ticked = threading.Event()

    class Observed(PlainProgress):
        def tick(self) -> float:
            ticked.set()
            return super().tick()

    with Observed(stream, clock=clock, interval=0.001) as reporter:
        assert reporter.timer_alive
        assert ticked.wait(timeout=30)
    assert not reporter.timer_alive
    assert [t for t in threading.enumerate() if t.name == "evalkit-progress"] == []


@pytest.mark.parametrize("error", [RuntimeError("boom"), KeyboardInterrupt()])
def test_the_timer_stops_when_the_run_raises(clock: FakeClock, stream, error: BaseException) -> None:
    reporter = PlainProgress(stream, clock=clock)
    alive_inside: list[bool] = []

    def run() -> None:
        with reporter:
            alive_inside.append(reporter.timer_alive)
            raise error

    with pytest.raises(type(error)):
        run()
    assert alive_inside == [True]
    assert not reporter.timer_alive


def test_the_plain_reporter_hands_back_its_hooks(stream) -> None:
    with progress_reporter(1, fancy=False, stream=stream) as hooks:
        assert isinstance(hooks, ProgressHooks)
        hooks.on_start(prompt_set("s.hooks", 1))
        hooks.on_item(item())
    assert lines(stream)[0] == "Running s.hooks: 1 prompt"
    assert re.fullmatch(r"s\.hooks: 1/1 prompts, 0 errors, \d+\.\d s", lines(stream)[1])


def test_the_terminal_bar_gives_each_set_its_own_task_and_total() -> None:
    from rich.console import Console

    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=100, color_system=None)
    with progress_reporter(2, fancy=True, console=console) as (on_item, on_start):
        on_start(prompt_set("s.first", 3))
        for _ in range(6):
            on_item(item())
        on_start(prompt_set("s.second", 5))
        on_item(item())
    last_frame = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "\n", out.getvalue()).split("s.first")[-1]
    first, second = (line.split() for line in ("s.first" + last_frame).splitlines() if line.startswith("s."))
    assert (first[0], first[2]) == ("s.first", "6/6")
    assert (second[0], second[2]) == ("s.second", "1/10")


# --- through the CLI (CliRunner's stderr is not a terminal) -------------------------------------

STEP = re.compile(r"(?P<set>[\w.]+): (?P<done>\d+)/(?P<total>\d+) prompts, (?P<errors>\d+) errors?, \d+\.\d s")


def write_set(write_file, set_id: str, count: int) -> None:
    write_file(
        f"sets/{set_id}.yaml",
        f"id: {set_id}\nname: {set_id}\nprompts:\n"
        + "".join(f"  - {{id: p{i}, prompt: 'question {i}', assertions: [{{contains: ok}}]}}\n" for i in range(count)),
    )


@pytest.fixture
def no_time_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    """A slow machine must not add a time-based line to the exact step lines checked here."""
    monkeypatch.setattr(PlainProgress, "tick", lambda self: self.interval)


def progress_lines(stderr: str) -> list[tuple[str, int, int, int]]:
    found = [STEP.fullmatch(line) for line in stderr.splitlines()]
    return [(m["set"], int(m["done"]), int(m["total"]), int(m["errors"])) for m in found if m]


def test_a_20_prompt_run_prints_the_ten_step_lines(
    cli, fake_config, fake_llm: FakeServer, write_file, no_time_lines
) -> None:
    write_set(write_file, "ci.twenty", 20)
    failing = {"question 3", "question 11"}

    def answer(request: Recorded) -> Reply:
        return Reply(status=500, json={}) if last_user_message(request) in failing else openai_reply("ok")

    fake_llm.handler = answer
    result = cli("run", "sets/ci.twenty.yaml", "--concurrency", "1", "--format", "json")
    assert result.exit_code == 3, result.stderr
    assert json.loads(result.stdout)["error_count"] == 2
    assert "Running ci.twenty: 20 prompts" in result.stderr.splitlines()
    errors_at = {2: 0, 4: 1, 6: 1, 8: 1, 10: 1, 12: 2, 14: 2, 16: 2, 18: 2, 20: 2}
    assert progress_lines(result.stderr) == [("ci.twenty", d, 20, e) for d, e in errors_at.items()]


def test_two_sets_each_with_its_own_name_and_total(
    cli, fake_config, fake_llm: FakeServer, write_file, no_time_lines
) -> None:
    write_set(write_file, "ci.first", 2)
    write_set(write_file, "ci.second", 3)
    fake_llm.handler = lambda request: openai_reply("ok")
    result = cli("run", "sets/ci.first.yaml", "sets/ci.second.yaml", "--format", "json")
    assert result.exit_code == 0, result.stderr
    stderr = result.stderr.splitlines()
    assert stderr.index("Running ci.first: 2 prompts") < stderr.index("Running ci.second: 3 prompts")
    assert progress_lines(result.stderr) == [
        ("ci.first", 1, 2, 0),
        ("ci.first", 2, 2, 0),
        ("ci.second", 1, 3, 0),
        ("ci.second", 2, 3, 0),
        ("ci.second", 3, 3, 0),
    ]


# --- the progress line of each set in a run of two sets --------------------------------------------

ONE = """
id: first.one
name: One
prompts:
  - id: greet
    prompt: Say hello.
    assertions: [{contains: echo}]
"""


THREE = RUNNER_THREE.replace("id: runner.three", "id: first.three")


def echo(model: str = "fake-model-1") -> Any:
    return runner_echo(model)


def test_each_set_announces_its_own_prompts(cli: Any, fake_config: Path, fake_llm: FakeServer, write_file: Any) -> None:
    fake_llm.handler = echo()
    write_file("sets/one.yaml", ONE)
    write_file("sets/three.yaml", THREE)
    result = cli("run", "sets/one.yaml", "sets/three.yaml", "--format", "json")
    assert result.exit_code == 0, result.stderr
    lines = result.stderr.splitlines()
    assert "Running first.one: 1 prompt" in lines  # "1 prompt", not "1 prompts"
    assert "Running first.three: 3 prompts" in lines
    assert "first.three: 3/3 prompts, 0 errors" in "\n".join(lines)
