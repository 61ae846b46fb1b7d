"""A set's shard parts checked whole and assembled into one run (README "Larger suites: shards and
batches"): the problems named when a part holds other prompts than its shard's, and the run made
from whole parts."""

from __future__ import annotations

from dataclasses import replace

from evalkit.pipeline.assembly import Parts, assemble, problems
from evalkit.pipeline.shards import shard_of
from evalkit.records import ItemResult, RunResult, ServingRecord, Shard

SET_ID = "acme.faq"
IDS = [f"p{i}" for i in range(10)]
GEN = ServingRecord("prod", "alias", "model-1")


def part(index: int, count: int, ids: list[str], *, positions: tuple[int, ...] | None = None) -> RunResult:
    items = tuple(
        ItemResult(id=i, passed=i != "p3", score=0.0 if i == "p3" else 1.0, reason="", serving=GEN) for i in ids
    )
    own = tuple(IDS.index(i) for i in ids) if positions is None else positions
    return RunResult.create(
        items,
        run_id=f"run-{index}-{len(ids)}",
        set_id=SET_ID,
        set_fingerprint="f1",
        provider="prod",
        model="alias",
        grader="deterministic",
        started_at=f"2026-12-0{index}T10:00:00.000+00:00",
        finished_at=f"2026-12-0{index}T10:01:00.000+00:00",
        shard=Shard(index, count, "g", set_prompts=len(IDS), positions=own),
    )


def whole(count: int) -> list[RunResult]:
    return [part(k, count, [i for i in IDS if shard_of(SET_ID, i, count) == k]) for k in range(1, count + 1)]


def test_whole_parts_assemble_into_the_set_in_its_order() -> None:
    runs = whole(3)
    parts = Parts(SET_ID, "prod", "alias", tuple(reversed(runs)))
    assert problems(parts) == []
    run = assemble(parts, "g", None)
    assert [i.id for i in run.items] == IDS
    assert (run.passed_count, run.generator, run.shard) == (9, GEN, Shard(None, 3, "g"))
    assert run.started_at == "2026-12-01T10:00:00.000+00:00"
    assert run.run_id == assemble(Parts(SET_ID, "prod", "alias", tuple(runs)), "g", None).run_id  # same group: same id


def test_a_prompt_in_the_wrong_shard_or_a_position_held_twice_is_named() -> None:
    runs = whole(2)
    first, second = runs
    stray = next(i for i in IDS if shard_of(SET_ID, i, 2) == 2)
    moved = part(1, 2, [*(i.id for i in first.items), stray])
    found = problems(Parts(SET_ID, "prod", "alias", (moved, second)))
    assert f"prompts in another shard than their own: {stray}" in found
    assert any(f"number {IDS.index(stray) + 1} doubled" in p for p in found)


def test_a_part_missing_a_prompt_it_ran_is_named() -> None:
    first, second = whole(2)
    short = replace(first, items=first.items[1:])
    found = problems(Parts(SET_ID, "prod", "alias", (short, second)))
    assert found == [f"shard 1/2 (run {first.run_id}) holds other prompts than it ran"]


def test_parts_answered_by_different_models_are_not_one_scope() -> None:
    first, second = whole(2)
    other = ServingRecord("prod", "alias", "model-2")
    second = replace(second, generator=other)
    found = problems(Parts(SET_ID, "prod", "alias", (first, second)))
    assert found == [
        "its shards were answered by different models (prod/alias reported model-1; prod/alias reported model-2)"
    ]
