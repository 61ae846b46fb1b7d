"""A first end-to-end check of `evalkit run` against the loopback fake server."""

from __future__ import annotations

import json

from tests.fakeserver import FakeServer, openai_reply


def test_run_json_envelope(cli, fake_config, fake_llm: FakeServer, write_file) -> None:
    write_file(
        "sets/a.yaml",
        """
        id: demo.a
        name: Demo
        prompts:
          - id: one
            prompt: Say hi
            assertions: [{contains: hi}]
          - id: two
            prompt: Say bye
            assertions: [{exact: "bye"}]
        """,
    )
    fake_llm.handler = lambda req: openai_reply("hi there" if "hi" in json.dumps(req.json) else " bye\n")
    result = cli("run", "sets/a.yaml", "--format", "json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["set"] == "demo.a"
    assert doc["generator"] == {"provider": "fake", "model": "fake-alias", "reported_model": "fake-model-1"}
    assert [i["passed"] for i in doc["items"]] == [True, True]
    assert doc["comparison"]["state"] == "baseline"
    assert fake_llm.calls == 2
    again = cli("run", "sets/a.yaml", "--format", "json")
    assert again.exit_code == 0, again.stderr
    assert json.loads(again.stdout)["comparison"]["state"] == "compared"
    assert fake_llm.calls == 2  # answered from the cache
