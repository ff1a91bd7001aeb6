"""Talking to the ``remat`` binary, only through files and its command line.

The binary is found by ``$REMAT_BIN``, else ``remat`` on ``PATH``, else
``target/release/remat`` or ``target/debug/remat`` of the repository that
contains this package.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any, Dict, List, Optional

from .errors import RematInputError


class RematNotFound(RematInputError):
    pass


def find_remat() -> str:
    env = os.environ.get("REMAT_BIN")
    if env:
        if not (os.path.isfile(env) and os.access(env, os.X_OK)):
            raise RematNotFound(f"REMAT_BIN={env}: not an executable file")
        return env
    on_path = shutil.which("remat")
    if on_path:
        return on_path
    here = Path(__file__).resolve()
    for root in here.parents:
        if (root / "Cargo.toml").is_file():
            for kind in ("release", "debug"):
                cand = root / "target" / kind / "remat"
                if cand.is_file() and os.access(cand, os.X_OK):
                    return str(cand)
            break
    raise RematNotFound("remat binary not found: set REMAT_BIN, put 'remat' on PATH, "
                        "or build it with 'cargo build --release'")


def run(args: List[str], check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run([find_remat(), *args], capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise RematInputError(f"remat {' '.join(args)}: {_failure(proc)}")
    return proc


def _failure(proc: subprocess.CompletedProcess) -> str:
    """The line that says why ``remat`` failed: its ``error:`` line (notes or progress
    may follow it), else a panic's message (a backtrace follows it), else the last
    line, else the exit code."""
    lines = [ln.strip() for ln in (proc.stderr.strip() or proc.stdout.strip()).splitlines()]
    lines = [ln for ln in lines if ln]
    errors = [ln for ln in lines if ln.startswith("error:")]
    if errors:
        return errors[-1][len("error:"):].strip()
    for i, ln in enumerate(lines):
        if "panicked at" in ln:
            what = lines[i + 1] if i + 1 < len(lines) else ""
            return f"crashed ({ln}{' ' + what if what else ''})"
    if lines:
        return lines[-1]
    return f"failed with exit code {proc.returncode}"


def solve(graph: str, budget: str, plan: str, strategy: str = "remat-fast",
          time_limit: Optional[float] = None, extra: Optional[List[str]] = None) -> Dict[str, Any]:
    """``remat solve GRAPH -b BUDGET -s STRATEGY --plan PLAN``; returns the plan JSON."""
    args = ["solve", graph, "-b", str(budget), "-s", strategy, "--plan", plan]
    if time_limit is not None:
        args += ["--time-limit", str(time_limit)]
    run(args + list(extra or []))
    with open(plan) as f:
        return json.load(f)


def simulate(graph: str, plan: str, device: Optional[str] = None) -> str:
    """``remat simulate GRAPH PLAN [--device DEVICE]``: its summary (raises on a rejected
    plan; a plan with transfers needs the device file it was solved for)."""
    return run(["simulate", graph, plan] + (["--device", device] if device else [])).stdout


def simulate_peak(graph: str, plan: str, device: Optional[str] = None) -> int:
    """The simulator's (fast-tier) peak memory (bytes) for a plan."""
    import re

    out = simulate(graph, plan, device)
    m = re.search(r"^peak memory.*\((\d+) bytes\)", out, re.M)
    if m is None:
        raise RematInputError(f"remat simulate {graph} {plan}: no peak in its output")
    return int(m.group(1))
