"""Build ``sets/corpus/stdlib.jsonl``, a small retrieval corpus made of Python standard library docstrings.

Source: the docstrings of a fixed list of well-known standard library modules, read through ``inspect``
from the running interpreter (the corpus in this repository was built with CPython 3.11). The texts are
PSF-licensed; see ``LICENSE-PSF.txt`` next to this script.

One document per public function or class of each module (its ``__all__`` when the module defines one,
otherwise the public names defined in the module itself or in its C accelerator ``_<module>``), plus the
public methods and properties of a few well-known classes (``METHOD_CLASSES``). Names starting with ``_``
and objects without a docstring are skipped; texts longer than 4,000 characters are cut at a word boundary.
Each line is ``{"id": "<module>.<name>", "title": "<module>.<name><signature>", "text": "<docstring>"}``,
sorted by id, ids unique, UTF-8, ``ensure_ascii=False``.

Rebuild (from the repository root, with the same Python minor version for identical output)::

    python sets/corpus/build_stdlib_corpus.py
"""

from __future__ import annotations

import importlib
import inspect
import json
import re
import sys
from pathlib import Path

MODULES = (
    "argparse",
    "base64",
    "bisect",
    "calendar",
    "collections",
    "copy",
    "csv",
    "datetime",
    "difflib",
    "fnmatch",
    "functools",
    "glob",
    "gzip",
    "hashlib",
    "heapq",
    "itertools",
    "json",
    "logging",
    "math",
    "operator",
    "os.path",
    "pathlib",
    "pprint",
    "random",
    "re",
    "secrets",
    "shutil",
    "statistics",
    "string",
    "subprocess",
    "tempfile",
    "textwrap",
    "time",
    "urllib.parse",
    "uuid",
    "zipfile",
)

# Classes whose public methods and properties also become documents ("<module>.<Class>.<name>").
METHOD_CLASSES = (
    ("collections", "Counter"),
    ("collections", "deque"),
    ("datetime", "date"),
    ("datetime", "datetime"),
    ("pathlib", "Path"),
    ("pathlib", "PurePath"),
    ("zipfile", "ZipFile"),
)

MAX_TEXT = 4000
OUTPUT = Path(__file__).resolve().parent / "stdlib.jsonl"
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def public_names(module_name: str, module: object) -> list[str]:
    """The module's ``__all__`` if it has one, else public names whose objects are defined in the module."""
    exported = getattr(module, "__all__", None)
    if exported is not None:
        return sorted({name for name in exported if not name.startswith("_")})
    real_name = getattr(module, "__name__", module_name)
    homes = {module_name, real_name, "_" + real_name}  # "_bisect" holds the C versions of bisect's functions
    names = []
    for name, obj in vars(module).items():
        if name.startswith("_"):
            continue
        if getattr(obj, "__module__", None) in homes:
            names.append(name)
    return sorted(names)


def docstring(obj: object) -> str | None:
    """The object's own docstring, cleaned and capped; ``None`` when it has none."""
    doc = getattr(obj, "__doc__", None)
    if not isinstance(doc, str):
        return None
    text = inspect.cleandoc(doc).strip()
    if not text:
        return None
    if len(text) > MAX_TEXT:
        cut = text.rfind(" ", 0, MAX_TEXT)
        text = text[: cut if cut > MAX_TEXT // 2 else MAX_TEXT].rstrip() + " …"
    return text


def signature(obj: object) -> str:
    """The call signature when ``inspect`` can tell it, with memory addresses removed; else ``""``."""
    try:
        sig = str(inspect.signature(obj))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return ""
    return _ADDRESS.sub("", sig)


def document(doc_id: str, obj: object) -> dict[str, str] | None:
    text = docstring(obj)
    if text is None:
        return None
    return {"id": doc_id, "title": doc_id + signature(obj), "text": text}


def build() -> list[dict[str, str]]:
    docs: dict[str, dict[str, str]] = {}
    for module_name in MODULES:
        module = importlib.import_module(module_name)
        for name in public_names(module_name, module):
            obj = getattr(module, name, None)
            if not (inspect.isclass(obj) or inspect.isroutine(obj)):
                continue
            doc = document(f"{module_name}.{name}", obj)
            if doc is not None:
                docs.setdefault(doc["id"], doc)
    for module_name, class_name in METHOD_CLASSES:
        cls = getattr(importlib.import_module(module_name), class_name)
        for name, raw in sorted(vars(cls).items()):
            if name.startswith("_"):
                continue
            doc_id = f"{module_name}.{class_name}.{name}"
            if isinstance(raw, property):  # an attribute: the property's own docstring, no call signature
                text = docstring(raw)
                doc = None if text is None else {"id": doc_id, "title": doc_id, "text": text}
            elif isinstance(raw, (classmethod, staticmethod)) or inspect.isroutine(raw):
                doc = document(doc_id, getattr(cls, name))  # bound for classmethods: no "cls" in the signature
            else:
                continue
            if doc is not None:
                docs.setdefault(doc_id, doc)
    return [docs[doc_id] for doc_id in sorted(docs)]


def main() -> int:
    if sys.version_info[:2] != (3, 11):
        print(
            "warning: the shipped corpus and the labels in sets/stdlib_docs.yaml were made with Python 3.11; "
            f"this is {sys.version.split()[0]}, so documents and ids may differ",
            file=sys.stderr,
        )
    docs = build()
    with OUTPUT.open("w", encoding="utf-8", newline="\n") as out:
        for doc in docs:
            out.write(json.dumps(doc, ensure_ascii=False) + "\n")
    print(f"wrote {len(docs)} documents to {OUTPUT}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
