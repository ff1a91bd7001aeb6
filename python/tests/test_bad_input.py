"""More bad input, from the command line and the Python API: one line naming what is
wrong (exit code 2 on the command line), never a traceback from deep inside."""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from conftest import example, export_graph, run_main
from test_refuse import refused

from remat_torch.capture import capture
from remat_torch.errors import RematInputError
from remat_torch.executor import Executor, no_remat_statements

FACTORIES = '''
import torch, torch.nn as nn, torch.nn.functional as F

def _mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))

def float_loss(b):
    return _mlp(), (torch.randn(b, 4), torch.randint(0, 3, (b,))), lambda out, y: 1.0

class ItemIf(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
    def forward(self, x):
        y = self.fc(x)
        return y * 2 if y.sum().item() > 0 else y

def reads_item(b):
    return ItemIf(), (torch.randn(b, 4),), lambda out: out.sum()

def bn_cumulative(b):
    model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8, momentum=None), nn.Linear(8, 3))
    return model, (torch.randn(b, 4), torch.randint(0, 3, (b,))), F.cross_entropy

class Masked(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
    def forward(self, x):
        y = self.fc(x)
        return y[y > 0]

def mask_select(b):
    return Masked(), (torch.randn(b, 4),), lambda out: out.sum()

class Scales(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
    def forward(self, x):
        x.mul_(2)
        return self.fc(x)

def mutates_batch(b):
    return Scales(), (torch.randn(b, 4),), lambda out: out.sum()

class Mismatch(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
    def forward(self, x):
        return self.fc(x) + torch.ones(3, 5)

def shape_mismatch(b):
    return Mismatch(), (torch.randn(b, 4),), lambda out: out.sum()

def all_frozen(b):
    model = _mlp().requires_grad_(False)
    return model, (torch.randn(b, 4), torch.randint(0, 3, (b,))), F.cross_entropy

def loss_ignores_model(b):
    return _mlp(), (torch.randn(b, 4), torch.randn(b)), lambda out, t: (t * 2).sum()

def external_head(b):
    head = nn.Linear(3, 3)  # not a submodule of the model: its parameters are constants
    return _mlp(), (torch.randn(b, 4), torch.randint(0, 3, (b,))), \
        lambda out, y: F.cross_entropy(head(out), y)

def embedding_max_norm(b):
    model = nn.Sequential(nn.Embedding(20, 4, max_norm=1.0), nn.Flatten(), nn.Linear(12, 3))
    return model, (torch.randint(0, 20, (b, 3)), torch.randint(0, 3, (b,))), F.cross_entropy

def gru_dropout(b):
    torch.manual_seed(0)
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = nn.GRU(3, 4, num_layers=2, batch_first=True, dropout=0.3)
        def forward(self, x):
            return self.rnn(x)[0][:, -1]
    return M(), (torch.randn(b, 2, 3), torch.randint(0, 4, (b,))), F.cross_entropy

def int_loss(b):
    return _mlp(), (torch.randn(b, 4), torch.randint(0, 3, (b,))), \
        lambda out, y: (out.argmax(1) == y).sum()

def input_requires_grad(b):
    return _mlp(), (torch.randn(b, 4).requires_grad_(), torch.randint(0, 3, (b,))), \
        F.cross_entropy

def sparse_embedding(b):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Embedding(20, 4, sparse=True), nn.Flatten(), nn.Linear(12, 3))
    return model, (torch.randint(0, 20, (b, 3)), torch.randint(0, 3, (b,))), F.cross_entropy

def meta_model(b):
    # all on meta: exported (shapes are all tracing needs), then verify failed in torch.equal
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)).to("meta")
    return model, (torch.randn(b, 4, device="meta"),), lambda out: out.sum()

def meta_batch(b):
    return _mlp(), (torch.randn(b, 4), torch.randint(0, 3, (b,), device="meta")), F.cross_entropy

def empty_batch(b):
    return nn.Linear(2, 2), (torch.randn(0, 2), torch.randn(0, 2)), F.mse_loss
'''


@pytest.fixture(scope="module")
def factories(tmp_path_factory):
    path = tmp_path_factory.mktemp("bad_input") / "factories.py"
    path.write_text(FACTORIES)
    return path


