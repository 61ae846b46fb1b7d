"""What an import did: the sets written, the provider entries to add, what was not converted
(each with its file:line and a hint), and the counts."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from evalkit.importers.yamlout import dump

Kind = Literal["not_converted", "partly", "note"]
_TITLES = {
    "not_converted": "Not converted:",
    "partly": "Partly converted:",
    "note": "Differences to know (evalkit's meaning, not promptfoo's, in edge cases):",
}


@dataclass(frozen=True, slots=True)
class Finding:
    kind: Kind
    where: str  # file:line ("" for a note about the whole import)
    what: str
    hint: str

    def line(self) -> str:
        text = f"{self.what}: {self.hint}" if self.what else self.hint
        return f"  {self.where}: {text}" if self.where else f"  {text}"


@dataclass(frozen=True, slots=True)
class WrittenSet:
    path: Path
    set_id: str
    prompts: int
    unchanged: bool


@dataclass
class ImportReport:
    config: str
    sets: list[WrittenSet] = field(default_factory=list)
    providers: list[dict[str, Any]] = field(default_factory=list)
    instances: dict[str, str] = field(
        default_factory=dict
    )  # a provider's promptfoo id (graded.instance_key) -> its entry's id
    params: dict[str, Any] = field(default_factory=dict)
    tools: list[dict[str, Any]] = field(default_factory=list)  # the sets' tools: (a provider's config.tools)
    files: dict[Path, str] = field(default_factory=dict)  # written beside the sets (python provider wrappers)
    findings: list[Finding] = field(default_factory=list)
    tests: int = 0
    tests_converted: int = 0
    tests_partly: int = 0
    assertions: int = 0
    assertions_converted: int = 0
    dropped: Counter[str] = field(default_factory=Counter)  # not converted, by promptfoo type

    def add(self, kind: Kind, where: object, what: str, hint: str) -> None:
        finding = Finding(kind, str(where), what, hint)
        if finding not in self.findings:
            self.findings.append(finding)

    @property
    def prompt_count(self) -> int:
        return sum(s.prompts for s in self.sets)

    def summary(self) -> str:
        partly = f" ({self.tests_partly} partly)" if self.tests_partly else ""
        sets = f"{len(self.sets)} set{'s' if len(self.sets) != 1 else ''}"
        return (
            f"Converted {self.tests_converted} of {self.tests} test{'s' if self.tests != 1 else ''}{partly} into "
            f"{self.prompt_count} prompt{'s' if self.prompt_count != 1 else ''} in {sets}; "
            f"{self.assertions_converted} of {self.assertions} assertion{'s' if self.assertions != 1 else ''} converted"
            f"{self._dropped()}."
        )

    def _dropped(self) -> str:
        """Every assertion not converted, by type, most first: `` (not converted: 2 llm-rubric, 1 javascript)``."""
        if not self.dropped:
            return ""
        return f" (not converted: {', '.join(f'{n} {kind}' for kind, n in self.dropped.most_common())})"

    def lines(self) -> list[str]:
        """The report as printed."""
        out = [
            f"{'Unchanged' if s.unchanged else 'Wrote'} {s.path} (set {s.set_id}, {s.prompts} prompt{'s' if s.prompts != 1 else ''})"
            for s in self.sets
        ]
        out.extend(f"Wrote {path} (calls the promptfoo python provider unchanged)" for path in self.files)
        for kind in ("not_converted", "partly", "note"):
            found = [f for f in self.findings if f.kind == kind]
            if found:
                out.append(_TITLES[kind])
                out.extend(f.line() for f in found)
        if self.providers:
            out.append("Add to evalkit.yaml (API keys stay in the environment variables named):")
            text = dump({"default_provider": self.providers[0]["id"], "providers": self.providers})
            out.extend("  " + line if line else "" for line in text.rstrip("\n").split("\n"))
        out.append(self.summary())
        return out
