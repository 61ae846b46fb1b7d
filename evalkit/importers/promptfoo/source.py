"""Where things were written, and reading the files a promptfoo config refers to.

Every value keeps its origin (``Loc``): the YAML document and data path (its line comes from the
node positions of ``evalkit.sets.yamldoc``), or the line of a CSV row or JSONL record. A problem
that stops the import is a SetError at that place (exit 2); anything merely not converted is a
finding at that place.
"""

from __future__ import annotations

import csv
import glob
import io
import json
import os
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalkit.errors import Issue, SetError
from evalkit.jsonl import json_lines
from evalkit.sets.yamldoc import Document, format_path, load_document, parse_document

JS_EXTENSIONS = (".js", ".cjs", ".mjs", ".ts", ".cts", ".mts", ".jsx", ".tsx")


@dataclass(frozen=True, slots=True)
class Loc:
    """A place in a file: a data path in a YAML/JSON document, or a fixed line."""

    file: str
    doc: Document | None = field(default=None, compare=False, repr=False)
    path: tuple[str | int, ...] = ()
    fixed_line: int = 0
    key: bool = False  # the place of the last part's key, not of its value

    def at(self, *parts: str | int) -> Loc:
        return Loc(self.file, self.doc, (*self.path, *parts), self.fixed_line)

    def key_of(self, *parts: str | int) -> Loc:
        """The place of the key ``parts`` ends with (a mapping value may start on the next line)."""
        return Loc(self.file, self.doc, (*self.path, *parts), self.fixed_line, key=True)

    @property
    def line(self) -> int:
        if self.doc is not None:
            return self.doc.position(self.path, key=self.key)[0]
        return self.fixed_line

    def __str__(self) -> str:
        return f"{self.file}:{self.line}" if self.line else self.file

    def error(self, message: str) -> SetError:
        """Stop the import: invalid input at this place."""
        col = self.doc.position(self.path, key=self.key)[1] if self.doc is not None else 1  # a row: its start
        return SetError([Issue(self.file, self.line, col if self.line else 0, format_path(self.path), message)])


def shown(path: Path) -> str:
    """``path`` as the user would write it: relative to the working folder when inside it."""
    try:
        relative = os.path.relpath(path)
    except ValueError:  # another drive
        return str(path)
    return str(path.absolute()) if relative.startswith("..") else relative


def file_reference(value: str) -> str:
    return value[len("file://") :] if value.startswith("file://") else value


def split_function(reference: str) -> tuple[str, str | None]:
    """``path.py:name`` -> (path.py, name); a drive letter's colon is not a function."""
    head, sep, name = reference.rpartition(":")
    if sep and head and len(head) > 1 and "/" not in name and "\\" not in name:
        return head, name
    return reference, None


class OutsideFolder(Exception):
    """A file the config names lies outside the folders the import may read; the message says
    which, and what to do."""


@dataclass(frozen=True, slots=True)
class Folders:
    """The folders an import reads files from: the config's own, and those given with
    ``--allow-outside`` (a hostile config must not copy other files into the sets it writes)."""

    config: Path
    allowed: tuple[Path, ...] = ()

    def check(self, path: Path, named: str) -> None:
        """OutsideFolder unless ``path`` (symbolic links followed) is inside one of the folders."""
        real = path.resolve()
        if not any(real.is_relative_to(folder.resolve()) for folder in (self.config, *self.allowed)):
            raise OutsideFolder(
                f"{named} reads {shown(path)}, outside the config's folder {shown(self.config) or '.'}; "
                f"move it there, or pass --allow-outside {shown(path.parent)}"
            )


FOLDERS: ContextVar[Folders | None] = ContextVar("FOLDERS", default=None)  # set by import_promptfoo


def inside(path: Path, named: str) -> Path:
    """``path``, when the running import may read it (OutsideFolder if not); called outside an
    import (a unit test), any path."""
    folders = FOLDERS.get()
    if folders is not None:
        folders.check(path, named)
    return path


def expand(base: Path, pattern: str, where: Loc) -> list[Path]:
    """The files ``pattern`` (a path or glob, relative to ``base``) names, sorted; none is an error,
    and so is one outside the folders the import may read."""
    full = base / pattern
    if any(c in pattern for c in "*?["):
        found = sorted(Path(p) for p in glob.glob(str(full), recursive=True) if Path(p).is_file())
        if not found:
            raise where.error(f"no file matches {pattern!r} (relative to {shown(base) or '.'})")
    elif not full.is_file():
        raise where.error(f"file not found: {pattern!r} (relative to {shown(base) or '.'}); check the path")
    else:
        found = [full]
    try:
        return [inside(path, f"file://{pattern}") for path in found]
    except OutsideFolder as exc:
        raise where.error(str(exc)) from None


def read_text(path: Path, where: Loc) -> str:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise where.error(f"cannot read {shown(path)}: {exc.strerror}") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise where.error(f"{shown(path)} is not UTF-8 text; save it as UTF-8") from None


def read_yaml(path: Path) -> Document:
    """A YAML (or JSON) file with positions; a YAML error is a SetError naming file:line:col."""
    return load_document(path, shown(path))


def parse_yaml_text(text: str, where: Loc) -> Any:
    """A YAML string inside a config (an is-json schema written as text)."""
    return parse_document(text, str(where)).data


@dataclass(frozen=True, slots=True)
class Row:
    """One CSV row or JSONL record and the line it starts on."""

    data: Any
    loc: Loc


def read_csv(path: Path, where: Loc) -> list[Row]:
    """Rows of a CSV file with a header, as promptfoo's reader (csv-parse, columns, BOM) gives them."""
    text = read_text(path, where)
    name = shown(path)
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader, None)
        if header is None:
            return []
        rows, start = [], reader.line_num + 1
        for cells in reader:
            if cells:  # an empty line is no row
                if len(cells) != len(header):
                    raise Loc(name, fixed_line=start).error(
                        f"{len(cells)} fields where the header has {len(header)}; quote a field holding commas"
                    )
                rows.append(
                    Row(dict(zip((h.strip() for h in header), cells, strict=True)), Loc(name, fixed_line=start))
                )
            start = reader.line_num + 1
    except csv.Error as exc:
        raise Loc(name, fixed_line=reader.line_num).error(f"CSV error: {exc}") from None
    return rows


def read_jsonl(path: Path, where: Loc) -> list[Row]:
    """One row per non-blank line, read as evalkit reads every JSON Lines file (evalkit.jsonl)."""
    name = shown(path)
    rows = []
    for number, value, unreadable in json_lines(read_text(path, where).split("\n")):
        if unreadable is not None:
            column, problem = unreadable
            raise SetError([Issue(name, number, column, "", problem)])
        rows.append(Row(value, Loc(name, fixed_line=number)))
    return rows


def refuse_deep_json(text: str, where: Loc) -> None:
    """Stop at JSON nested too deeply to read (a RecursionError); any other text is left as it is."""
    try:
        json.loads(text)
    except RecursionError:
        raise where.error("JSON nested too deeply to read; flatten it") from None
    except ValueError:  # not JSON: read as text
        pass
