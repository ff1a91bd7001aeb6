"""compare-pytorch: PyTorch's min-cut partitions as remat plans, and remat-exact at their peaks."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest
from conftest import cli, example, run_main
from test_refuse import refused

from remat_torch import compare as C
from remat_torch.capture import capture
from remat_torch.executor import graph_name
from remat_torch.factory import call_factory
from remat_torch.graphfile import export, read_graph
from remat_torch.verify import verify

FRACTIONS = [0.0, 0.5, 1.0]


class Case:
    def __init__(self, name: str, batch: int, workdir: Path):
        model, data, loss_fn = call_factory(example(name), batch)
        self.cap = capture(model, data, loss_fn)
        self.graph = str(workdir / f"cmp-{name}-b{batch}.yaml")
        Path(self.graph).write_text(export(self.cap, data, graph_name(name, batch,
                                                                      self.cap.fingerprint),
                                           batch, factory=example(name)))
        g = read_graph(self.graph)
        self.model = g["name"]
        self.fixed = int(g["fixed_memory"])
        self.costs = {n["name"]: float(n["cost"]) for n in g["nodes"]}
        self.dir = workdir
        self.plans = {}

    def plan(self, fraction: float):
        """PyTorch's partition at ``fraction`` as a plan file; (path, PartitionPlan, cost, peak)."""
        if fraction not in self.plans:
            fw, bw, calls = C.partition(self.cap, fraction, self.costs)
            pp = C.partition_statements(self.cap, fw, bw)
            path = str(self.dir / f"{Path(self.graph).stem}-torch-{fraction}.json")
            C.write_plan(path, self.model, self.fixed, f"pytorch@{fraction}", pp.statements)
            cost, peak = C.simulate(self.graph, path)  # raises if remat rejects the plan
            C.write_plan(path, self.model, self.fixed, f"pytorch@{fraction}", pp.statements,
                         cost, peak)
            self.plans[fraction] = (path, pp, cost, peak, calls)
        return self.plans[fraction]


_CASES: dict = {}


def case(name: str, batch: int, workdir: Path) -> Case:
    if (name, batch) not in _CASES:
        _CASES[(name, batch)] = Case(name, batch, workdir)
    return _CASES[(name, batch)]


@pytest.mark.parametrize("fraction", FRACTIONS)
def test_partition_plan_simulates(fraction, remat_bin, workdir):
    c = case("mlp", 4, workdir)
    path, pp, cost, peak, _ = c.plan(fraction)
    info = C.inspect(c.graph)
    # every graph node computed, each compute reading live registers (remat simulate checked)
    assert set(pp.computes) == set(c.costs)
    assert info["smallest"] <= peak
    assert cost >= info["total_cost"] * (1 - 1e-12)
    # the plan's recomputations are exactly the forward kernels the backward module runs again
    assert len(pp.computes) == len(c.costs) + len(pp.recomputed)


def test_budget_zero_recomputes_and_one_does_not(remat_bin, workdir):
    c = case("mlp", 4, workdir)
    _, pp0, cost0, _, calls0 = c.plan(0.0)
    _, pp1, cost1, _, _ = c.plan(1.0)
    assert pp0.recomputed, "budget 0 saves only the inputs: the backward recomputes"
    assert not pp1.recomputed
    assert cost0 > cost1


@pytest.mark.parametrize("fraction", FRACTIONS)
def test_remat_no_costlier_at_pytorch_peak(fraction, remat_bin, workdir):
    c = case("mlp", 4, workdir)
    _, _, t_cost, t_peak, _ = c.plan(fraction)
    res = C.solve_exact(c.graph, t_peak, str(workdir / f"mlp-exact-{fraction}.json"),
                        time_limit=20)
    assert res.cost is not None, res.status
    assert res.peak <= t_peak
    assert res.cost <= t_cost * (1 + 1e-12), (res.cost, t_cost)


def test_checkpoint_everything_costs_each_node_once(remat_bin, workdir):
    c = case("mlp", 4, workdir)
    _, pp, cost, peak, _ = c.plan(1.0)
    assert sorted(pp.computes) == sorted(c.costs)  # each node exactly once
    assert math.isclose(cost, math.fsum(c.costs.values()), rel_tol=1e-12, abs_tol=0)
    assert math.isclose(cost, C.inspect(c.graph)["total_cost"], rel_tol=1e-12)


