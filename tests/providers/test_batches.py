"""The providers' batch endpoints on the wire (README "Batches"), against a loopback server of
both documented APIs: requests go out in the documented shape, answers come back by custom id
whatever their order, refused requests and those an expired batch never answered are errors,
custom ids fit Anthropic's rule and map back, large runs split at the documented limits."""

from __future__ import annotations

import asyncio
import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evalkit.config import ProviderConfig
from evalkit.errors import InputError, ProviderError
from evalkit.providers.batches import LIMITS, BatchState, batch_api, custom_ids, split
from evalkit.records import CompletionRequest, Message
from tests.batchserver import BatchServer, Script

ANTHROPIC_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def instance(batch_server: BatchServer, adapter: str) -> ProviderConfig:
    return ProviderConfig(id=f"{adapter}-1", adapter=adapter, model="m", base_url=batch_server.url, max_retries=0)


def request(text: str, item: str) -> CompletionRequest:
    return CompletionRequest(messages=(Message("user", text),), model="m", item_id=item, set_id="s")


async def round_trip(
    config: ProviderConfig, texts: dict[str, str]
) -> tuple[list[BatchState], dict[str, str], dict[str, str]]:
    """Submit one batch of ``texts`` (custom id -> user text), poll to its end, read its results."""
    api = batch_api(config)
    try:
        batch_id = await api.submit([api.entry(cid, request(text, cid)) for cid, text in texts.items()])
        states = []
        while True:
            status = await api.status(batch_id)
            states.append(status.state)
            if status.state.finished:
                break
        results = await api.results(batch_id)
        answers = {cid: api.provider.parse(body, request("", cid), 0.0).text for cid, body in results.answers.items()}
        return states, answers, results.errors
    finally:
        await api.aclose()


@pytest.mark.parametrize("adapter", ["openai", "anthropic"])
def test_answers_come_back_by_custom_id_after_the_batch_was_in_progress(
    batch_server: BatchServer, adapter: str
) -> None:
    batch_server.script = Script(in_progress_polls=2)
    texts = {f"p{i}": f"question {i}" for i in range(12)}
    states, answers, errors = asyncio.run(round_trip(instance(batch_server, adapter), texts))
    assert states == [BatchState.IN_PROGRESS, BatchState.IN_PROGRESS, BatchState.ENDED]
    assert answers == {cid: f"answer: {text}" for cid, text in texts.items()}
    assert errors == {}


def test_the_results_file_is_shuffled_and_still_maps_back(batch_server: BatchServer) -> None:
    texts = {f"p{i}": f"q{i}" for i in range(30)}
    asyncio.run(round_trip(instance(batch_server, "openai"), texts))
    batch = next(iter(batch_server.batches.values()))
    order = [json.loads(line)["custom_id"] for line in batch_server.files[batch.output_file or ""].splitlines()]
    assert sorted(order) == sorted(texts)
    assert order != list(texts)


def test_openai_uploads_a_jsonl_file_with_purpose_batch_then_creates_the_batch(batch_server: BatchServer) -> None:
    asyncio.run(round_trip(instance(batch_server, "openai"), {"a": "hello"}))
    assert batch_server.paths[:2] == ["POST /v1/files", "POST /v1/batches"]
    uploaded = json.loads(batch_server.files["file-000000"])
    assert uploaded == {
        "custom_id": "a",
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {"model": "m", "messages": [{"role": "user", "content": "hello"}]},
    }
    assert "GET /v1/files/file-000002/content" in batch_server.paths  # the output file, read by its id


@pytest.mark.parametrize("adapter", ["openai", "anthropic"])
def test_refused_requests_are_errors_and_the_others_answers(batch_server: BatchServer, adapter: str) -> None:
    batch_server.script = Script(refuse=frozenset({"p1", "p3"}))
    _, answers, errors = asyncio.run(round_trip(instance(batch_server, adapter), {f"p{i}": f"q{i}" for i in range(5)}))
    assert sorted(answers) == ["p0", "p2", "p4"]
    assert sorted(errors) == ["p1", "p3"]
    assert all("the prompt was refused" in e and f"'{adapter}-1'" in e for e in errors.values())


