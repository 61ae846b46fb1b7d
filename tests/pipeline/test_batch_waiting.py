"""Waiting for provider batches (README "Batches"): asked at once, then after 1 s, each pause
twice the last up to the poll interval; ``max_wait`` stops it with the batch still pending. The
clock and the sleep are injected: no test waits on the wall clock."""

from __future__ import annotations

from pathlib import Path

from evalkit.config import Config, ProviderConfig
from evalkit.pipeline.batches import wait
from evalkit.providers.batches import BatchState
from evalkit.records import PendingBatch
from tests.batchserver import BatchServer, Script


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0
        self.pauses: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.pauses.append(seconds)
        self.now += seconds


def submitted(batch_server: BatchServer, polls: int) -> tuple[Config, PendingBatch]:
    """One real batch on the server that stays in progress for ``polls`` status reads."""
    import asyncio

    from evalkit.providers.batches import batch_api
    from evalkit.records import CompletionRequest, Message

    batch_server.script = Script(in_progress_polls=polls)
    instance = ProviderConfig(id="oa", adapter="openai", model="m", base_url=batch_server.url, max_retries=0)

    async def submit() -> str:
        api = batch_api(instance)
        try:
            request = CompletionRequest(messages=(Message("user", "hi"),), model="m")
            return await api.submit([api.entry("a", request)])
        finally:
            await api.aclose()

    batch_id = asyncio.run(submit())
    batch = PendingBatch(
        batch_id=batch_id, submission_id="s", provider="oa", model="m", adapter="openai", state="pending",
        submitted_at="2026-12-01T00:00:00+00:00", request_count=1, set_fingerprints={}, plan={},
        custom_ids={"a": ["set", "a", 0]},
    )  # fmt: skip
    return Config(path=Path("evalkit.yaml"), providers=(instance,)), batch


def test_polls_back_off_from_one_second_doubling_up_to_the_poll_interval(batch_server: BatchServer) -> None:
    config, batch = submitted(batch_server, polls=6)
    fake = FakeTime()
    statuses = wait(config, [batch], poll_interval=5.0, max_wait=None, sleep=fake.sleep, clock=fake.clock)
    assert statuses[batch.batch_id].state is BatchState.ENDED
    assert fake.pauses == [1.0, 2.0, 4.0, 5.0, 5.0, 5.0]


def test_a_poll_interval_under_a_second_is_the_first_pause_too(batch_server: BatchServer) -> None:
    config, batch = submitted(batch_server, polls=3)
    fake = FakeTime()
    wait(config, [batch], poll_interval=0.25, max_wait=None, sleep=fake.sleep, clock=fake.clock)
    assert fake.pauses == [0.25, 0.25, 0.25]


def test_max_wait_stops_waiting_and_the_batch_is_still_in_progress(batch_server: BatchServer) -> None:
    config, batch = submitted(batch_server, polls=1000)
    fake = FakeTime()
    seen: list[tuple[int, float]] = []
    statuses = wait(
        config, [batch], poll_interval=4.0, max_wait=10.0, sleep=fake.sleep, clock=fake.clock,
        on_status=lambda b, status, waited: seen.append((status.done, waited)),
    )  # fmt: skip
    assert statuses[batch.batch_id].state is BatchState.IN_PROGRESS
    assert fake.pauses == [1.0, 2.0, 4.0, 3.0]  # the last pause ends at max_wait exactly
    assert fake.now == 10.0
    assert [w for _, w in seen] == [0.0, 1.0, 3.0, 7.0, 10.0]


def test_batches_just_submitted_are_first_asked_after_a_second(batch_server: BatchServer) -> None:
    config, batch = submitted(batch_server, polls=2)
    fake = FakeTime()
    reads: list[float] = []
    wait(
        config, [batch], poll_interval=5.0, max_wait=None, sleep=fake.sleep, clock=fake.clock, just_submitted=True,
        on_status=lambda b, status, waited: reads.append(waited),
    )  # fmt: skip
    assert fake.pauses == [1.0, 2.0, 4.0]  # three status reads, the first after 1 s
    assert batch_server.batches[batch.batch_id].polls == 3
