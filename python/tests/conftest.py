"""Shared fixtures: the remat binary (via REMAT_BIN), example paths, exported graphs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
PYTHON_DIR = HERE.parent
EXAMPLES = PYTHON_DIR / "examples" / "models.py"
sys.path.insert(0, str(PYTHON_DIR))


def example(name: str) -> str:
    return f"{EXAMPLES}:{name}"


def assert_fallback_matches(model, data, loss_fn):
    """The aot_module fallback captures the same graph as the descriptor API, and its
    no-remat run leaves gradients and buffers bitwise equal to eager's. Returns both
    captures for further checks."""
    import copy

    import torch

    from remat_torch.capture import capture
    from remat_torch.executor import Executor, no_remat_statements

    a = capture(model, data, loss_fn, api="descriptors")
    b = capture(model, data, loss_fn, api="aot_module")
    assert b.api == "aot_module"
    assert a.fingerprint == b.fingerprint
    assert set(a.grads) == set(b.grads) and set(a.mutations) == set(b.mutations)
    plan = {"model": f"x-{b.fingerprint[:12]}", "statements": no_remat_statements(b)}
    eager = copy.deepcopy(model)
    torch.manual_seed(0)
    Executor(model, loss_fn, data, plan, cap=b)(*data)
    torch.manual_seed(0)
    loss_fn(eager(data[0]), *data[1:]).backward()
    for (k, p), (_, q) in zip(model.named_parameters(), eager.named_parameters()):
        assert torch.equal(p.grad, q.grad), k
    for (k, p), (_, q) in zip(model.named_buffers(), eager.named_buffers()):
        assert torch.equal(p, q), k
    return a, b


@pytest.fixture(scope="session")
def remat_bin() -> str:
    from remat_torch.binary import RematNotFound, find_remat

    try:
        return find_remat()
    except RematNotFound as e:
        if os.environ.get("REMAT_BIN"):
            # CI sets REMAT_BIN: a wrong path must fail, not skip every test
            pytest.fail(f"REMAT_BIN is set but unusable: {e}")
        pytest.skip(f"no remat binary: {e}")


@pytest.fixture(scope="session")
def workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("remat_torch")


def cli(*args: str, check: bool = False) -> subprocess.CompletedProcess:
    """``python -m remat_torch ARGS`` in a subprocess (the package from this checkout)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(PYTHON_DIR) + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, "-m", "remat_torch", *args], capture_output=True,
                          text=True, env=env)
    if check and proc.returncode != 0:
        raise AssertionError(f"remat_torch {args} failed ({proc.returncode}):\n{proc.stderr}")
    return proc


class Result:
    def __init__(self, returncode: int, stdout: str, stderr: str):
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


def run_main(*args: str) -> Result:
    """``remat_torch.__main__.main(args)`` in this process (faster than ``cli``), with its
    exit code and captured output."""
    import contextlib
    import io

    from remat_torch.__main__ import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return Result(code, out.getvalue(), err.getvalue())


def inspect_bounds(remat: str, graph: str) -> tuple[int, int]:
    """(smallest budget, checkpoint-all peak) in bytes, from ``remat inspect --json``."""
    out = subprocess.run([remat, "inspect", "--json", graph], capture_output=True, text=True,
                         check=True).stdout
    info = json.loads(out)
    return int(info["smallest_budget"]), int(info["checkpoint_all_peak"])


_EXPORTED: dict = {}


def export_graph(workdir: Path, name: str, batch: int, **kw) -> str:
    """Export an example once per session (in-process) and return the graph path."""
    key = (name, batch, tuple(sorted(kw.items())))
    if key in _EXPORTED:
        return _EXPORTED[key]
    from remat_torch.capture import capture
    from remat_torch.executor import graph_name
    from remat_torch.factory import call_factory
    from remat_torch.graphfile import export

    model, data, loss_fn = call_factory(example(name), batch)
    cap = capture(model, data, loss_fn)
    suffix = "".join(f"-{k}={v}" for k, v in sorted(kw.items()))
    path = workdir / f"{name}-b{batch}{suffix}.yaml"
    path.write_text(export(cap, data, graph_name(name, batch, cap.fingerprint), batch,
                           factory=example(name), **kw))
    _EXPORTED[key] = str(path)
    return str(path)