@pytest.mark.parametrize(
    ("adapter", "outcome"), [("openai", "expired"), ("anthropic", "expired"), ("anthropic", "cancelled")]
)
def test_an_expired_or_cancelled_batch_answers_only_part(batch_server: BatchServer, adapter: str, outcome: str) -> None:
    batch_server.script = Script(outcome=outcome, answered=2)
    states, answers, errors = asyncio.run(
        round_trip(instance(batch_server, adapter), {f"p{i}": f"q{i}" for i in range(5)})
    )
    assert states[-1] is BatchState.ENDED
    assert sorted(answers) == ["p0", "p1"]
    if adapter == "anthropic":  # its results name every request: the others expired or were cancelled
        assert sorted(errors) == ["p2", "p3", "p4"]
    else:  # OpenAI's files leave them out: the caller makes them item errors (tests/cli/test_batches.py)
        assert errors == {}


def test_a_failed_openai_batch_says_why(batch_server: BatchServer) -> None:
    batch_server.script = Script(outcome="failed")

    async def status() -> str:
        api = batch_api(instance(batch_server, "openai"))
        try:
            found = await api.status(await api.submit([api.entry("a", request("x", "a"))]))
            assert found.state is BatchState.FAILED
            return found.detail
        finally:
            await api.aclose()

    assert asyncio.run(status()) == "failed: the file is malformed"


def test_results_on_another_host_are_not_fetched(batch_server: BatchServer) -> None:
    async def fetch() -> None:
        api = batch_api(instance(batch_server, "anthropic"))
        try:
            await api.client.get_bytes("http://127.0.0.2:9/v1/results", 1.0)
        finally:
            await api.aclose()

    with pytest.raises(ProviderError, match="another host"):
        asyncio.run(fetch())


def test_only_openai_and_anthropic_have_batches() -> None:
    with pytest.raises(InputError, match="replay adapter; provider batches exist for openai and anthropic"):
        batch_api(ProviderConfig(id="r", adapter="replay"))


@given(st.lists(st.text(min_size=1, max_size=90), min_size=1, max_size=40))
def test_custom_ids_fit_anthropics_rule_are_unique_and_keep_fitting_names(names: list[str]) -> None:
    ids = custom_ids(names)
    assert len(set(ids)) == len(ids) == len(names)
    assert all(ANTHROPIC_ID.match(i) for i in ids)


@given(st.lists(st.from_regex(ANTHROPIC_ID, fullmatch=True), min_size=1, max_size=40, unique=True))
def test_prompt_ids_that_fit_are_their_own_custom_ids(names: list[str]) -> None:
    assert custom_ids(names) == names


def test_custom_ids_map_prompt_ids_that_do_not_fit() -> None:
    ids = custom_ids(["opening-hours", "faq.refund policy", "x" * 80, "opening-hours"])
    assert ids[0] == "opening-hours"
    assert ids[1].startswith("faq_refund_policy-")
    assert ANTHROPIC_ID.match(ids[1])
    assert len(ids[2]) <= 64
    assert ANTHROPIC_ID.match(ids[2])
    assert ids[3] != ids[0]
    assert ANTHROPIC_ID.match(ids[3])


def test_split_keeps_each_batch_within_the_documented_limits() -> None:
    assert LIMITS == {"openai": (50_000, 200 * 1024 * 1024), "anthropic": (100_000, 256 * 1024 * 1024)}
    assert split([10] * 7, 3, 1000) == [range(0, 3), range(3, 6), range(6, 7)]
    assert split([400, 400, 400, 100], 10, 1000) == [range(0, 2), range(2, 4)]
    assert split([2000, 1], 10, 1000) == [range(0, 1), range(1, 2)]  # one request alone, whatever its size
    assert split([], 10, 1000) == []


@given(st.lists(st.integers(1, 50), max_size=60), st.integers(1, 7), st.integers(50, 200))
def test_split_covers_every_request_once_in_order_within_limits(sizes: list[int], most: int, budget: int) -> None:
    chunks = split(sizes, most, budget)
    assert [i for chunk in chunks for i in chunk] == list(range(len(sizes)))
    assert all(len(c) <= most and sum(sizes[i] for i in c) <= budget for c in chunks)
