"""The python assertion: ``path/to/file.py:function``, relative to the set file.

At load the file must exist and define the function (the file is imported then, once per path).
When grading, the function is called with ``(response, context)`` (``context``: a dict with
prompt_id, prompt, reference, latency_ms, cost, model and vars) and returns True/False, a score in
0..1 (it holds at 0.5 or more) or ``{"pass": bool, "score": float, "reason": str}``. An exception,
or a value of none of these shapes, is that assertion's failure with its message, and undecided:
``not_python`` fails too. Plugins' assertion functions (entry point group
``evalkit.assertions``) are called and read the same way (``outcome_of``).
"""

from __future__ import annotations

import importlib.util
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalkit.assertions.excerpt import clip_words, excerpt
from evalkit.assertions.registry import AssertionValueError, Context, Outcome, Where, register

PASS_AT = 0.5


@dataclass(frozen=True, slots=True)
class PythonCheck:
    source: str
    function: Callable[..., Any]


_MODULES: dict[Path, Any] = {}


def _load(value: Any, where: Where) -> PythonCheck:
    if not isinstance(value, str) or ":" not in value:
        raise AssertionValueError("python needs 'path/to/file.py:function' (the file relative to the set file)")
    file_part, _, name = value.rpartition(":")
    if not file_part or not name.isidentifier():
        raise AssertionValueError(f"python: {value!r} is not 'path/to/file.py:function'")
    path = (where.folder / file_part).resolve()
    if not path.is_file():
        raise AssertionValueError(
            f"python: no file {file_part!r} (relative to the set file); create it or fix the path"
        )
    module = _MODULES.get(path)
    if module is None:
        spec = importlib.util.spec_from_file_location(f"evalkit_check_{len(_MODULES)}_{path.stem}", path)
        if spec is None or spec.loader is None:
            raise AssertionValueError(f"python: {file_part!r} cannot be imported as Python")
        module = importlib.util.module_from_spec(spec)
        # in sys.modules while it runs, as an import would be: dataclasses and typing look it up
        sys.modules[spec.name] = module
        try:
            spec.loader.exec_module(module)
        except (Exception, SystemExit) as exc:  # the user's own file: its failure is this assertion's load error
            del sys.modules[spec.name]
            raise AssertionValueError(f"python: importing {file_part!r} failed: {type(exc).__name__}: {exc}") from None
        _MODULES[path] = module
    function = getattr(module, name, None)
    if not callable(function):
        raise AssertionValueError(f"python: {file_part!r} has no function {name!r}")
    return PythonCheck(value, function)


def outcome_of(result: Any, name: str) -> Outcome:
    """A check function's return value read as README "Assertions" says."""
    if isinstance(result, bool):
        return Outcome(result, 1.0 if result else 0.0, "" if result else f"{name}: returned False")
    if isinstance(result, int | float):
        score = float(result)
        if not math.isfinite(score) or not 0.0 <= score <= 1.0:
            return Outcome(False, 0.0, f"{name}: returned {result!r}, not a score in 0..1", undecided=True)
        passed = score >= PASS_AT
        return Outcome(passed, score, "" if passed else f"{name}: scored {score:g}")
    if isinstance(result, dict) and isinstance(result.get("pass"), bool):
        passed = result["pass"]
        score = result.get("score", 1.0 if passed else 0.0)
        if isinstance(score, bool) or not isinstance(score, int | float) or not 0.0 <= float(score) <= 1.0:
            return Outcome(False, 0.0, f"{name}: returned a score of {score!r}, not one in 0..1", undecided=True)
        reason = result.get("reason")
        text = str(reason) if reason else ("" if passed else f"{name}: failed")
        return Outcome(passed, float(score), excerpt(text, 200)[1:-1] if text else "")  # held too: README "python"
    shown = clip_words(repr(result), 60)  # a repr is quoted already
    return Outcome(False, 0.0, f"{name}: returned {shown}; return a bool, a score or {{'pass': ...}}", undecided=True)


def call_check(function: Callable[..., Any], response: str, context: Context, name: str) -> Outcome:
    try:
        result = function(response, context.as_dict())
    except (Exception, SystemExit) as exc:  # the user's check failing is this assertion's failure, with its message
        return Outcome(False, 0.0, f"{name}: {type(exc).__name__}: {excerpt(str(exc), 160)[1:-1]}", undecided=True)
    return outcome_of(result, name)


def run(check: PythonCheck, response: str, context: Context) -> Outcome:
    return call_check(check.function, response, context, f"python {check.source}")


register("python", check=_load, evaluate=run, schema={"type": "string", "pattern": ":"},
         description="path/to/file.py:function (relative to the set file), called with (response, context).")  # fmt: skip
