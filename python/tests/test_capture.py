"""Importing every example: the joint graph, node sizes, aliases, the fingerprint."""

from __future__ import annotations

import subprocess

import pytest
import torch
from conftest import assert_fallback_matches, example, export_graph, inspect_bounds, run_main

from remat_torch.capture import capture
from remat_torch.executor import Executor, graph_name, no_remat_statements
from remat_torch.factory import call_factory
from remat_torch.graphfile import export, read_graph

EXAMPLES = ["mlp", "cnn", "transformer"]


@pytest.mark.parametrize("name", EXAMPLES)
def test_export_parses_and_peak_matches(name, remat_bin, workdir):
    graph = export_graph(workdir, name, 4)
    lo, hi = inspect_bounds(remat_bin, graph)
    assert 0 < lo <= hi
    # the checkpoint-all peak remat computes from the file is what the no-remat run measures
    model, data, loss_fn = call_factory(example(name), 4)
    cap = capture(model, data, loss_fn)
    plan = {"model": f"x-{cap.fingerprint[:12]}", "statements": no_remat_statements(cap)}
    ex = Executor(model, loss_fn, data, plan, cap=cap)
    ex(*data, measure=True)
    assert ex.last_peak == hi
    # every kernel's real output storage is the size the graph file gives it
    assert not ex.size_mismatches


def test_nodes_aliases_and_multi_output():
    model, data, loss_fn = call_factory(example("transformer"), 4)
    cap = capture(model, data, loss_fn)
    ops = {g.op for g in cap.nodes}
    # views, transposes, detach and getitem are not nodes
    for alias in ("aten.view.default", "aten.t.default", "aten.detach.default",
                  "aten.transpose.int", "aten.expand.default"):
        assert alias not in ops
    assert not any(g.name.startswith("getitem") for g in cap.nodes)
    # layer norm: three members, the output (4x16x32 floats), mean and rstd (4x16x1 floats)
    ln = [g for g in cap.nodes if g.group == "native_layer_norm"]
    assert [g.name for g in ln] == ["native_layer_norm", "native_layer_norm.1",
                                    "native_layer_norm.2"]
    assert [g.memory for g in ln] == [4 * 16 * 32 * 4, 4 * 16 * 1 * 4, 4 * 16 * 1 * 4]
    assert [g.outputs for g in ln] == [[0], [1], [2]]
    assert all(g.module == "blocks.0.ln1" and g.deps == ln[0].deps for g in ln)
    drop = [g for g in cap.nodes if g.op == "aten.native_dropout.default"]
    assert drop and all(g.random for g in drop)
    # dropout: the output (float) and the mask (bool), one member each
    for g in drop:
        numel = torch.Size(g.shapes[0]).numel()
        assert g.dtypes == (["float32"] if g.member == 0 else ["bool"])
        assert g.memory == numel * (4 if g.member == 0 else 1)
    assert len(drop) == 2 * len({g.group for g in drop})
    assert any(g.backward for g in cap.nodes) and not cap.nodes[0].backward
    # every parameter gets a gradient
    assert set(cap.grads) == {k for k, _ in model.named_parameters()}


