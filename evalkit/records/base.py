"""What every record module shares: the ``@record`` decorator and the JSON aliases.

``@record`` makes a class a frozen, slotted dataclass and gives it the fast ``__init__`` of
``evalkit.records._fastinit``. With ``EVALKIT_PLAIN_RECORDS=1`` in the environment when evalkit is
imported, every record stays the plain dataclass the standard library makes (README
"Development": CI runs the fast test lane that way too, so the two cannot drift apart).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar, dataclass_transform

from evalkit.records._fastinit import fast_init

JsonValue = Any
Params = Mapping[str, JsonValue]

_R = TypeVar("_R")

# read once, at import: a record class is made once
PLAIN_RECORDS = os.environ.get("EVALKIT_PLAIN_RECORDS", "") == "1"


@dataclass_transform(frozen_default=True, field_specifiers=(field,))
def record(cls: type[_R]) -> type[_R]:
    """``cls`` as a frozen, slotted dataclass; with the fast ``__init__`` unless ``PLAIN_RECORDS``."""
    made = dataclass(frozen=True, slots=True)(cls)
    return made if PLAIN_RECORDS else fast_init(made)