@pytest.mark.parametrize("fn,needle", [
    ("float_loss", "the loss must be a floating-point scalar tensor (got float 1.0)"),
    ("int_loss", "the loss must be a floating-point scalar tensor (got dtype int64, shape [])"),
    ("input_requires_grad", "batch[0] requires grad: a plan computes the parameters' "
                            "gradients only, never an input's"),
    ("reads_item", "the model reads a tensor's value in Python"),
    ("bn_cumulative", "BatchNorm with momentum=None"),
    ("mask_select", "output shape depends on the data"),
    ("mutates_batch", "the model mutates batch[0] in place"),
    ("shape_mismatch", "Attempting to broadcast a dimension of length 5"),
    ("sparse_embedding", "makes a sparse_coo tensor: only dense tensors are supported"),
    ("all_frozen", "no parameter gets a gradient: the model has no parameter that requires "
                   "grad (nothing to train)"),
    ("loss_ignores_model", "no parameter gets a gradient: the loss does not depend on any of "
                           "its 4 parameters that require grad"),
    ("external_head", "the forward or the loss reads a tensor that requires grad but is not "
                      "the model's ('head.weight' of the loss_fn, 3x3 float32)"),
    ("embedding_max_norm", "the model mutates parameter '0.weight' in place: unsupported "
                           "(nn.Embedding with max_norm=1 renormalizes the rows it looks up in "
                           "place: use max_norm=None)"),
    ("gru_dropout", "'rnn' (GRU, num_layers=2, dropout=0.3): PyTorch's traced GRU leaves "
                    "out the dropout between layers that eager applies"),
    ("reads_item", "at {factories}:{item_line} (forward) (the model reads a tensor's value"),
    ("meta_model", "meta_model: parameter '0.weight' is on the meta device (a shape without "
                   "values): a plan runs on real tensors"),
    ("meta_batch", "meta_batch: batch[1] is on the meta device"),
    ("empty_batch", "empty_batch: batch[0] has no elements (shape [0, 2])"),
])
def test_untraceable_models_are_one_line(fn, needle, factories, tmp_path, capfd):
    """Before: a float loss was an AttributeError traceback; .item() and nonzero named only
    an aten op; a mutated input printed a descriptor's repr; and a shape error printed
    torch's own 40-line ERROR log of the fake kernel's traceback before the one line; an
    integer loss was '(got [])', without its dtype; an input that requires grad was
    accepted, and its .grad silently left None; a model on the meta device was exported
    and verify was then a NotImplementedError traceback (aten::equal on meta); a
    sparse gradient was a NotImplementedError traceback from untyped_storage(); a batch
    tensor with no elements was 'ZeroDivisionError: float division by zero' from inside
    the trace, naming nothing; a model
    with no trained parameter was exported, and verify's eager run was a RuntimeError
    traceback ('element 0 of tensors does not require grad'); a loss_fn reading a module
    outside the model was exported with that module's parameters as constants of the
    graph (never trained, silently); a GRU with dropout between layers was traced
    without it (torch's decomposition never applies it), silently another model. A
    tracing failure names the model's line that did it."""
    proc = run_main("export", f"{factories}:{fn}", "--batch", "2", "-o", str(tmp_path / "g.yaml"))
    item_line = FACTORIES.splitlines().index(
        "        return y * 2 if y.sum().item() > 0 else y") + 1
    refused(proc, str(factories), needle.format(factories=factories, item_line=item_line))
    # nothing but our one line on the real stderr either (torch logs there directly)
    assert "Traceback" not in capfd.readouterr().err


def test_files_that_cannot_be_read_or_written(workdir, tmp_path):
    refused(run_main("export", example("mlp"), "--batch", "2", "-o",
                     str(tmp_path / "no" / "such" / "dir" / "g.yaml")),
            "g.yaml: cannot be written (No such file or directory)")
    refused(run_main("export", example("mlp"), "--batch", "0", "-o", str(tmp_path / "g.yaml")),
            "--batch must be at least 1 (got 0)")
    refused(run_main("verify", example("mlp"), str(tmp_path), "--batch", "2"),
            str(tmp_path), "cannot be read (Is a directory)")
    graph = export_graph(workdir, "mlp", 4)
    plan = tmp_path / "p.json"
    plan.write_text(json.dumps({"model": "mlp-b4-000000000000", "statements": []}))
    refused(run_main("verify", example("mlp"), str(plan), "--graph", str(tmp_path)),
            str(tmp_path), "cannot be read as a graph file")
    assert graph  # the good graph exists: only the directory was refused