class LayerNormDropout(torch.nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.ln = torch.nn.LayerNorm(hidden)
        self.drop = torch.nn.Dropout(0.25)
        self.fc = torch.nn.Linear(hidden, hidden)

    def forward(self, x):
        return self.fc(self.drop(self.ln(x)))


def layer_norm_dropout(batch, seq=5, hidden=7):
    torch.manual_seed(0)
    return (LayerNormDropout(hidden), (torch.randn(batch, seq, hidden),),
            lambda out: out.square().mean())


def test_layer_norm_and_dropout_members_have_their_own_sizes(workdir):
    """LayerNorm then Dropout: each kernel output is its own member, with the size its
    FakeTensor implies, written consecutively with the kernel's cost on the first."""
    b, t, h = 3, 5, 7
    model, data, loss_fn = layer_norm_dropout(b)
    cap = capture(model, data, loss_fn)
    ln = cap.members[cap.by_name["native_layer_norm"].fx_node]
    assert [(g.name, g.memory, g.dtypes) for g in ln] == [
        ("native_layer_norm", b * t * h * 4, ["float32"]),
        ("native_layer_norm.1", b * t * 1 * 4, ["float32"]),
        ("native_layer_norm.2", b * t * 1 * 4, ["float32"])]
    dr = cap.members[cap.by_name["native_dropout"].fx_node]
    assert [(g.name, g.memory, g.dtypes, g.random) for g in dr] == [
        ("native_dropout", b * t * h * 4, ["float32"], True),
        ("native_dropout.1", b * t * h * 1, ["bool"], True)]
    # readers depend on the member they read: dropout reads the normalised output only,
    # layer norm's backward reads mean and rstd, dropout's backward the mask; so no
    # backward node reads the normalised output, which can be freed after the forward
    assert cap.by_name["native_dropout"].deps == ["native_layer_norm"]
    lnb = next(g for g in cap.nodes if g.op == "aten.native_layer_norm_backward.default")
    assert "native_layer_norm.1" in lnb.deps and "native_layer_norm.2" in lnb.deps
    assert not any("native_layer_norm" in g.deps for g in cap.nodes if g.backward)
    assert any("native_dropout.1" in g.deps for g in cap.nodes if g.backward)
    # the file: members consecutive, in output order, with the group key; cost on the first
    path = workdir / "ln-dropout.yaml"
    path.write_text(export(cap, data, graph_name("lnd", b, cap.fingerprint), b))
    nodes = read_graph(str(path))["nodes"]
    names = [n["name"] for n in nodes]
    i = names.index("native_layer_norm")
    assert names[i:i + 3] == ["native_layer_norm", "native_layer_norm.1", "native_layer_norm.2"]
    assert [n.get("group") for n in nodes[i:i + 3]] == ["native_layer_norm"] * 3
    assert nodes[i]["cost"] > 0 and nodes[i + 1]["cost"] == nodes[i + 2]["cost"] == 0
    assert all(n["deps"] == nodes[i]["deps"] for n in nodes[i:i + 3])
    plain = [n for n in nodes if cap.by_name[n["name"]].group is None]
    assert plain and all("group" not in n for n in plain)


def test_plain_kernels_are_unchanged_by_groups():
    """A graph without multi-output kernels is the same with and without groups (names,
    sizes, fingerprint); with them, the old figure is the sum of a group's members."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    data = (torch.randn(3, 8), torch.randn(3, 4))
    a = capture(model, data, torch.nn.functional.mse_loss)
    b = capture(model, data, torch.nn.functional.mse_loss, groups=False)
    assert all(g.group is None for g in a.nodes)
    assert a.fingerprint == b.fingerprint
    assert [(g.name, g.memory, g.deps) for g in a.nodes] == [
        (g.name, g.memory, g.deps) for g in b.nodes]
    model, data, loss_fn = call_factory(example("transformer"), 4)
    a = capture(model, data, loss_fn)
    b = capture(model, data, loss_fn, groups=False)
    assert a.fingerprint != b.fingerprint
    assert len(b.nodes) == len(a.kernels()) < len(a.nodes)
    for k in b.nodes:
        ms = a.kernel_members(a.by_name[k.name])
        assert ms[0].name == k.name and sum(m.memory for m in ms) == k.memory


def test_batchnorm_members_and_statistics():
    model, data, loss_fn = call_factory(example("cnn"), 4)
    cap = capture(model, data, loss_fn)
    bn = [g for g in cap.nodes if "batch_norm" in g.op and not g.backward]
    assert len(bn) == 2 * 5
    # output (4x8x16x16 floats), then saved mean, rstd, new running mean and var (8 floats)
    assert [g.memory for g in bn[:5]] == [4 * 8 * 16 * 16 * 4] + [8 * 4] * 4
    assert [g.name for g in bn[:5]] == ["_native_batch_norm_legit_functional"] + [
        f"_native_batch_norm_legit_functional.{k}" for k in range(1, 5)]
    # each new running statistic is copied from its own member
    assert {cap.bases[cap.mutations[f"bn1.{s}"]][0].name
            for s in ("running_mean", "running_var")} == {
        "_native_batch_norm_legit_functional.3", "_native_batch_norm_legit_functional.4"}
    assert set(cap.mutations) == {f"bn{i}.{s}" for i in (1, 2)
                                  for s in ("running_mean", "running_var", "num_batches_tracked")}


def test_fingerprint_is_stable_and_discriminates():
    fps = []
    for batch in (4, 4, 8):
        model, data, loss_fn = call_factory(example("mlp"), batch)
        fps.append(capture(model, data, loss_fn).fingerprint)
    assert fps[0] == fps[1] and fps[0] != fps[2]


def test_cost_models(workdir, remat_bin):
    for cost in ("flops", "roofline", "measured"):
        g = export_graph(workdir, "mlp", 4, cost=cost)
        text = open(g).read()
        unit = {"flops": "flop", "roofline": "us (roofline, a100", "measured": "us (measured"}
        assert f'cost_unit: "{unit[cost]}' in text
        subprocess.run([remat_bin, "inspect", g], check=True, capture_output=True)
        # the loss kernel's second member (total weight) costs 0 in every mode: the
        # kernel's cost is on its first member only
        assert '{name: "nll_loss_forward.1", cost: 0,' in text
        if cost != "flops":
            assert '{name: "nll_loss_forward", cost: 0,' not in text
    flops = open(export_graph(workdir, "mlp", 4, cost="flops")).read()
    # first layer: 2 * batch * in * out multiply-adds
    assert '{name: "addmm", cost: ' + str(2 * 4 * 64 * 128) + "," in flops
    # roofline gives every node a positive cost, flop_counter gives relu none
    assert '{name: "relu", cost: 0,' in flops


def test_export_cli_and_optimizer_state(workdir):
    out = workdir / "cli-mlp.yaml"
    proc = run_main("export", example("mlp"), "--batch", "4", "-o", str(out), "--optimizer", "adam")
    assert proc.returncode == 0, proc.stderr
    assert "20 nodes" in proc.stdout  # 19 kernels: nll_loss_forward is two members
    text = out.read_text()
    model, data, _ = call_factory(example("mlp"), 4)
    params = sum(p.numel() * 4 for p in model.parameters())
    fixed = int(next(line for line in text.splitlines() if line.startswith("fixed_memory:"))
                .split()[1])
    batch = sum(t.numel() * t.element_size() for t in data)
    # parameters + gradients + 2 Adam moments + the batch + the loss tangent
    assert fixed == 4 * params + batch + 4
    assert '"torch": "' + torch.__version__ + '"' in text


@pytest.mark.parametrize("name", ["cnn", "transformer"])
def test_aot_module_fallback_gives_the_same_graph(name):
    """torch < 2.9 has no aot_export_joint_with_descriptors: the aot_module fallback
    (a partition function that records the joint graph) must give the same nodes."""
    model, data, loss_fn = call_factory(example(name), 4)
    a, b = assert_fallback_matches(model, data, loss_fn)
    assert [g.module for g in a.nodes] == [g.module for g in b.nodes]


def test_scalar_losses_that_keep_their_elementwise_buffer():
    """On CPU, mse_loss returns a 0-dim view of the whole elementwise loss: its node must
    count that buffer (a fake kernel says 4 bytes), and the real run must agree."""
    model, data, loss_fn = call_factory(example("block"), 2)
    cap = capture(model, data, loss_fn)
    mse = cap.by_name["mse_loss"]
    assert mse.shapes == [[]]
    assert mse.memory == 2 * 16 * 64 * 4
    plan = {"model": f"x-{cap.fingerprint[:12]}", "statements": no_remat_statements(cap)}
    ex = Executor(model, loss_fn, data, plan, cap=cap)
    ex(*data, measure=True)
    assert not ex.size_mismatches


def test_capture_leaves_the_global_rng_alone():
    model, data, loss_fn = call_factory(example("block"), 2)
    torch.manual_seed(123)
    before = torch.get_rng_state()
    capture(model, data, loss_fn)
    assert torch.equal(torch.get_rng_state(), before)


@pytest.mark.parametrize("limit", [None, 0])
def test_scalar_loss_probe_scales_without_allocating(limit, monkeypatch):
    """The probe runs clipped shapes first; past PROBE_LIMIT it scales instead of running
    the loss on its full-size inputs. Both give the real size."""
    import remat_torch.capture as C

    if limit is not None:
        monkeypatch.setattr(C, "PROBE_LIMIT", limit)
    model = torch.nn.Linear(64, 64)
    x, y = torch.randn(8, 10, 64), torch.randn(8, 10, 64)
    for loss_fn in (torch.nn.functional.mse_loss, torch.nn.functional.soft_margin_loss):
        cap = capture(model, (x, y), loss_fn)
        (loss,) = [g for g in cap.nodes if g.shapes == [[]]]
        assert loss.memory == 8 * 10 * 64 * 4
    cap = capture(model, (x[:, 0], torch.randint(0, 64, (8,))), torch.nn.functional.cross_entropy)
    # loss and total weight, one member each: exact
    assert cap.by_name["nll_loss_forward"].memory == 4
    assert cap.by_name["nll_loss_forward.1"].memory == 4


def test_split_outputs_one_member_per_fresh_storage():
    """Outputs sharing a storage are one member (at the first of them); outputs that are
    None or live in an input's storage are no member; groups=False merges all."""
    from remat_torch.capture import _split_outputs, _storages

    inp = torch.zeros(5)
    a, c, x = torch.zeros(4), torch.zeros(3), torch.zeros(6)
    in_st = _storages(inp)
    out = (c, a, a[:2], inp[1:], None, x[:2], torch.zeros(1, dtype=torch.bool), x[3:])
    assert _split_outputs(out, in_st, True) == [
        {"outputs": [0], "bytes": 12}, {"outputs": [1, 2], "bytes": 16},
        {"outputs": [5, 7], "bytes": 24}, {"outputs": [6], "bytes": 1}]
    assert _split_outputs(out, in_st, False) == [{"outputs": [0, 1, 2, 5, 6, 7], "bytes": 53}]
    # a single tensor is output 0; a kernel with nothing fresh keeps one empty member
    assert _split_outputs(a, in_st, True) == [{"outputs": [0], "bytes": 16}]
    assert _split_outputs((inp[:1], None), in_st, True) == [{"outputs": [0, 1], "bytes": 0}]
