"""An HTTP retriever: POST ``{"question", "limit"}`` -> ``{"ids": [...], "provenance": {...}?}``.

Calls go through the providers' JSON client and retry policy (408/409/429/5xx, timeouts and
connection errors retried with backoff; 401/403/404 abort).
"""

from __future__ import annotations

from evalkit.config import RetrieverConfig
from evalkit.errors import RetrieverError
from evalkit.providers.http import JsonClient, check_url
from evalkit.providers.retry import RetryPolicy
from evalkit.records import Ranking


class HttpRetriever:
    def __init__(self, config: RetrieverConfig) -> None:
        assert config.url is not None
        check_url(config.url, f"retriever '{config.id}': url")
        self.id = config.id
        hints = {
            401: "the endpoint refused the request's credentials; check the retriever service",
            403: "the endpoint refused the request's credentials; check the retriever service",
            404: "check the retriever's url in evalkit.yaml",
        }
        retry = RetryPolicy(max_retries=config.max_retries, backoff_s=config.retry_backoff_s)
        self.client = JsonClient(
            f"retriever '{config.id}'", config.url, timeout_s=config.timeout_s, hints=hints, retry=retry
        )

    async def search(self, question: str, limit: int) -> Ranking:
        body, latency_ms = await self.client.call("", {"question": question, "limit": limit})
        ids = body.get("ids")
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            raise RetrieverError(f"retriever '{self.id}': the response needs \"ids\": a list of strings")
        provenance = body.get("provenance")
        return Ranking(tuple(ids), provenance if isinstance(provenance, dict) else {}, latency_ms)

    async def aclose(self) -> None:
        await self.client.aclose()
