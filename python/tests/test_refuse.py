"""Bad input is one line naming the file (and the node), exit code 2, no traceback."""

from __future__ import annotations

import json

import pytest
from conftest import cli, example, export_graph, inspect_bounds, run_main

from remat_torch import binary


@pytest.fixture(scope="module")
def mlp_plan(remat_bin, workdir):
    graph = export_graph(workdir, "mlp", 4)
    _, hi = inspect_bounds(remat_bin, graph)
    plan = workdir / "refuse-mlp.json"
    binary.solve(graph, str(hi), str(plan), strategy="checkpoint-all")
    return graph, str(plan)


def refused(proc, *needles):
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


def test_plan_for_another_model_is_refused(mlp_plan):
    graph, plan = mlp_plan
    refused(cli("verify", example("cnn"), plan, "--batch", "4"), plan, "plan is for model 'mlp-b4-")
    refused(run_main("train", example("cnn"), plan, "--batch", "4"), plan)


def test_plan_for_another_batch_is_refused(mlp_plan):
    _, plan = mlp_plan
    refused(run_main("verify", example("mlp"), plan, "--batch", "8"), plan, "fingerprint")


def test_graph_of_another_model_is_refused(mlp_plan, workdir):
    _, plan = mlp_plan
    other = export_graph(workdir, "cnn", 4)
    refused(run_main("verify", example("mlp"), plan, "--graph", other), other, "fingerprint")


def test_unknown_node_is_named(mlp_plan, workdir):
    _, plan = mlp_plan
    data = json.load(open(plan))
    for s in data["statements"]:
        if s.get("node") == "relu":
            s["node"] = "bogus"
    bad = workdir / "bad-node.json"
    bad.write_text(json.dumps(data))
    refused(run_main("verify", example("mlp"), str(bad)), str(bad), "unknown node 'bogus'")


def test_wrong_size_is_named(mlp_plan, workdir):
    _, plan = mlp_plan
    data = json.load(open(plan))
    for s in data["statements"]:
        if s.get("node") == "addmm_1" and s["op"] == "allocate":
            s["bytes"] += 1
    bad = workdir / "bad-size.json"
    bad.write_text(json.dumps(data))
    refused(run_main("verify", example("mlp"), str(bad)), str(bad), "'addmm_1'")


def test_missing_factory_and_files(mlp_plan, workdir):
    _, plan = mlp_plan
    path = example("mlp").rpartition(":")[0]
    refused(run_main("verify", f"{path}:nope", plan), path, "no factory function named 'nope'")
    refused(run_main("export", "no/such/file.py:f", "--batch", "2", "-o", str(workdir / "x.yaml")),
            "no/such/file.py")
    refused(run_main("verify", example("mlp"), str(workdir / "missing.json")), "missing.json")
    notjson = workdir / "notjson.json"
    notjson.write_text("not json")
    refused(run_main("verify", example("mlp"), str(notjson)), str(notjson))


def test_verify_cli_passes_on_a_good_plan(mlp_plan):
    graph, plan = mlp_plan
    proc = cli("verify", example("mlp"), plan, "--graph", graph)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "verdict          OK" in proc.stdout
    assert "peak memory      equal" in proc.stdout
    proc = run_main("train", example("mlp"), plan, "--graph", graph, "--steps", "3")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("bitwise") + proc.stdout.count("close") == 3


def test_from_onnx_dispatches_lazily(monkeypatch):
    """``from-onnx`` hands its arguments to remat_torch.onnx_import.main (imported lazily)."""
    import sys
    import types

    seen = []
    fake = types.ModuleType("remat_torch.onnx_import")
    fake.main = lambda argv: seen.append(argv) or 0
    monkeypatch.setitem(sys.modules, "remat_torch.onnx_import", fake)
    assert run_main("from-onnx", "model.onnx", "-o", "graph.yaml").returncode == 0
    assert seen == [["model.onnx", "-o", "graph.yaml"]]


BAD_FACTORIES = '''
import torch, torch.nn as nn
def vector_loss(b):
    return nn.Linear(4, 4), (torch.randn(b, 4),), lambda out: out.sum(0)
def raises(b):
    raise ValueError("no data here")
class Broken(nn.Module):
    def forward(self, x):
        return x.no_such_method()
def untraceable(b):
    return Broken(), (torch.randn(b, 4),), lambda out: out.sum()
def not_a_triple(b):
    return nn.Linear(2, 2)
def exits(b):
    import sys
    sys.exit(3)
'''


@pytest.mark.parametrize("fn,needle", [
    ("vector_loss", "the loss must be a floating-point scalar tensor (got dtype float32, "
                    "shape [4])"),
    ("raises", "factory failed: ValueError: no data here"),
    ("untraceable", "capturing the joint graph failed"),
    ("not_a_triple", "must return (model, batch, loss_fn)"),
    ("exits", "exits: the factory called sys.exit(3)"),
])
def test_bad_factories(fn, needle, workdir):
    """Before: a factory calling sys.exit(3) ended the command with exit code 3 and
    nothing on stderr (SystemExit is not an Exception)."""
    path = workdir / "bad_factories.py"
    path.write_text(BAD_FACTORIES)
    refused(run_main("export", f"{path}:{fn}", "--batch", "2", "-o", str(workdir / "bad.yaml")),
            str(path), needle)


