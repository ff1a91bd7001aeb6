"""Plans with transfers (solved with ``--device``) run by the executor: slow-tier copies
live outside the measured fast tier, gradients stay bitwise equal, and the measured
fast-tier peak equals the simulator's to the byte, also when copies are issued stages
before they are waited for. A kernel reading the slow tier directly is refused."""

from __future__ import annotations

import json

import pytest
from conftest import example, export_graph, inspect_bounds

from remat_torch import binary
from remat_torch.errors import RematInputError
from remat_torch.executor import Executor
from remat_torch.factory import call_factory
from remat_torch.verify import verify

DEVICE = """name: test-host
description: host memory behind a link, for the executor's tests
compute:
  throughput: 1e12
fast:
  capacity: 1GB
slow:
  capacity: 1GB
  to_slow: 10GB/s
  to_fast: 10GB/s
  latency: 1us
  engines: duplex
  direct_read: none
"""


@pytest.fixture(scope="module")
def tiered(remat_bin, workdir):
    graph = export_graph(workdir, "transformer", 4)
    dev = workdir / "test-host.yaml"
    dev.write_text(DEVICE)
    return graph, str(dev)


def solve(graph, dev, strategy, budget, path):
    binary.solve(graph, budget, str(path), strategy=strategy, time_limit=10,
                 extra=["--device", dev])
    return json.load(open(path))


def copies(plan):
    return sum(st["op"] in ("copy_out", "copy_in") for st in plan["statements"])


@pytest.mark.parametrize("strategy", ["offload-all", "autotm-sync"])
def test_transfer_plans_run_bitwise_with_the_simulated_peak(tiered, workdir, strategy):
    graph, dev = tiered
    lo, hi = inspect_bounds(binary.find_remat(), graph)
    path = workdir / f"transformer-{strategy}.json"
    plan = solve(graph, dev, strategy, "80%", path)
    assert copies(plan) > 0
    rep = verify(example("transformer"), str(path), graph_path=graph, device_file=dev)
    assert rep.grads_bitwise and rep.buffers_bitwise, rep.lines
    assert rep.losses["plan"] == rep.losses["eager"]
    # remat simulate --device replayed it: the slow copies are not in the fast peak
    assert rep.measured_peak == rep.simulated_peak, rep.lines
    assert lo <= rep.measured_peak < hi
    assert rep.ok, rep.lines


def test_copies_issued_early_run_too(tiered, workdir):
    """Each copy in moved up to right after its slow source's wait (the earliest a plan
    may issue it): its buffer is held for longer, which the measurement must see."""
    graph, dev = tiered
    plan = solve(graph, dev, "offload-all", "80%", workdir / "transformer-early-base.json")
    sts = plan["statements"]
    moved = 0
    for st in [s for s in sts if s["op"] == "copy_in"]:
        i = sts.index(st)
        ready = max(j for j, s in enumerate(sts[:i])
                    if s["op"] == "wait" and s["register"] == st["src"])
        if ready + 1 < i:
            sts.insert(ready + 1, sts.pop(i))
            moved += 1
    assert moved > 0
    path = workdir / "transformer-early.json"
    plan["budget"] = None  # held buffers: this plan is not for the original budget
    path.write_text(json.dumps(plan))
    sim = binary.simulate_peak(graph, str(path), dev)
    assert sim > binary.simulate_peak(graph, str(workdir / "transformer-early-base.json"), dev)
    plan["peak_memory"] = sim
    path.write_text(json.dumps(plan))
    rep = verify(example("transformer"), str(path), graph_path=graph, device_file=dev)
    assert rep.grads_bitwise and rep.measured_peak == sim, rep.lines


def test_direct_reads_are_refused(tiered, workdir):
    graph, dev = tiered
    plan = solve(graph, dev, "offload-all", "80%", workdir / "transformer-direct.json")
    sts = plan["statements"]
    out = next(s for s in sts if s["op"] == "copy_out")
    reader = next(s for s in sts[sts.index(out):]
                  if s["op"] == "compute" and out["src"] in s["args"])
    reader["args"] = [out["register"] if a == out["src"] else a for a in reader["args"]]
    model, data, loss_fn = call_factory(example("transformer"), 4)
    with pytest.raises(RematInputError, match="straight from the slow tier"):
        Executor(model, loss_fn, data, plan)


def test_a_plan_at_the_floor_runs_with_the_simulated_peak(tiered, workdir):
    """At the smallest budget any plan can have (the largest kernel with its inputs),
    where remat-fast finds no recompute-only plan, its offload search on the device fits
    one with every byte of the budget in use. The executor must hold exactly what the
    simulator counts."""
    graph, dev = tiered
    lo, _ = inspect_bounds(binary.find_remat(), graph)
    path = workdir / "transformer-floor.json"
    plan = solve(graph, dev, "remat-fast", str(lo), path)
    assert copies(plan) > 0
    assert plan["peak_memory"] <= lo
    rep = verify(example("transformer"), str(path), graph_path=graph, device_file=dev)
    assert rep.grads_bitwise and rep.buffers_bitwise, rep.lines
    assert rep.measured_peak == rep.simulated_peak == plan["peak_memory"], rep.lines
    assert rep.ok, rep.lines
