"""The records' one decorator, ``@record`` (README "Development"): the fast ``__init__`` of
``evalkit.records._fastinit`` and the plain dataclass that ``EVALKIT_PLAIN_RECORDS=1`` gives
instead must agree on everything a caller can see."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import os
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import evalkit
from evalkit import records
from evalkit.assertions import registry
from evalkit.records._fastinit import fast_init
from tests.conftest import REPO

PROPERTIES = settings(max_examples=150, deadline=None, database=None)
SWITCH = "EVALKIT_PLAIN_RECORDS"


def _of_records(name: str) -> bool:
    return name == "evalkit.records" or name.startswith("evalkit.records.")


def family(switch: str) -> ModuleType:
    """``evalkit.records`` imported afresh with the switch set to ``switch``; the process's own
    modules are put back afterwards."""
    saved = {name: module for name, module in sys.modules.items() if _of_records(name)}
    before = os.environ.get(SWITCH)
    os.environ[SWITCH] = switch
    for name in saved:
        del sys.modules[name]
    try:
        return importlib.import_module("evalkit.records")
    finally:
        if before is None:
            del os.environ[SWITCH]
        else:
            os.environ[SWITCH] = before
        for name in [name for name in sys.modules if _of_records(name)]:
            del sys.modules[name]
        sys.modules.update(saved)
        evalkit.records = saved["evalkit.records"]  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def families() -> tuple[ModuleType, ModuleType]:
    return family(""), family("1")


def record_classes(module: ModuleType) -> list[type]:
    return [v for v in vars(module).values() if isinstance(v, type) and dataclasses.is_dataclass(v)]


def is_fast(cls: type) -> bool:
    return cls.__init__.__code__.co_filename == f"<fast_init {cls.__qualname__}>"  # type: ignore[misc]


def test_every_record_is_fast_unless_the_switch_is_on(families: tuple[ModuleType, ModuleType]) -> None:
    fast, plain = families
    assert len(record_classes(fast)) > 25
    assert all(is_fast(cls) for cls in record_classes(fast))
    assert not any(is_fast(cls) for cls in record_classes(plain))
    for cls in record_classes(plain):
        params = cls.__dataclass_params__  # type: ignore[attr-defined]
        assert params.frozen, cls
        assert "__slots__" in vars(cls), cls
    # this process's records (and the assertion registry's) follow the switch as it was at import
    mine = [*record_classes(records), registry.Outcome, registry.Context, registry.AssertionType]
    assert [is_fast(cls) for cls in mine] == [not records.PLAIN_RECORDS] * len(mine)


VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.text(max_size=8),
    st.tuples(st.integers()),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
COMPARED = ["Prompt", "PromptSet", "Usage", "Completion", "ItemResult", "Comparison", "BaselineEntry", "Ranking"]


def _outcome(call: Callable[[], object]) -> object:
    try:
        return call()
    except Exception as error:
        return type(error)


@PROPERTIES
@given(name=st.sampled_from(COMPARED), data=st.data())
def test_fast_and_plain_records_agree(families: tuple[ModuleType, ModuleType], name: str, data: Any) -> None:
    fast_cls, plain_cls = getattr(families[0], name), getattr(families[1], name)
    specs = dataclasses.fields(fast_cls)
    positional = data.draw(st.booleans())
    given_ = {
        spec.name: data.draw(VALUES)
        for spec in specs
        if positional
        or (spec.default is dataclasses.MISSING and spec.default_factory is dataclasses.MISSING)
        or data.draw(st.booleans())
    }

    def build(cls: Any) -> Any:
        return cls(*given_.values()) if positional else cls(**given_)

    fast, plain = build(fast_cls), build(plain_cls)
    values = [getattr(fast, spec.name) for spec in specs]
    # a default may be a record of its own family: the two are compared by what they show
    assert [repr(v) for v in values] == [repr(getattr(plain, spec.name)) for spec in specs]
    assert repr(fast) == repr(plain)
    assert fast == build(fast_cls)
    assert plain == build(plain_cls)
    assert _outcome(lambda: hash(fast)) == _outcome(lambda: hash(plain))
    victim = data.draw(st.sampled_from(specs)).name
    for instance in (fast, plain):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(instance, victim, 1)
        with pytest.raises(dataclasses.FrozenInstanceError):
            delattr(instance, victim)
    for spec in specs:  # a factory runs per instance, in both
        if spec.name not in given_ and spec.default_factory is not dataclasses.MISSING:
            assert getattr(build(fast_cls), spec.name) is not getattr(fast, spec.name)
            assert getattr(build(plain_cls), spec.name) is not getattr(plain, spec.name)
    assert _outcome(lambda: fast_cls(*values, 1)) is _outcome(lambda: plain_cls(*values, 1)) is TypeError
    if specs[0].default is dataclasses.MISSING and specs[0].default_factory is dataclasses.MISSING:
        assert _outcome(fast_cls) is _outcome(plain_cls) is TypeError


def test_the_signatures_agree(families: tuple[ModuleType, ModuleType]) -> None:
    fast, plain = families
    for fast_cls, plain_cls in zip(record_classes(fast), record_classes(plain), strict=True):
        fast_sig, plain_sig = inspect.signature(fast_cls), inspect.signature(plain_cls)
        assert list(fast_sig.parameters) == list(plain_sig.parameters), fast_cls
        by_factory = {f.name for f in dataclasses.fields(fast_cls) if f.default_factory is not dataclasses.MISSING}
        for name, parameter in fast_sig.parameters.items():
            if name not in by_factory:
                assert repr(parameter.default) == repr(plain_sig.parameters[name].default), (fast_cls, name)


# --- fast_init itself, on classes of its own ---------------------------------------------------


def test_fast_init_keeps_the_dataclass_contract() -> None:
    import dataclasses
    import inspect

    from evalkit.records import Prompt

    @dataclasses.dataclass(frozen=True, slots=True)
    class Generated:
        a: int
        b: str = "x"
        c: dict[str, int] = dataclasses.field(default_factory=dict)

    @fast_init
    @dataclasses.dataclass(frozen=True, slots=True)
    class Quick:
        a: int
        b: str = "x"
        c: dict[str, int] = dataclasses.field(default_factory=dict)

    parameters = inspect.signature(Quick).parameters
    assert list(parameters) == list(inspect.signature(Generated).parameters) == ["a", "b", "c"]
    assert parameters["a"].default is inspect.Parameter.empty
    assert parameters["b"].default == "x"
    one, two = Quick(1), Quick(2, "y", {"k": 1})
    assert (one.a, one.b, one.c) == (1, "x", {})
    assert (two.a, two.b, two.c) == (2, "y", {"k": 1})
    assert Quick(1).c is not one.c  # a factory runs per instance
    assert Quick(1) == one
    assert Quick(1, "x", {"k": 1}) != Quick(1, "x", {"k": 2})
    assert Quick(a=3, b="z").b == "z"
    with pytest.raises(dataclasses.FrozenInstanceError):
        one.a = 5  # type: ignore[misc]
    with pytest.raises(TypeError):
        Quick()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Quick(1, "x", {}, 4)  # type: ignore[call-arg]
    assert dataclasses.replace(two, a=9) == Quick(9, "y", {"k": 1})
    # the records use it: a Prompt built without params gets its own mapping, and stays frozen
    assert Prompt("p", "q").params == {}
    assert Prompt("p", "q").params is not Prompt("p", "q").params
    with pytest.raises(dataclasses.FrozenInstanceError):
        Prompt("p", "q").id = "other"  # type: ignore[misc]


def test_fast_init_refuses_what_it_cannot_keep() -> None:
    import dataclasses

    @dataclasses.dataclass(slots=True)
    class Mutable:
        a: int

    @dataclasses.dataclass(frozen=True)
    class Unslotted:
        a: int

    @dataclasses.dataclass(frozen=True, slots=True)
    class WithPostInit:
        a: int

        def __post_init__(self) -> None:
            pass

    @dataclasses.dataclass(frozen=True, slots=True)
    class KeywordOnly:
        a: int = dataclasses.field(kw_only=True)

    for cls in (Mutable, Unslotted, WithPostInit, KeywordOnly):
        with pytest.raises(TypeError, match="fast_init"):
            fast_init(cls)


def test_ci_runs_the_fast_lane_with_plain_records() -> None:
    """.ci/run runs the fast lane a second time with the switch on, after the README's test
    command, and the README says so (README "Development")."""
    lane = 'EVALKIT_PLAIN_RECORDS=1 python -m pytest -m "not model and not slow" -n 2 -q'
    lines = [line.strip() for line in (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()]
    assert lines.index(lane) > lines.index('bash -c "$test_command"')
    assert lane in " ".join((REPO / "README.md").read_text(encoding="utf-8").split())
