"""The one retry policy for model and retriever calls.

Transient faults (408, 409, 429, 5xx, connection errors, timeouts) are retried with exponential
backoff and full jitter, honouring ``Retry-After`` (seconds or an HTTP date; the JSON client
also holds off every other call to the endpoint until then). ``max_retries``
counts the retries after the first attempt. Errors no retry can fix propagate at once.
"""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import TypeVar

from evalkit.errors import ProviderError

T = TypeVar("T")
RETRYABLE_STATUS = frozenset({408, 409, 429})
MAX_RETRY_AFTER_S = 120.0


class TransientError(ProviderError):
    """A fault worth retrying; ``retry_after`` is the server's requested wait, if any."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def is_retryable_status(status: int) -> bool:
    return status in RETRYABLE_STATUS or 500 <= status <= 599


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds to wait from a Retry-After header: delta-seconds or an HTTP date."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - (now or datetime.now(UTC))).total_seconds()
    if math.isnan(seconds):
        return None
    return min(max(seconds, 0.0), MAX_RETRY_AFTER_S)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_retries: int = 4
    backoff_s: float = 0.5
    max_backoff_s: float = 30.0

    def delay(self, retry: int, retry_after: float | None) -> float:
        """Wait before retry number ``retry`` (0-based)."""
        if retry_after is not None:
            return retry_after
        ceiling = min(self.max_backoff_s, self.backoff_s * (2**retry))
        return random.uniform(ceiling / 2, ceiling)

    async def run(self, attempt: Callable[[], Awaitable[T]]) -> T:
        """Call ``attempt`` until it succeeds, a non-transient error occurs, or retries run out."""
        retry = 0
        while True:
            try:
                return await attempt()
            except TransientError as exc:
                if retry >= self.max_retries:
                    attempts = retry + 1
                    raise ProviderError(f"{exc} (after {attempts} attempt{'s' if attempts > 1 else ''})") from exc
                await asyncio.sleep(self.delay(retry, exc.retry_after))
                retry += 1
