"""The run pipeline: plan -> execute -> baseline -> verdict -> persist (docs/architecture.md
"The run pipeline").

``plan`` checks every input (nothing called, nothing stored); ``execute`` calls and grades;
``baseline`` finds what a run is compared with (the committed file, else the database);
``verdict`` compares and gates; ``persist`` stores each run in its own transaction. Prompt runs
and retrieval runs share the end: one verdict path and one failure path.
"""

from evalkit.pipeline.execute import execute_plan, execute_retrieval
from evalkit.pipeline.gate import GatePlan, finish, gate_group, plan_gate
from evalkit.pipeline.plan import load_prompt_sets, plan_retrieval, plan_run
from evalkit.pipeline.plans import Progress, RetrievalPlan, RunPlan, Target

__all__ = [
    "GatePlan",
    "Progress",
    "RetrievalPlan",
    "RunPlan",
    "Target",
    "execute_plan",
    "execute_retrieval",
    "finish",
    "gate_group",
    "load_prompt_sets",
    "plan_gate",
    "plan_retrieval",
    "plan_run",
]
