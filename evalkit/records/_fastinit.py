"""The records' fast ``__init__``, kept apart from the records it speeds up.

A frozen dataclass's generated ``__init__`` calls ``object.__setattr__`` once per field. The one
made here sets each field through its slot's descriptor instead: about 3x faster (``ItemResult``,
18 fields: 6.7 µs -> 2.4-3.6 µs from keywords; bench/README.md, session 7),
which counts because a run builds several records per answer (at 100,000 answers the generated
one cost a second). Same parameters, defaults and factories; the record stays frozen.

``evalkit.records.base.record`` applies it unless ``EVALKIT_PLAIN_RECORDS=1`` asks for plain
dataclasses (README "Development"); a test checks the two agree.
"""

from __future__ import annotations

from dataclasses import MISSING, fields
from typing import Any, TypeVar

_R = TypeVar("_R")


def fast_init(cls: type[_R]) -> type[_R]:
    """``cls`` (a frozen, slotted dataclass without ``__post_init__`` or keyword-only fields) with
    the fast ``__init__``; TypeError for any other class."""
    slots = getattr(cls, "__slots__", None)
    params = getattr(cls, "__dataclass_params__", None)
    if slots is None or params is None or not params.frozen or hasattr(cls, "__post_init__"):
        raise TypeError(f"fast_init: {cls.__name__} is not a frozen, slotted dataclass without __post_init__")
    namespace: dict[str, object] = {"_NO_VALUE": object()}
    arguments: list[str] = []
    body: list[str] = []
    for index, spec in enumerate(fields(cls)):  # type: ignore[arg-type]  # a dataclass: checked above
        if not spec.init or spec.kw_only:
            raise TypeError(f"fast_init: {cls.__name__}.{spec.name} is keyword-only or not an argument")
        name = spec.name
        namespace[f"_set{index}"] = cls.__dict__[name].__set__
        if spec.default is not MISSING:
            namespace[f"_default{index}"] = spec.default
            arguments.append(f"{name}=_default{index}")
        elif spec.default_factory is not MISSING:
            namespace[f"_factory{index}"] = spec.default_factory
            arguments.append(f"{name}=_NO_VALUE")
            body.append(f"    if {name} is _NO_VALUE: {name} = _factory{index}()")
        else:
            arguments.append(name)
        body.append(f"    _set{index}(self, {name})")
    source = f"def __init__(self, {', '.join(arguments)}):\n" + "\n".join(body or ["    pass"]) + "\n"
    exec(compile(source, f"<fast_init {cls.__qualname__}>", "exec"), namespace)  # built from the field names alone
    init: Any = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__annotations__ = dict(cls.__init__.__annotations__)
    setattr(cls, "__init__", init)  # noqa: B010 - mypy refuses assigning a method
    return cls
