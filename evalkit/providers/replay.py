"""Recorded answers from a JSONL file, for grading pre-generated outputs.

Each line is ``{"id": <prompt id>, "response": <text>, "model": <reported model>}``; an optional
``"set"`` scopes a record to one set id (it wins over an unscoped record for the same prompt).
A record without ``model`` answers with no serving proof. The file is read and checked once,
before anything runs: a malformed line is an input error naming file:line.
"""

from __future__ import annotations

from pathlib import Path

from evalkit.config import ProviderConfig
from evalkit.errors import InputError, ProviderError
from evalkit.jsonl import json_lines
from evalkit.records import Completion, CompletionRequest, ServingRecord


class ReplayProvider:
    adapter = "replay"

    def __init__(self, config: ProviderConfig) -> None:
        if config.path is None:
            raise InputError(f"provider '{config.id}': the replay adapter needs path: (a JSONL answers file)")
        self.instance_id = config.id
        self.path = config.path
        self.records = read_answers(config.path)

    async def complete(self, request: CompletionRequest) -> Completion:
        record = self.records.get((request.set_id, request.item_id)) or self.records.get(("", request.item_id))
        if record is None:
            raise ProviderError(
                f"provider '{self.instance_id}': no recorded answer for '{request.item_id}' in {self.path}"
            )
        response, model = record
        return Completion(
            text=response,
            serving=ServingRecord(self.instance_id, request.model, model),
            adapter=self.adapter,
        )

    async def aclose(self) -> None:
        return None


def read_answers(path: Path) -> dict[tuple[str, str], tuple[str, str | None]]:
    """(set id or '', prompt id) -> (response, reported model)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise InputError(
            f"{path}: cannot read the replay answers file ({exc.strerror}); check the instance's path: in evalkit.yaml"
        ) from exc
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: the replay answers file is not UTF-8 text ({exc.reason}); re-encode it") from exc
    records: dict[tuple[str, str], tuple[str, str | None]] = {}
    first_line: dict[tuple[str, str], int] = {}
    for number, record, unreadable in json_lines(lines):
        if unreadable is not None:
            column, problem = unreadable
            raise InputError(f"{path}:{number}:{column}: {problem}")
        if not isinstance(record, dict):
            raise InputError(f"{path}:{number}:1: expected a JSON object per line")
        item_id, response = record.get("id"), record.get("response")
        model, set_id = record.get("model"), record.get("set", "")
        if not isinstance(item_id, str) or not item_id:
            raise InputError(f"{path}:{number}:1: missing string field 'id'")
        if not isinstance(response, str):
            raise InputError(f"{path}:{number}:1: missing string field 'response'")
        if model is not None and not isinstance(model, str):
            raise InputError(f"{path}:{number}:1: 'model' must be a string")
        if not isinstance(set_id, str):
            raise InputError(f"{path}:{number}:1: 'set' must be a string")
        key = (set_id, item_id)
        if key in first_line:  # which answer was meant? (a corpus refuses a repeated id the same way)
            scope = f" in set '{set_id}'" if set_id else ""
            raise InputError(
                f"{path}:{number}:1: a second answer for prompt '{item_id}'{scope} (first at line {first_line[key]}); "
                "keep one"
            )
        first_line[key] = number
        records[key] = (response, model or None)
    return records
