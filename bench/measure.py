"""Measuring benchmark commands: wall time and the peak RSS of a whole process tree, and
benchmark servers that announce their port."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

# a fixed pure-Python loop: how fast this shared machine was just then (a slower loop than a run's
# others: a busier machine)
CALIBRATION = (
    "import time\nt = time.perf_counter()\ns = 0\nfor i in range(10_000_000): s += i\nprint(time.perf_counter() - t)"
)


@dataclass
class Measure:
    wall_s: float
    peak_rss_mb: float
    returncode: int
    stdout: str
    stderr: str


def _tree_rss_kb(root: int) -> int:
    """Resident memory of ``root`` and all its descendants, from /proc: the tree is walked
    through each thread's ``children`` list (~0.05 ms for a small tree; scanning every process
    in /proc took ~0.9 ms, 9% of a core at one sample per 10 ms, taken from the tools measured)."""
    page_kb = os.sysconf("SC_PAGE_SIZE") // 1024
    total, stack = 0, [root]
    while stack:
        pid = stack.pop()
        try:
            with open(f"/proc/{pid}/statm") as fh:
                total += int(fh.read().split()[1]) * page_kb
            for tid in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{tid}/children") as fh:
                    stack.extend(int(child) for child in fh.read().split())
        except (OSError, ValueError, IndexError):  # the process or thread has just ended
            continue
    return total


def compile_evalkit(checkout: Path | None = None) -> None:
    """Write evalkit's bytecode, as ``pip install`` does for an installed package: from an
    editable checkout with PYTHONDONTWRITEBYTECODE set (as on this machine), every command
    would otherwise recompile ~40 modules from source (~35 ms) before doing anything.
    ``checkout``: another checkout of evalkit (``--before``), this one by default."""
    import compileall

    compileall.compile_dir(str((checkout or Path(__file__).resolve().parents[1]) / "evalkit"), quiet=1)


def evalkit_env(checkout: Path | None) -> dict[str, str]:
    """The environment that runs ``python -m evalkit`` from ``checkout`` (another git worktree
    of evalkit, for a before/after row in one run) instead of this one."""
    return {"PYTHONPATH": str(checkout)} if checkout is not None else {}


def measure(command: list[str], env: dict[str, str] | None = None, cwd: Path | None = None) -> Measure:
    """Run ``command``; wall time and the peak RSS of its whole process tree."""
    started = time.perf_counter()
    proc = subprocess.Popen(
        command, cwd=cwd, env={**os.environ, **(env or {})}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, _tree_rss_kb(proc.pid))
            done.wait(0.01)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = proc.communicate()
    wall = time.perf_counter() - started
    done.set()
    sampler.join()
    return Measure(wall, peak / 1024, proc.returncode, out, err)


class Server:
    """A benchmark server process that prints ``READY <port>`` when it listens."""

    def __init__(self, *command: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, *command], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().split()
        if not line or line[0] != "READY":
            raise SystemExit(f"server {command} did not start")
        self.port = int(line[1])
        self.url = f"http://127.0.0.1:{self.port}/v1"

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.communicate(timeout=30)


def calibrate() -> float:
    """Seconds the CALIBRATION loop took in a fresh process."""
    return float(measure([sys.executable, "-c", CALIBRATION]).stdout)
