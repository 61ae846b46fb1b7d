"""The evalkit exception tree.

Core code raises these; the CLI catches ``EvalkitError`` once, prints one ``Error: ...`` line
and exits with the class's ``exit_code``. Anything else is a bug and keeps its traceback.

    EvalkitError
    ├── InputError (2)            the user's input is invalid; nothing was called or stored
    │   ├── SetError              a set or config file failed to load (carries file:line:col issues)
    │   ├── ToleranceError        a tolerance outside 0..1 or not a finite number
    │   └── UnknownNameError      an unknown set, grader, provider or retriever id
    └── RunError (3)              the run could not complete
        ├── ProviderError         a model call failed after its retries (per item: data, not a crash)
        │   └── ProviderRefused   the endpoint refused us (auth, unknown model): the run aborts
        │   └── EmbeddingError    embedding texts failed (``refused``: no retry can fix it)
        │   └── BatchUnanswered   a provider batch refused a request or ended without answering it
        ├── RetrieverError        a retriever call failed
        ├── ModelMissingError     the local model file or its runtime is not installed
        ├── ShardsIncomplete      evalkit gate: a run group's shards are missing, doubled or inconsistent
        └── StoreError            the database could not be opened, locked too long, or failed
            ├── SchemaOutdatedError  read-only open of an older schema
            └── RunsNotStored     runs were carried out, then could not be stored: still reported

Exit code 1 (a quality gate failed) is not an error: the CLI decides it from the run's verdict.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

LITERAL_LIMIT = 80
# a run of characters with no space, quote, slash or punctuation that structures a message: a
# value echoed from the input (an id, a number, a file name); a path is cut only in a part
# between slashes that is that long
_LONG_LITERAL = re.compile(rf"[^\s'\"/:,;()]{{{LITERAL_LIMIT + 1},}}")


def clip_literals(text: str) -> str:
    """``text`` with every literal longer than LITERAL_LIMIT characters (a 5,000-digit number, a
    100,000-character id) cut to its start and "…": an error line stays one readable line."""
    return _LONG_LITERAL.sub(lambda m: m.group()[: LITERAL_LIMIT - 1] + "…", text)


class EvalkitError(Exception):
    """Base of every error evalkit reports to a user; long literals in its text are cut."""

    exit_code: int = 3

    def __str__(self) -> str:
        return clip_literals(super().__str__())


class InputError(EvalkitError):
    """Invalid input: usage, YAML or schema error, unknown name, invalid tolerance."""

    exit_code = 2


@dataclass(frozen=True, slots=True)
class Issue:
    """One problem in a file, located by line and column (1-based) and a data path."""

    file: str
    line: int
    col: int
    path: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}:{self.col}" if self.line else self.file
        text = f"{where}: {self.path}: {self.message}" if self.path else f"{where}: {self.message}"
        return clip_literals(text)


class SetError(InputError):
    """A set or config file is invalid; carries every issue found, in file order."""

    def __init__(self, issues: list[Issue]) -> None:
        self.issues = list(issues)
        first = str(self.issues[0]) if self.issues else "invalid file"
        more = len(self.issues) - 1
        if more > 0:
            first += f" (and {more} more; run `{_validate_command(self.issues)}` to list them)"
        super().__init__(first)


def _validate_command(issues: list[Issue]) -> str:
    """The ``evalkit validate`` command that lists these issues: with their files, since plain
    ``evalkit validate`` only looks at the config and its set folders (a data file such as a CSV
    is not validated on its own, so then the plain command stands)."""
    import shlex

    files = list(dict.fromkeys(issue.file for issue in issues))
    if not all(f.endswith((".yaml", ".yml", ".json", ".jsonl")) for f in files):
        return "evalkit validate"
    return " ".join(["evalkit validate", *(shlex.quote(f) for f in files)])


class ToleranceError(InputError):
    """A tolerance that is not a finite number in 0..1."""


class UnknownNameError(InputError):
    """An unknown set, grader, provider or retriever id."""


class RunError(EvalkitError):
    """The run could not complete."""

    exit_code = 3


class ProviderError(RunError):
    """A model call failed after its retries."""


class ProviderRefused(ProviderError):
    """The endpoint refused the request in a way no retry can fix (401/403/404)."""


class EmbeddingError(ProviderError):
    """Embedding texts failed (README "Embeddings"): the ``similar`` assertion it serves is
    undecided and its item errored with this reason. ``refused``: the endpoint refused us (auth,
    unknown model), which no other item's call will fix."""

    def __init__(self, message: str, *, refused: bool = False) -> None:
        super().__init__(message)
        self.refused = refused


class BatchUnanswered(ProviderError):
    """A provider batch refused this request, or ended without answering it (README "Batches"):
    that is its answer; nothing asks it again as a call (a judge does not retry it as plain text)."""


class RetrieverError(RunError):
    """A retriever call failed."""


class ModelMissingError(RunError):
    """The local model file or its runtime is not installed."""


class ShardsIncomplete(RunError):
    """``evalkit gate`` found a run group incomplete or inconsistent: nothing was gated."""


class StoreError(RunError):
    """The database could not be opened or written."""


class RunsNotStored(StoreError):
    """Runs were carried out but the database refused them (held too long, disk full): ``runs``
    holds every run of the command, the unstored ones not compared, to be reported anyway."""

    def __init__(self, message: str, runs: tuple[Any, ...]) -> None:
        super().__init__(message)
        self.runs = runs


class SchemaOutdatedError(StoreError):
    """A read-only open found migrations pending: the database must be opened writable once."""
