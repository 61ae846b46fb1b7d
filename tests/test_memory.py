"""The garbage-collector policy (evalkit/memory.py): the commands apply it, the Python API only
when its caller asks, and a run undoes it whether it ends well or not (README "Python API")."""

from __future__ import annotations

import gc
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import evalkit
from evalkit import api, memory
from evalkit.pipeline import execute
from evalkit.sets import prompts

State = tuple[bool, int, tuple[int, int, int]]


def state() -> State:
    return gc.isenabled(), gc.get_freeze_count(), gc.get_threshold()


@pytest.fixture
def watched(isolated: Path, write_file: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, list[State]]]:
    """A one-prompt set answered by a replay provider; the collector's state seen while the
    prompts are built and while the run calls and grades."""
    write_file("answers.jsonl", json.dumps({"id": "p0", "response": "x", "model": "m"}) + "\n")
    write_file("evalkit.yaml", "providers:\n  - {id: rec, adapter: replay, path: answers.jsonl}\n")
    prompt = {"id": "p0", "prompt": "Q", "assertions": [{"contains": "x"}]}
    write_file("set.yaml", f"id: gcset\nname: GC\nprompts:\n  - {json.dumps(prompt)}\n")
    seen: dict[str, list[State]] = {"load": [], "run": []}
    build, run_all = prompts._prompt_set_issues, execute._run_all

    def building(*args: Any, **kwargs: Any) -> Any:
        seen["load"].append(state())
        return build(*args, **kwargs)

    async def running(*args: Any, **kwargs: Any) -> Any:
        seen["run"].append(state())
        return await run_all(*args, **kwargs)

    monkeypatch.setattr(prompts, "_prompt_set_issues", building)
    monkeypatch.setattr(execute, "_run_all", running)
    before = state()
    yield seen
    assert state() == before


def test_the_python_api_leaves_the_collector_as_it_finds_it(watched: dict[str, list[State]]) -> None:
    before = state()
    run = evalkit.run_set(evalkit.load_set("set.yaml"), provider="rec", db=None)
    assert run.items[0].passed
    assert watched == {"load": [before], "run": [before]}


def test_a_command_pauses_the_collector_while_loading_and_freezes_the_loaded_during_the_run(
    cli: Any, watched: dict[str, list[State]]
) -> None:
    before = state()
    result = cli("run", "set.yaml", "--provider", "rec")
    assert result.exit_code == 0, result.stderr
    ((enabled, _, _),) = watched["load"]
    assert not enabled
    ((_, frozen, thresholds),) = watched["run"]
    assert frozen > before[1]
    assert thresholds[:2] == before[2][:2]
    assert thresholds[2] == max(before[2][2], memory.RUN_GC_FULL_EVERY)


@pytest.fixture
def storing(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, bool]]:
    """Whether the collector runs while the run's database is opened and while the run is stored."""
    seen: list[tuple[str, bool]] = []
    prepare, persist = execute._prepare_database, execute.persist

    def opening(*args: Any, **kwargs: Any) -> Any:
        seen.append(("open", gc.isenabled()))
        return prepare(*args, **kwargs)

    def persisting(*args: Any, **kwargs: Any) -> Any:
        seen.append(("store", gc.isenabled()))
        return persist(*args, **kwargs)

    monkeypatch.setattr(execute, "_prepare_database", opening)
    monkeypatch.setattr(execute, "persist", persisting)
    return seen


def test_a_command_pauses_the_collector_but_while_its_run_calls(
    cli: Any,
    watched: dict[str, list[State]],
    storing: list[tuple[str, bool]],
    db_file: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from evalkit.cli import run as run_command

    emit = run_command.emit
    reporting: list[bool] = []

    def emitting(*args: Any, **kwargs: Any) -> None:
        reporting.append(gc.isenabled())
        emit(*args, **kwargs)

    monkeypatch.setattr(run_command, "emit", emitting)
    result = cli("run", "set.yaml", "--provider", "rec")
    assert result.exit_code == 0, result.stderr
    assert storing == [("open", False), ("store", False)]
    ((enabled, _, _),) = watched["run"]
    assert enabled  # the calls leave reference cycles: it runs while they are made
    assert reporting == [False]
    assert db_file.exists()


def test_the_python_api_stores_with_the_collector_as_it_finds_it(
    watched: dict[str, list[State]], storing: list[tuple[str, bool]], db_file: Path
) -> None:
    run = evalkit.run_set(evalkit.load_set("set.yaml"), provider="rec", db=db_file)
    assert run.items[0].passed
    assert storing == [("open", True), ("store", True)]


@pytest.mark.parametrize("fails", [False, True])
def test_an_api_caller_who_asks_gets_the_policy_undone_after_the_run(
    watched: dict[str, list[State]], monkeypatch: pytest.MonkeyPatch, fails: bool
) -> None:
    config = api.load_config("evalkit.yaml")
    before = state()
    with api.collector_policy():
        sets = api.load_prompt_sets(["set.yaml"], config)
        plan = api.plan_run(sets, config, db=None, store=False, use_cache=False)
        if fails:
            monkeypatch.setattr(execute, "asyncio", _Failing())
            with pytest.raises(RuntimeError):
                api.execute_plan(plan)
        else:
            assert api.execute_plan(plan)[0].items[0].passed
            ((_, frozen, thresholds),) = watched["run"]
            assert frozen > before[1]
            assert thresholds[2] >= memory.RUN_GC_FULL_EVERY
        assert state() == before
    assert watched["load"] == [(False, before[1], before[2])]
    assert not memory.policy_applied()


class _Failing:
    """In place of the pipeline's asyncio: the run fails once the policy is applied."""

    @staticmethod
    def run(coroutine: Any) -> Any:
        coroutine.close()
        assert gc.get_freeze_count() > 0
        raise RuntimeError("stop")
