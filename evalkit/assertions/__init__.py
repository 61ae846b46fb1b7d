"""Assertion types: the registry (README "Assertions") and one module per family of built-in types
(text, patterns, jsondoc, call, pyfunc). Plugins register through ``register`` too."""

from evalkit.assertions.registry import (
    AssertionType,
    AssertionValueError,
    Context,
    Outcome,
    Where,
    get,
    names,
    positive_names,
    register,
    types,
)

__all__ = [
    "AssertionType",
    "AssertionValueError",
    "Context",
    "Outcome",
    "Where",
    "get",
    "names",
    "positive_names",
    "register",
    "types",
]
