"""A torchvision network (resnet18, random init, 32x32) and one transformer block."""

from __future__ import annotations

import json

import pytest
from conftest import example, export_graph, inspect_bounds

from remat_torch import binary
from remat_torch.verify import verify


@pytest.mark.parametrize("name,strategy,fraction", [
    ("resnet18", "remat-fast", 50),
    ("block", "checkmate-ilp", 10),
])
def test_real_network_plan_verifies(name, strategy, fraction, remat_bin, workdir):
    pytest.importorskip("torchvision")
    graph = export_graph(workdir, name, 2)
    lo, hi = inspect_bounds(remat_bin, graph)
    budget = lo + (hi - lo) * fraction // 100
    plan = workdir / f"{name}-{strategy}.json"
    # 30 s: CI runs the debug binary, several times slower than a release build
    binary.solve(graph, str(budget), str(plan), strategy=strategy, time_limit=30)
    data = json.load(open(plan))
    rep = verify(example(name), str(plan), graph_path=graph)
    text = "\n".join(rep.lines)
    assert rep.ok, text
    assert rep.grads_bitwise and rep.buffers_bitwise and rep.buffers_once, text
    assert rep.eager_close, text
    assert rep.measured_peak == rep.simulated_peak == data["peak_memory"] < hi, text
    assert sum(s["op"] == "compute" for s in data["statements"]) > len(
        {s["node"] for s in data["statements"] if s["op"] == "compute"})
