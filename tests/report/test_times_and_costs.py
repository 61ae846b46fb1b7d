"""The figures a run reports: JUnit times (zero for cached items, the wall time for the suite) and
costs below a cent with their digits."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from datetime import datetime
from pathlib import Path
from typing import Any

from tests.cli.test_progress_ci import ONE, THREE, echo
from tests.fakeserver import FakeServer, Recorded, Reply


def test_junit_time_of_cached_items_is_zero_and_the_suite_time_is_the_wall_time(
    cli: Any, fake_config: Path, fake_llm: FakeServer, write_file: Any
) -> None:
    def slow(req: Recorded) -> Reply:
        reply = echo()(req)
        reply.delay_s = 0.05  # the latency the first run measures
        return reply

    fake_llm.handler = slow
    write_file("sets/three.yaml", THREE)
    assert cli("run", "sets/three.yaml", "--junit", "fresh.xml").exit_code == 0
    fresh = ET.parse("fresh.xml").getroot().find("testsuite")
    assert fresh is not None
    assert all(float(case.get("time", "0")) >= 0.05 for case in fresh.iter("testcase"))
    result = cli("run", "sets/three.yaml", "--junit", "cached.xml", "--output", "cached.json")
    assert result.exit_code == 0, result.stderr
    assert fake_llm.calls == 3  # every answer of the second run came from the cache
    suite = ET.parse("cached.xml").getroot().find("testsuite")
    assert suite is not None
    assert [case.get("time") for case in suite.iter("testcase")] == ["0.000"] * 3
    doc = json.loads(Path("cached.json").read_text())
    wall = datetime.fromisoformat(doc["finished_at"]) - datetime.fromisoformat(doc["started_at"])
    assert suite.get("time") == f"{wall.total_seconds():.3f}"


def test_a_cost_below_a_cent_keeps_its_digits(cli: Any, fake_llm: FakeServer, write_file: Any) -> None:
    fake_llm.handler = echo()  # 10 prompt and 5 completion tokens per answer
    write_file(
        "evalkit.yaml",
        f"""
        providers:
          - id: priced
            adapter: openai
            base_url: {fake_llm.url}/v1
            model: cheap
            cost: {{input_per_mtok: 0.15, output_per_mtok: 0.6}}
        """,
    )
    write_file("sets/one.yaml", ONE)
    result = cli("run", "sets/one.yaml")
    assert result.exit_code == 0, result.stderr
    assert " · cost $0.0000045 · " in result.stdout  # (10 x 0.15 + 5 x 0.6) / 1e6
