"""JUnit XML: one testsuite per run, one testcase per prompt; failures carry the reason."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from typing import Any

from evalkit.records import RetrievalRunResult, RunResult
from evalkit.verdicts import GateVerdict

_INVALID_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _clean(text: str | None) -> str:
    return _INVALID_XML.sub("\ufffd", text or "")


def junit_xml(runs: Sequence[RunResult | RetrievalRunResult]) -> str:
    """Test names are unique, as CI systems key results by them (GitLab keeps the first of a
    name): a set run on several providers is named ``set[provider]``, a repeated prompt ``id
    [repeat n]``."""
    suites = ET.Element("testsuites", name="evalkit")
    set_ids = [run.set_id for run in runs]
    for run in runs:
        if isinstance(run, RetrievalRunResult):
            _retrieval_suite(suites, run)
            continue
        suite_name = run.set_id if set_ids.count(run.set_id) == 1 else f"{run.set_id}[{run.provider}]"
        seconds = _wall_seconds(run.started_at, run.finished_at, run.items)
        suite = ET.SubElement(
            suites,
            "testsuite",
            name=suite_name,
            tests=str(run.sample_count),
            failures=str(run.sample_count - run.passed_count - run.error_count),
            errors=str(run.error_count),
            time=f"{seconds:.3f}",
            timestamp=run.started_at,
        )
        props = ET.SubElement(suite, "properties")
        comparison = run.comparison
        flips = comparison.flips if comparison is not None else None
        regressed = set(flips.regressed) if flips is not None else set()
        for name, value in (
            ("run_id", run.run_id),
            ("grader", run.grader),
            ("provider", run.provider),
            ("model", run.model),
            ("baseline_run_id", comparison.baseline_run_id if comparison else None),
            ("baseline_source", comparison.baseline_source if comparison else None),
            ("fixed", ", ".join(flips.fixed) if flips else None),
        ):
            if value:
                ET.SubElement(props, "property", name=name, value=_clean(value))
        for item in run.items:
            name = item.id if run.repeats == 1 else f"{item.id} [repeat {item.repeat + 1}]"
            case = _testcase(suite, suite_name, name, 0.0 if item.cached else item.latency_ms)
            if item.errored:
                _outcome(case, "error", "ProviderError", item.error or "", item.error or "")
            elif not item.passed:
                kind, message = "AssertionFailed", item.reason
                if item.id in regressed and comparison is not None:  # a flip: it passed in the baseline
                    kind, message = (
                        "Regressed",
                        f"regressed: passed in baseline run {comparison.baseline_run_id}; {message}",
                    )
                _outcome(case, "failure", kind, message, f"{message}\n\nanswer:\n{item.response or ''}")
        _gate_case(suite, suite_name, run.gate)
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


def _gate_case(suite: ET.Element, classname: str, gate: GateVerdict | None) -> None:
    """A failed gate as one more testcase, failing with each failure in words (a CI system's
    test view then shows why the job failed even when every prompt passed)."""
    failures = gate.reasons() if gate is not None else []
    if not failures:
        return
    names = {case.get("name") for case in suite.iter("testcase")}
    name = "gate"
    while name in names:  # a prompt may be called "gate": test names stay unique
        name = f"[{name}]"
    case = _testcase(suite, classname, name, 0.0)
    _outcome(case, "failure", "GateFailed", "; ".join(failures), "\n".join(failures))
    for counter in ("tests", "failures"):
        suite.set(counter, str(int(suite.get(counter) or 0) + 1))


def _retrieval_suite(suites: ET.Element, run: RetrievalRunResult) -> None:
    """One testcase per question; it passes on a top-1 hit (the run's pass rate)."""
    misses = sum(1 for i in run.items if not i.top1_hit and i.error is None)
    suite = ET.SubElement(
        suites, "testsuite", name=run.set_id, tests=str(run.question_count), failures=str(misses),
        errors=str(run.error_count), time=f"{_wall_seconds(run.started_at, run.finished_at, run.items):.3f}",
        timestamp=run.started_at,
    )  # fmt: skip
    props = ET.SubElement(suite, "properties")
    for name, value in (("run_id", run.run_id), ("grader", run.grader), ("retriever", run.retriever)):
        ET.SubElement(props, "property", name=name, value=_clean(value))
    for item in run.items:
        case = _testcase(suite, run.set_id, item.id, item.latency_ms)
        if item.error is not None:
            _outcome(case, "error", "RetrieverError", item.error, item.error)
        elif not item.top1_hit:
            verdict = "top-3 hit" if item.top3_hit else "top-3 miss"
            message = f"top-1 miss ({verdict}); retrieved: {', '.join(item.retrieved) or 'nothing'}"
            _outcome(case, "failure", "RetrievalMiss", message, f"{message}\n\nquestion:\n{item.question}")


def _wall_seconds(started_at: str, finished_at: str, items: Sequence[Any]) -> float:
    """A suite's time is the run's wall time (a cached answer took no time now; concurrent calls
    overlap); the sum of the items' latencies when the timestamps cannot be read."""
    from datetime import datetime

    try:
        return max(0.0, (datetime.fromisoformat(finished_at) - datetime.fromisoformat(started_at)).total_seconds())
    except (TypeError, ValueError):
        return sum((i.latency_ms or 0.0) for i in items if not getattr(i, "cached", False)) / 1000.0


def _testcase(suite: ET.Element, classname: str, name: str, latency_ms: float | None) -> ET.Element:
    return ET.SubElement(
        suite, "testcase", classname=classname, name=_clean(name), time=f"{(latency_ms or 0.0) / 1000.0:.3f}"
    )


def _outcome(case: ET.Element, tag: str, kind: str, message: str, text: str) -> None:
    node = ET.SubElement(case, tag, message=_clean(message), type=kind)
    node.text = _clean(text)
