"""Provider-test fixtures: an openai instance on the loopback server whose key comes from the environment."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.fakeserver import FakeServer

KEY_ENV = "EVALKIT_TEST_OPENAI_KEY"
KEY = "sk-test-openai-SECRET-7f3a9c"


@pytest.fixture
def keyed_config(write_file: Any, fake_llm: FakeServer, monkeypatch: pytest.MonkeyPatch) -> Path:
    """One openai instance 'fake' on the loopback server whose key comes from KEY_ENV."""
    monkeypatch.setenv(KEY_ENV, KEY)
    return write_file(
        "evalkit.yaml",
        f"""
        default_provider: fake
        providers:
          - id: fake
            adapter: openai
            base_url: {fake_llm.url}/v1
            model: fake-alias
            api_key_env: {KEY_ENV}
            max_retries: 2
            retry_backoff_s: 0.01
            timeout_s: 5
        """,
    )
