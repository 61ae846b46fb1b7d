"""The command retriever is bounded: a timeout ends its whole process group, and a command that
prints without end is ended with a reason."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

ONE_QUESTION = """
id: hostile.docs
name: Docs
questions:
  - {id: q, question: apple pie, form: match, expected: [apple]}
"""


def retrieval(cli: Any, write_file: Any, script: str, timeout_s: float) -> Any:
    write_file("search.sh", script)
    Path("search.sh").chmod(0o755)
    write_file(
        "evalkit.yaml",
        f"retrievers: [{{id: mine, kind: command, command: ./search.sh, timeout_s: {timeout_s}, "
        "provenance: {corpus_revision: x}}]\n",
    )
    write_file("sets/docs.yaml", ONE_QUESTION)
    result = cli("retrieval", "sets/docs.yaml", "--retriever", "mine", "--format", "json")
    result.doc = json.loads(result.stdout)
    return result


def alive(pid: int) -> bool:
    """Running (a zombie nobody reaped is not running)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return False
    return fields[0] not in ("Z", "X")


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process states from /proc")
@pytest.mark.timeout(60)  # before the fix the wait for the child's output lasted as long as the child
def test_a_command_timeout_ends_the_whole_process_group(cli: Any, write_file: Any, isolated: Path) -> None:
    script = "#!/bin/sh\nsleep 1000 &\necho $! > child.pid\nwait\n"
    result = retrieval(cli, write_file, script, timeout_s=0.5)
    assert result.exit_code == 3, result.stderr
    assert result.doc["items"][0]["error"] == (
        "retriever 'mine': timed out after 0.5 s; the command and its children were ended"
    )
    child = int((isolated / "child.pid").read_text())
    assert not alive(child)


@pytest.mark.timeout(60)
def test_a_command_printing_without_end_is_ended_with_a_reason(cli: Any, write_file: Any) -> None:
    python = shlex.quote(sys.executable)
    script = f"#!/bin/sh\nexec {python} -c 'import sys\nwhile True: sys.stdout.write(\"doc-1\\n\" * 4096)'\n"
    result = retrieval(cli, write_file, script, timeout_s=600)
    assert result.exit_code == 3, result.stderr
    assert result.doc["items"][0]["error"] == (
        "retriever 'mine': printed more than 16 MB; the command was ended (print ranked ids only, one per line)"
    )