def test_estimator_returns_remat_costs(remat_bin, workdir):
    """The estimator answers with the graph file's costs (0 for what is not a node)."""
    cls = C._estimator_class()
    if cls is None:
        pytest.skip("this torch has no CustomRuntimeEstimator")
    est = cls({"addmm": 2.5})
    node = next(n for n in case("mlp", 4, workdir).cap.gm.graph.nodes if n.name == "addmm")
    assert est(node) == 2.5
    ph = next(n for n in case("mlp", 4, workdir).cap.gm.graph.nodes if n.op == "placeholder")
    assert est(ph) == 0.0  # not a graph-file node


def test_knapsack_asks_the_estimator(remat_bin, workdir):
    """On the transformer at 0.3 PyTorch's knapsack runs and prices its candidates with
    remat's node costs (each a graph-file node)."""
    if C._estimator_class() is None:
        pytest.skip("this torch has no CustomRuntimeEstimator")
    c = case("transformer", 4, workdir)
    _, _, _, _, calls = c.plan(0.3)
    assert calls and all(n in c.costs for n in calls)


@pytest.mark.parametrize("name,fraction", [("mlp", 0.0), ("transformer", 0.0)])
def test_partition_plan_runs_in_the_executor(name, fraction, remat_bin, workdir):
    """PyTorch's partition, as a remat plan, is a valid training step: bitwise gradients
    (recomputed dropout replays its RNG), and the measured peak is the simulated one."""
    c = case(name, 4, workdir)
    path, pp, _, peak, _ = c.plan(fraction)
    assert pp.recomputed
    rep = verify(example(name), path, graph_path=c.graph)
    text = "\n".join(rep.lines)
    assert rep.ok and rep.grads_bitwise and rep.buffers_once, text
    assert rep.measured_peak == rep.simulated_peak == peak, text


def test_below_budgets():
    assert C.below_budgets(100, 200, 4) == [100, 125, 150, 175]
    assert C.below_budgets(100, 100, 4) == []
    assert C.below_budgets(100, 200, 0) == []


def test_cli_writes_the_table(remat_bin, tmp_path):
    proc = cli("compare-pytorch", example("mlp"), "-b", "4", "-o", str(tmp_path),
               "--fractions", "0,1", "--below", "2", "--time-limit", "10", "--no-plot",
               "--verify")
    assert proc.returncode == 0, proc.stderr
    rows = list(csv.DictReader(open(tmp_path / "pytorch_compare_mlp.csv")))
    assert [r["series"] for r in rows[:2]] == ["pytorch", "pytorch"]
    assert set(rows[0]) == set(C.CSV_FIELDS)
    for r in rows[:2]:
        assert r["verified"] == "ok/ok", r
        assert float(r["ratio"]) <= 1 + 1e-12
        assert int(r["remat_peak"]) <= int(r["torch_peak"]) == int(r["budget_bytes"])
    below = [r for r in rows if r["series"] == "remat-below"]
    assert below and all(int(r["budget_bytes"]) < min(int(x["torch_peak"]) for x in rows[:2])
                         for r in below)
    assert "remat cost / PyTorch cost" in proc.stdout
    again = cli("compare-pytorch", example("mlp"), "-o", str(tmp_path), "--plot-only",
                "--no-plot")
    assert again.returncode == 0, again.stderr
    assert "| pytorch | 0.0 |" in again.stdout or "| pytorch | 0 |" in again.stdout


def test_cli_refuses_bad_fractions(tmp_path):
    proc = cli("compare-pytorch", example("mlp"), "-o", str(tmp_path), "--fractions", "0,2")
    assert proc.returncode == 2
    assert "--fractions" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("batch", ["0", "-3"])
def test_cli_refuses_a_batch_below_one_before_any_work(batch, tmp_path, monkeypatch):
    """Before: --batch 0 was captured, overwrote pytorch_compare_NAME.yaml, and only then
    failed in 'remat inspect' (batch_size must be at least 1). Now as export refuses it."""
    old = tmp_path / "pytorch_compare_mlp.yaml"
    old.write_text("a previous run's graph\n")

    def not_called(*a):
        raise AssertionError("the factory was called")

    monkeypatch.setattr("remat_torch.factory.call_factory", not_called)
    refused(run_main("compare-pytorch", example("mlp"), "--batch", batch, "-o", str(tmp_path),
                     "--no-plot", "--fractions", "0.5"),
            f"--batch must be at least 1 (got {batch})")
    assert old.read_text() == "a previous run's graph\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pytorch_compare_mlp.yaml"]


def test_plan_json_is_remat_format(remat_bin, workdir):
    c = case("mlp", 4, workdir)
    path, _, cost, peak, _ = c.plan(0.5)
    data = json.load(open(path))
    assert data["model"] == c.model and data["fixed_memory"] == c.fixed
    assert data["cost"] == cost and data["peak_memory"] == peak
    assert {s["op"] for s in data["statements"]} == {"allocate", "compute", "deallocate"}
