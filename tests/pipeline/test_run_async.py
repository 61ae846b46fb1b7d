"""pipeline.execute.run_async: asyncio.run without the run's results formatted on the way out."""

from __future__ import annotations

import pytest

from evalkit.pipeline.execute import run_async


class Counted:
    """A result that counts how often it is put in words."""

    reprs = 0

    def __repr__(self) -> str:
        Counted.reprs += 1
        return "Counted()"


def test_the_result_of_a_run_is_never_formatted_on_the_way_out() -> None:
    # Python 3.11's asyncio.run formats its finished main task, result included, when it
    # restores the SIGINT handler: at 100,000 results that repr took a second.
    async def main() -> list[Counted]:
        return [Counted() for _ in range(3)]

    Counted.reprs = 0
    results = run_async(main())
    assert len(results) == 3
    assert Counted.reprs == 0


def test_an_exception_of_the_coroutine_reaches_the_caller() -> None:
    async def failing() -> None:
        raise LookupError("no such prompt")

    with pytest.raises(LookupError, match="no such prompt"):
        run_async(failing())