def _mlp_plan():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    data = (torch.randn(2, 4), torch.randint(0, 3, (2,)))
    cap = capture(model, data, F.cross_entropy)
    return model, data, cap, no_remat_statements(cap)


@pytest.mark.parametrize("edit,needle", [
    (lambda sts: sts.__setitem__(0, 7), "statement 0: not an object (7)"),
    (lambda sts: sts[0].update(op="alloc"), "statement 0: unknown op \"alloc\""),
    (lambda sts: sts[0].update(bytes=str(sts[0]["bytes"])), "'bytes' must be int (got \""),
    (lambda sts: sts[0].update(node=["addmm"]), "'node' must be str (got [\"addmm\"])"),
    (lambda sts: sts[0].update(register=[0]), "'register' must be int (got [0])"),
    (lambda sts: sts[0].pop("register"), "'register' must be int (missing)"),
    (lambda sts: sts[1].update(args=5), "'args' must be a list of registers (got 5)"),
    (lambda sts: sts[3].update(args=["0"]), "'args' must be a list of registers (got [\"0\"])"),
    (lambda sts: sts[4].update(register=True), "'register' must be int (got true)"),
])
def test_malformed_statements_are_named(edit, needle):
    """Before: AttributeError, TypeError (unhashable list, int not iterable) tracebacks,
    and for "bytes": "64" the puzzling 'allocates 64 bytes, the kernel outputs 64'."""
    model, data, cap, sts = _mlp_plan()
    edit(sts)
    plan = {"model": f"m-{cap.fingerprint[:12]}", "statements": sts, "_path": "p.json"}
    with pytest.raises(RematInputError) as e:
        Executor(model, F.cross_entropy, data, plan, cap=cap)
    msg = str(e.value)
    assert msg.startswith("p.json: statement ") and needle in msg and "\n" not in msg, msg


def test_python_api_checks_its_arguments():
    model, data, cap, sts = _mlp_plan()
    plan = {"model": f"m-{cap.fingerprint[:12]}", "statements": sts}
    with pytest.raises(RematInputError, match="the model must be an nn.Module .got function"):
        Executor(lambda x: x, F.cross_entropy, data, plan)
    with pytest.raises(RematInputError, match="the batch must be a non-empty tuple of tensors"):
        capture(model, (data[0], 3), F.cross_entropy)
    with pytest.raises(RematInputError, match="loss_fn is not callable"):
        capture(model, data, "cross_entropy")
    with pytest.raises(RematInputError, match="the plan must be a file name or a dict"):
        Executor(model, F.cross_entropy, data, [sts])
    # a single tensor is a 1-tuple, as from a factory
    x = data[0]
    cap1 = capture(model, x, lambda out: out.square().mean())
    plan1 = {"model": f"m-{cap1.fingerprint[:12]}", "statements": no_remat_statements(cap1)}
    loss = Executor(model, lambda out: out.square().mean(), x, plan1)(x)
    assert loss.item() == model(x).square().mean().item()


@pytest.mark.parametrize("stderr,line", [
    ("error: infeasible: needs at least 5000 bytes (40% of the checkpoint-all peak)\n"
     "note: solved in 0.01 s\n",
     "infeasible: needs at least 5000 bytes (40% of the checkpoint-all peak)"),
    ("thread 'main' panicked at src/sim.rs:12:5:\nindex out of bounds\nstack backtrace:\n"
     "   0: remat::main\nnote: Some details are omitted, run with `RUST_BACKTRACE=full`\n",
     "crashed (thread 'main' panicked at src/sim.rs:12:5: index out of bounds)"),
    ("", "failed with exit code 3"),
])
def test_a_failing_binary_is_one_line_saying_why(stderr, line, tmp_path, monkeypatch):
    """Before: the last line of stderr, i.e. a note that follows the error, or the
    RUST_BACKTRACE hint after a panic's backtrace."""
    from remat_torch import binary

    fake = tmp_path / "remat"
    (tmp_path / "stderr.txt").write_text(stderr)
    fake.write_text(f"#!/bin/sh\ncat '{tmp_path / 'stderr.txt'}' >&2\nexit 3\n")
    fake.chmod(0o755)
    monkeypatch.setenv("REMAT_BIN", str(fake))
    with pytest.raises(RematInputError) as e:
        binary.solve("g.yaml", "10%", str(tmp_path / "p.json"))
    plan = tmp_path / "p.json"
    assert str(e.value) == f"remat solve g.yaml -b 10% -s remat-fast --plan {plan}: {line}"


