"""Recorded answers from a JSONL file, for grading pre-generated outputs.

Each line is ``{"id": <prompt id>, "response": <text>, "model": <reported model>}``; an optional
``"set"`` scopes a record to one set id (it wins over an unscoped record for the same prompt), an
optional ``"tool_calls"`` (``[{"name", "arguments"}]``) gives the answer's tool calls.
A record without ``model`` answers with no serving proof. The file is read and checked once,
before anything runs: a malformed line is an input error naming file:line.
"""

from __future__ import annotations

from evalkit.answers import read_answers
from evalkit.config import ProviderConfig
from evalkit.errors import InputError, ProviderError
from evalkit.records import Completion, CompletionRequest, ServingRecord


class ReplayProvider:
    adapter = "replay"

    def __init__(self, config: ProviderConfig) -> None:
        if config.path is None:
            raise InputError(f"provider '{config.id}': the replay adapter needs path: (a JSONL answers file)")
        self.instance_id = config.id
        self.path = config.path
        self.answers = read_answers(config.path)
        self._serving: dict[tuple[str, str | None], ServingRecord] = {}  # one record per alias and model

    async def complete(self, request: CompletionRequest) -> Completion:
        record = self.answers.get(request.set_id, request.item_id)
        if record is None:
            raise ProviderError(
                f"provider '{self.instance_id}': no recorded answer for '{request.item_id}' in {self.path}"
            )
        response, model, calls = record
        serving = self._serving.get((request.model, model))
        if serving is None:
            serving = self._serving[request.model, model] = ServingRecord(self.instance_id, request.model, model)
        raw = {"tool_calls": calls} if calls else None
        return Completion(text=response, serving=serving, adapter=self.adapter, raw=raw)

    async def aclose(self) -> None:
        return None
