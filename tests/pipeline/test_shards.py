"""The shard partition and the shard options (README "Larger suites: shards and batches")."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evalkit.errors import InputError
from evalkit.pipeline.shards import ci_run_group, parse_shard, run_group, shard_of
from tests.conftest import REPO

IDS = st.lists(st.text(min_size=1, max_size=12), min_size=1, max_size=40, unique=True)


@given(IDS, st.integers(min_value=1, max_value=256))
def test_every_prompt_is_in_exactly_one_shard_in_range(ids: list[str], count: int) -> None:
    for prompt_id in ids:
        assert 1 <= shard_of("acme.faq", prompt_id, count) <= count


@given(IDS, st.text(min_size=1, max_size=12), st.integers(min_value=1, max_value=16))
def test_adding_a_prompt_moves_no_other(ids: list[str], added: str, count: int) -> None:
    before = {p: shard_of("acme.faq", p, count) for p in ids}
    after = {p: shard_of("acme.faq", p, count) for p in [*ids, added]}
    assert all(after[p] == shard for p, shard in before.items())


def test_the_partition_is_the_same_in_another_process() -> None:
    """No per-process hash seed: another machine puts each prompt in the same shard."""
    ids = [f"p{i}" for i in range(50)]
    here = [shard_of("acme.faq", p, 8) for p in ids]
    code = "from evalkit.pipeline.shards import shard_of; print([shard_of('acme.faq', f'p{i}', 8) for i in range(50)])"
    there = subprocess.run(
        [sys.executable, "-c", code], env={"PYTHONPATH": str(REPO), "PYTHONHASHSEED": "123"},
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout  # fmt: skip
    assert there.strip() == str(here)


def test_the_set_id_is_part_of_the_hash_and_shards_are_even() -> None:
    ids = [f"p{i}" for i in range(8000)]
    sizes = [sum(1 for p in ids if shard_of("acme.faq", p, 8) == k) for k in range(1, 9)]
    assert min(sizes) > 900
    assert max(sizes) < 1100
    moved = sum(1 for p in ids if shard_of("acme.faq", p, 8) != shard_of("acme.other", p, 8))
    assert moved > 6000


@pytest.mark.parametrize(
    ("text", "expected"), [("1/1", (1, 1)), ("2/8", (2, 8)), (" 3 / 4 ", (3, 4)), ("256/256", (256, 256))]
)
def test_a_shard_is_i_of_n(text: str, expected: tuple[int, int]) -> None:
    assert parse_shard(text) == expected


@pytest.mark.parametrize("text", ["0/4", "5/4", "1/257", "1/0", "2", "a/b", "1/2/3", "", "-1/4", "1.5/4"])
def test_a_shard_out_of_range_or_malformed_is_an_input_error(text: str) -> None:
    with pytest.raises(InputError, match="--shard"):
        parse_shard(text)


def test_the_run_group_comes_from_the_option_then_github_then_gitlab() -> None:
    github = {"GITHUB_RUN_ID": "42", "GITHUB_RUN_ATTEMPT": "2", "CI_PIPELINE_ID": "7"}
    assert run_group("mine", "x", github) == "mine"
    assert run_group(None, "x", github) == "42-2"
    assert ci_run_group({"GITHUB_RUN_ID": "42"}) == "42-1"
    assert run_group(None, "x", {"CI_PIPELINE_ID": "7"}) == "7"
    with pytest.raises(InputError, match="pass --run-group ID"):
        run_group(None, "--shard", {})
    with pytest.raises(InputError, match="--run-group"):
        run_group("  ", "--shard", github)