def test_a_missing_binary_is_one_line(tmp_path, monkeypatch):
    from remat_torch import binary

    monkeypatch.setenv("REMAT_BIN", str(tmp_path / "nope"))
    with pytest.raises(RematInputError, match=r"^REMAT_BIN=\S+/nope: not an executable file$"):
        binary.simulate_peak("g.yaml", "p.json")


@pytest.mark.parametrize("flag,value,shown", [
    ("--bandwidth-gbs", "-1", "-1"), ("--bandwidth-gbs", "nan", "nan"),
    ("--bandwidth-gbs", "inf", "inf"), ("--bandwidth-gbs", "0", "0"),
    ("--peak-tflops", "-5", "-5"), ("--peak-tflops", "0", "0"),
    ("--peak-tflops", "1e300", "1e+300"),  # overflows to inf in FLOP/s
])
def test_roofline_overrides_must_be_positive_and_finite(flag, value, shown, tmp_path):
    """Before: -1 GB/s made every memory-bound node cost 0 (relu: cost 0), nan and inf
    were written as costs, and 0 was silently the device's own figure."""
    out = tmp_path / "g.yaml"
    refused(run_main("export", example("mlp"), "--batch", "2", "-o", str(out), flag, value),
            f"{flag} must be a positive finite number (got {shown})")
    assert not out.exists()


def test_roofline_overrides_in_the_api():
    from remat_torch.graphfile import export

    model, data, cap, _ = _mlp_plan()
    for kw, needle in [({"bandwidth": -1e9}, "bandwidth must be a positive finite number of "
                                              "bytes/s (got -1000000000.0)"),
                       ({"bandwidth": 0}, "bandwidth must be a positive finite number of "
                                          "bytes/s (got 0)"),
                       ({"peak_flops": float("nan")}, "peak_flops must be a positive finite "
                                                      "number of FLOP/s (got nan)"),
                       ({"bandwidth": 1e-320}, "node 'addmm' would cost inf us")]:
        with pytest.raises(RematInputError) as e:
            export(cap, data, "m", 2, **kw)
        assert needle in str(e.value), str(e.value)
    # a valid override is used: 1 GB/s makes the ReLU (2x8 floats in and out: 128 bytes)
    # cost 0.128 us
    text = export(cap, data, "m", 2, peak_flops=2e12, bandwidth=1e9)
    assert 'cost_unit: "us (roofline, a100: 2 TFLOP/s, 1 GB/s)"' in text
    relu = next(line for line in text.splitlines() if '"aten.relu.default"' in line)
    assert "cost: 0.128," in relu, relu


def test_a_plan_dict_without_statements_is_refused():
    """Before: a KeyError: 'statements' from _check_plan (a file without them was
    already refused, in these words)."""
    from remat_torch import train_step

    model, data, cap, _ = _mlp_plan()
    for plan in [{"model": f"m-{cap.fingerprint[:12]}"},
                 {"model": f"m-{cap.fingerprint[:12]}", "statements": 5}]:
        with pytest.raises(RematInputError,
                           match=r"^plan: not a remat plan \(no 'statements' list\)$"):
            train_step(model, plan, data, F.cross_entropy)
        with pytest.raises(RematInputError,
                           match=r"^plan: not a remat plan \(no 'statements' list\)$"):
            Executor(model, F.cross_entropy, data, plan, cap=cap)


def test_train_step_checks_its_arguments():
    """Before: a model of None was 'TypeError: cannot create weak reference to
    'NoneType' object' (the executor cache is keyed weakly by the model), and a single
    tensor batch, accepted by Executor, was unpacked row by row into the step."""
    from remat_torch import train_step

    model, data, cap, sts = _mlp_plan()
    plan = {"model": f"m-{cap.fingerprint[:12]}", "statements": sts}
    with pytest.raises(RematInputError, match=r"^the model must be an nn.Module \(got NoneType\)$"):
        train_step(None, plan, data, F.cross_entropy)
    with pytest.raises(RematInputError, match=r"^the model must be an nn.Module \(got NoneType\)$"):
        Executor(None, F.cross_entropy, data, plan)
    with pytest.raises(RematInputError, match=r"^the batch must be a non-empty tuple"):
        train_step(model, plan, None, F.cross_entropy)
    x = data[0]
    cap1 = capture(model, x, lambda out: out.square().mean())
    plan1 = {"model": f"m-{cap1.fingerprint[:12]}", "statements": no_remat_statements(cap1)}

    def loss_fn(out):
        return out.square().mean()

    for _ in range(2):  # the cached executor too
        loss = train_step(model, plan1, x, loss_fn)
        assert loss.item() == model(x).square().mean().item()