@pytest.mark.parametrize("key,value,shown", [
    ("peak_memory", "big", '"big"'),
    ("peak_memory", float("nan"), "NaN"),
    ("peak_memory", -3, "-3"),
    ("fixed_memory", 1.5, "1.5"),
    ("fixed_memory", [4096], "[4096]"),
])
def test_plan_figures_must_be_byte_counts(mlp_plan, workdir, key, value, shown, monkeypatch):
    """Before: "big" or NaN was a ValueError traceback from int() once the three runs were
    done, and 1.5 bytes was taken as 1. Now one line naming the plan file and the field,
    before the factory is even called."""
    graph, plan = mlp_plan
    data = json.load(open(plan))
    data[key] = value
    bad = workdir / f"bad-{key}.json"
    bad.write_text(json.dumps(data))

    def not_called(*a):
        raise AssertionError("the factory was called")

    monkeypatch.setattr("remat_torch.verify.call_factory", not_called)
    extra = [] if key == "fixed_memory" else ["--graph", graph]
    refused(run_main("verify", example("mlp"), str(bad), *extra),
            f"{bad}: '{key}' must be a whole number of bytes (got {shown})")


@pytest.mark.parametrize("cmd,args,needle", [
    ("verify", ["--seed", "99999999999999999999999"], "--seed 99999999999999999999999 is out "
     "of range: torch.manual_seed takes -9223372036854775808 to 18446744073709551615"),
    ("verify", ["--seed", "-9223372036854775809"], "--seed -9223372036854775809 is out of "
     "range"),
    ("train", ["--seed", "18446744073709551616"], "--seed 18446744073709551616 is out of "
     "range"),
    ("train", ["--seed", "18446744073709551614", "--steps", "3"], "(train seeds step i "
     "with seed + i: the last step's is 18446744073709551616)"),
])
def test_seed_out_of_range(mlp_plan, cmd, args, needle, monkeypatch):
    """Before: a ValueError traceback ('Overflow when unpacking long long') from
    torch.manual_seed, after the capture; train's last step could overflow alone."""
    graph, plan = mlp_plan

    def not_called(*a):
        raise AssertionError("the factory was called")

    monkeypatch.setattr("remat_torch.verify.call_factory", not_called)
    refused(run_main(cmd, example("mlp"), plan, "--graph", graph, *args), needle)


def test_seed_at_the_edge_of_the_range(mlp_plan):
    graph, plan = mlp_plan
    proc = run_main("train", example("mlp"), plan, "--graph", graph,
                    "--seed", "18446744073709551613", "--steps", "3")
    assert proc.returncode == 0, proc.stderr
    assert "verdict OK" in proc.stdout


def test_the_graphs_optimizer_bytes_must_be_a_byte_count(mlp_plan, workdir, monkeypatch):
    """Before: an edited ``meta.optimizer_bytes`` was a ValueError traceback from int()
    after the three runs. Now one line naming the graph file, before the factory runs."""
    graph, plan = mlp_plan
    text = open(graph).read()
    assert '"optimizer_bytes": "0"' in text
    bad = workdir / "bad-optimizer-bytes.yaml"
    bad.write_text(text.replace('"optimizer_bytes": "0"', '"optimizer_bytes": "big"', 1))

    def not_called(*a):
        raise AssertionError("the factory was called")

    monkeypatch.setattr("remat_torch.verify.call_factory", not_called)
    refused(run_main("verify", example("mlp"), plan, "--graph", str(bad)),
            f"{bad}: 'meta.optimizer_bytes' must be a whole number of bytes (got \"big\")")


@pytest.mark.parametrize("cmd", ["verify", "train"])
@pytest.mark.parametrize("batch", ["0", "-1"])
def test_verify_and_train_check_the_batch_flag(mlp_plan, cmd, batch, monkeypatch):
    """Before: only export checked --batch; verify and train called the factory with 0 or
    -1, and its ZeroDivisionError or negative-dimension error was blamed on the model."""
    graph, plan = mlp_plan

    def not_called(*a):
        raise AssertionError("the factory was called")

    monkeypatch.setattr("remat_torch.verify.call_factory", not_called)
    assert refused(run_main(cmd, example("mlp"), plan, "--graph", graph, "--batch", batch)) == (
        f"error: --batch must be at least 1 (got {batch})")


def test_a_graph_files_batch_size_below_one_is_refused(mlp_plan, workdir, monkeypatch):
    graph, plan = mlp_plan
    text = open(graph).read()
    assert "\nbatch_size: 4\n" in text
    bad = workdir / "bad-batch-size.yaml"
    bad.write_text(text.replace("\nbatch_size: 4\n", "\nbatch_size: 0\n", 1))

    def not_called(*a):
        raise AssertionError("the factory was called")

    monkeypatch.setattr("remat_torch.verify.call_factory", not_called)
    refused(run_main("verify", example("mlp"), plan, "--graph", str(bad)),
            "the graph file's batch_size must be at least 1 (got 0): pass --batch")


@pytest.mark.parametrize("cmd", ["verify", "train"])
def test_an_edited_fixed_memory_is_refused(mlp_plan, workdir, cmd):
    """Before: verify ran, and remat simulate's peak (from the edited figure) did not
    match the measured one: 'peak memory DIFFER ... verdict FAILED', exit 1, the plan's
    fault; an edited node size is refused, and so is this now."""
    graph, plan = mlp_plan
    text = open(graph).read()
    real = next(int(line.split()[1]) for line in text.splitlines()
                if line.startswith("fixed_memory: "))
    bad = workdir / "bad-fixed-memory.yaml"
    bad.write_text(text.replace(f"\nfixed_memory: {real}\n", "\nfixed_memory: 6000\n", 1))
    refused(run_main(cmd, example("mlp"), plan, "--graph", str(bad)),
            f"{bad}: 'fixed_memory' is 6000, but this model's joint graph keeps {real} bytes "
            "resident")
