"""The completion cache seen from the CLI (docs/contract.md "The completion cache"): --no-cache skips reading, not writing."""

from __future__ import annotations

from tests.fakeserver import FakeServer


def test_no_cache_still_stores_fresh_answers(cli, fake_config, fake_llm: FakeServer, write_file) -> None:
    write_file(
        "sets/c.yaml", "id: cache.c\nname: C\nprompts:\n  - {id: a, prompt: hi, assertions: [{contains: echo}]}\n"
    )
    assert cli("run", "sets/c.yaml", "--no-cache").exit_code == 0
    assert cli("run", "sets/c.yaml", "--no-cache").exit_code == 0
    assert fake_llm.calls == 2
    assert cli("run", "sets/c.yaml").exit_code == 0
    assert fake_llm.calls == 2
