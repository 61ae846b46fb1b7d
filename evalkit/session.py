"""Deprecated: the run pipeline moved to ``evalkit.pipeline`` (docs/architecture.md "The run
pipeline"). This module re-exports its public names for one release and will then be removed."""

from evalkit.pipeline import (
    Progress,
    RetrievalPlan,
    RunPlan,
    Target,
    execute_plan,
    execute_retrieval,
    load_prompt_sets,
    plan_retrieval,
    plan_run,
)

__all__ = [
    "Progress",
    "RetrievalPlan",
    "RunPlan",
    "Target",
    "execute_plan",
    "execute_retrieval",
    "load_prompt_sets",
    "plan_retrieval",
    "plan_run",
]
