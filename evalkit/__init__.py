"""evalkit: measure LLM answers and retrieval, and stop regressions in CI.

The public Python API (``load_set``, ``run_set``, ``rank_models`` ...) lives in
``evalkit.api`` and is re-exported here lazily, so ``import evalkit`` and ``evalkit --help``
stay fast.
"""

from __future__ import annotations

from typing import Any

from evalkit._version import __version__

__all__ = ["__version__", "load_config", "load_set", "rank_models", "run_set", "select_by_quality"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from evalkit import api

        return getattr(api, name)
    raise AttributeError(f"module 'evalkit' has no attribute {name!r}")