def test_an_empty_batch_tensor_is_refused_in_the_api():
    from remat_torch import train_step

    model, data, cap, sts = _mlp_plan()
    plan = {"model": f"m-{cap.fingerprint[:12]}", "statements": sts}
    empty = (data[0][:0], data[1][:0])
    with pytest.raises(RematInputError, match=r"^batch\[0\] has no elements \(shape \[0, 4\]\)"):
        capture(model, empty, F.cross_entropy)
    with pytest.raises(RematInputError, match=r"^batch\[0\] has no elements \(shape \[0, 4\]\)"):
        Executor(model, F.cross_entropy, empty, plan, cap=cap)
    with pytest.raises(RematInputError, match=r"^batch\[1\] has no elements \(shape \[0\]\)"):
        train_step(model, plan, (data[0], data[1][:0]), F.cross_entropy)


def test_a_plan_may_be_a_path(tmp_path):
    """Before: 'the plan must be a file name or a dict (got PosixPath)'."""
    import os
    import pathlib

    from remat_torch import train_step

    model, data, cap, sts = _mlp_plan()
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"model": f"m-{cap.fingerprint[:12]}", "statements": sts}))
    want = F.cross_entropy(model(data[0]), data[1]).item()
    assert isinstance(path, os.PathLike) and isinstance(path, pathlib.Path)
    assert Executor(model, F.cross_entropy, data, path, cap=cap)(*data).item() == want
    assert train_step(model, path, data, F.cross_entropy).item() == want
    with pytest.raises(RematInputError, match=r"missing.json: no such file$"):
        train_step(model, tmp_path / "missing.json", data, F.cross_entropy)


def test_a_meta_batch_is_refused_on_every_call():
    """Before: the first call (which captures) said 'batch[0] is on the meta device', a
    cached one ran the plan and blamed the kernel: "node 'addmm' (addmm.default) failed
    on the real batch: RuntimeError: Tensor on device cpu is not on the expected device
    meta!"."""
    from remat_torch import train_step

    model, data, cap, sts = _mlp_plan()
    plan = {"model": f"m-{cap.fingerprint[:12]}", "statements": sts}
    meta = (data[0].to("meta"), data[1])
    train_step(model, plan, data, F.cross_entropy)  # cached from here
    for _ in range(2):
        with pytest.raises(RematInputError, match=r"^batch\[0\] is on the meta device"):
            train_step(model, plan, meta, F.cross_entropy)
    with pytest.raises(RematInputError, match=r"^batch\[0\] is on the meta device"):
        Executor(model, F.cross_entropy, data, plan, cap=cap)(*meta)


def test_torchs_frame_dump_is_left_out(tmp_path):
    """Before: an overflowing --batch printed a 1,465-character line, torch's message
    followed by its C++ frame dump ('frame #0: c10::Error::Error(...)')."""
    line = refused(run_main("export", example("mlp"), "--batch", "99999999999999999999",
                            "-o", str(tmp_path / "g.yaml")),
                   "factory failed: TypeError: randn(): argument 'size' failed to unpack",
                   "Overflow when unpacking long long")
    assert "frame #" not in line and "Exception raised from" not in line, line
    assert len(line) < 300, line


def test_quote_error_keeps_the_first_line():
    from remat_torch.errors import quote_error

    e = RuntimeError("bad size\nException raised from f at x.cpp:1 (most recent call first):\n"
                     "frame #0: c10::Error::Error(c10::SourceLocation) + 0x9d\n")
    assert quote_error(e) == "RuntimeError: bad size"
    assert quote_error(e, with_type=False) == "bad size"
    assert quote_error(ValueError()) == "ValueError"
    assert quote_error(ValueError("\n  second\n")) == "ValueError: second"
    assert quote_error(KeyError("k")) == "KeyError: 'k'"
