"""Tests of the ONNX importer (remat_torch.onnx_import).

Small models are built with onnx.helper; every MAC count and byte size the
tests expect is derived by hand in the test. A torchvision resnet18 export is
checked against the closed-form count of its convolutions, and against the
remat binary when it is present.
"""

import importlib
import json
import os
import re
import subprocess
import sys

import pytest
import yaml

# the importer's one extra dependency (pip install onnx); skip without it
onnx = pytest.importorskip("onnx")
T = onnx.TensorProto
h = onnx.helper

# imported by name so that the import sorter need not know whether
# remat_torch is first- or third-party (it differs with the config in force)
onnx_import = importlib.import_module("remat_torch.onnx_import")

F = 4  # bytes of a float32


def _w(name, shape, dtype=T.FLOAT):
    n = 1
    for d in shape:
        n *= d
    vals = [0.5] * n if dtype == T.FLOAT else [1] * n
    return h.make_tensor(name, dtype, shape, vals)


def _save(tmp_path, nodes, inputs, outputs, inits, name="m.onnx", opset=17):
    g = h.make_graph(nodes, "g", inputs, outputs, inits)
    model = h.make_model(g, opset_imports=[h.make_opsetid("", opset)])
    path = tmp_path / name
    onnx.save(model, str(path))
    return str(path)


def _import(path, *args):
    """Imports, and has remat validate the file too when it is built."""
    out = os.path.join(os.path.dirname(path), "out.yaml")
    rc = onnx_import.main([path, "-o", out, *args])
    assert rc == 0
    if _remat_bin():
        res = _remat("inspect", out)
        assert res.returncode == 0, res.stderr
    with open(out) as f:
        return yaml.safe_load(f)


def _by_name(graph):
    return {n["name"]: n for n in graph["nodes"]}


# ---------------------------------------------------------------- MLP


def mlp(tmp_path):
    # x[N,8] -> Gemm(16) -> Relu -> Gemm(4) -> y[N,4]
    x = h.make_tensor_value_info("x", T.FLOAT, ["N", 8])
    y = h.make_tensor_value_info("y", T.FLOAT, ["N", 4])
    nodes = [
        h.make_node("Gemm", ["x", "w1", "b1"], ["h1"], name="/fc1/Gemm", transB=1),
        h.make_node("Relu", ["h1"], ["a1"], name="/relu/Relu"),
        h.make_node("Gemm", ["a1", "w2", "b2"], ["y"], name="/fc2/Gemm", transB=1),
    ]
    inits = [_w("w1", [16, 8]), _w("b1", [16]), _w("w2", [4, 16]), _w("b2", [4])]
    return _save(tmp_path, nodes, [x], [y], inits, "mlp.onnx")


def test_mlp_costs_sizes_structure(tmp_path):
    g = _import(mlp(tmp_path), "--batch", "3")
    assert g["graph"] == "forward"
    assert g["cost_unit"] == "mac"
    assert g["batch_size"] == 3
    assert g["name"] == "mlp"
    # parameters and their gradients: 2 x 4 bytes x (128 + 16 + 64 + 4)
    assert g["fixed_memory"] == 2 * F * (16 * 8 + 16 + 4 * 16 + 4) == 1696
    assert [n["name"] for n in g["nodes"]] == [
        "x", "fc1/Gemm", "relu/Relu", "fc2/Gemm", "loss"]
    n = _by_name(g)
    assert n["x"] == {"name": "x", "op": "Input", "cost": 0, "memory": 3 * 8 * F,
                      "requires_grad": False}
    # Gemm: M*N*K = 3*16*8 MACs; output 3x16 floats; saves its input
    assert n["fc1/Gemm"]["cost"] == 3 * 16 * 8 == 384
    assert n["fc1/Gemm"]["memory"] == 3 * 16 * F == 192
    assert n["fc1/Gemm"]["deps"] == ["x"]
    assert n["fc1/Gemm"]["saves"] == ["x"]
    assert n["fc1/Gemm"]["op"] == "Gemm"
    # Relu: one per element, saves its output
    assert n["relu/Relu"]["cost"] == 48
    assert n["relu/Relu"]["memory"] == 192
    assert n["relu/Relu"]["saves"] == ["self"]
    assert n["fc2/Gemm"]["cost"] == 3 * 4 * 16 == 192
    assert n["fc2/Gemm"]["memory"] == 3 * 4 * F == 48
    assert n["fc2/Gemm"]["deps"] == ["relu/Relu"]
    assert n["fc2/Gemm"]["saves"] == ["relu/Relu"]
    # the added loss: reads the output, one per output element, 4 bytes
    assert n["loss"] == {"name": "loss", "op": "Loss", "cost": 12, "memory": 4,
                         "deps": ["fc2/Gemm"]}
    assert g["meta"]["source"] == "onnx"
    assert g["meta"]["parameters"] == str(16 * 8 + 16 + 4 * 16 + 4)


def test_default_batch_is_one_and_json_output(tmp_path):
    path = mlp(tmp_path)
    out = str(tmp_path / "g.json")
    assert onnx_import.main([path, "-o", out, "--name", "tiny"]) == 0
    import json

    with open(out) as f:
        g = json.load(f)
    assert g["batch_size"] == 1 and g["name"] == "tiny"
    assert _by_name(g)["fc1/Gemm"]["cost"] == 16 * 8


def _mlp_with_external_data(tmp_path):
    """The MLP saved as ext/mlp.onnx with its weights in ext/mlp.data; returns ext/."""
    model = onnx.load(mlp(tmp_path))
    for t in model.graph.initializer:  # only raw_data goes to external files
        t.CopyFrom(onnx.numpy_helper.from_array(onnx.numpy_helper.to_array(t), t.name))
    d = tmp_path / "ext"
    d.mkdir()
    onnx.save_model(model, str(d / "mlp.onnx"), save_as_external_data=True,
                    location="mlp.data", size_threshold=0)
    return d


def test_external_data_beside_the_model(tmp_path):
    # weights in a separate file, read from another working directory
    d = _mlp_with_external_data(tmp_path)
    out = str(tmp_path / "ext.yaml")
    res = _run_cli(str(d / "mlp.onnx"), "-o", out, "--batch", "3", cwd="/")
    assert res.returncode == 0, res.stderr
    with open(out) as f:
        g = yaml.safe_load(f)
    assert g["fixed_memory"] == 1696
    assert _by_name(g)["fc1/Gemm"]["cost"] == 384


# ---------------------------------------------------------------- conv net


def convnet(tmp_path):
    # x[N,3,8,8] -> Conv(4, 3x3, pad 1) -> BN -> Relu -> Conv(4, 3x3, group 2)
    #   -> MaxPool(2x2) -> Flatten -> Gemm(10) -> y[N,10]
    x = h.make_tensor_value_info("x", T.FLOAT, ["batch", 3, 8, 8])
    y = h.make_tensor_value_info("y", T.FLOAT, ["batch", 10])
    nodes = [
        h.make_node("Conv", ["x", "cw1", "cb1"], ["c1"], name="conv1",
                    kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        h.make_node("BatchNormalization", ["c1", "s", "b", "mean", "var"], ["bn"],
                    name="bn1"),
        h.make_node("Relu", ["bn"], ["r"], name="relu1"),
        h.make_node("Conv", ["r", "cw2"], ["c2"], name="conv2", kernel_shape=[3, 3],
                    pads=[1, 1, 1, 1], group=2),
        h.make_node("MaxPool", ["c2"], ["p"], name="pool", kernel_shape=[2, 2],
                    strides=[2, 2]),
        h.make_node("Flatten", ["p"], ["f"], name="flatten"),
        h.make_node("Gemm", ["f", "fw", "fb"], ["y"], name="fc", transB=1),
    ]
    inits = [
        _w("cw1", [4, 3, 3, 3]), _w("cb1", [4]),
        _w("s", [4]), _w("b", [4]), _w("mean", [4]), _w("var", [4]),
        _w("cw2", [4, 2, 3, 3]), _w("fw", [10, 64]), _w("fb", [10]),
    ]
    return _save(tmp_path, nodes, [x], [y], inits, "convnet.onnx")


def test_convnet_costs_sizes_structure(tmp_path):
    g = _import(convnet(tmp_path), "--batch", "2")
    n = _by_name(g)
    # Flatten is a view: no node, its reader depends on the pooled tensor
    assert [v["name"] for v in g["nodes"]] == [
        "x", "conv1", "bn1", "relu1", "conv2", "pool", "fc", "loss"]
    assert n["x"]["memory"] == 2 * 3 * 8 * 8 * F == 1536
    act = 2 * 4 * 8 * 8  # elements of each 2x4x8x8 activation
    # Conv: output elements x (C_in / group) x kernel
    assert n["conv1"]["cost"] == act * 3 * 9 == 13824
    assert n["conv1"]["memory"] == act * F == 2048
    assert n["conv1"]["saves"] == ["x"]
    # BN (inference form): two per element, saves its input
    assert n["bn1"]["cost"] == 2 * act == 1024
    assert n["bn1"]["deps"] == ["conv1"] and n["bn1"]["saves"] == ["conv1"]
    assert n["relu1"]["cost"] == act and n["relu1"]["saves"] == ["self"]
    # grouped conv: 4 input channels in 2 groups -> 2 per output channel
    assert n["conv2"]["cost"] == act * 2 * 9 == 9216
    assert n["conv2"]["deps"] == ["relu1"] and n["conv2"]["saves"] == ["relu1"]
    # MaxPool: output elements x window; default saves (input and output)
    assert n["pool"]["cost"] == (2 * 4 * 4 * 4) * 4 == 512
    assert n["pool"]["memory"] == 2 * 4 * 4 * 4 * F == 512
    assert "saves" not in n["pool"]
    assert n["fc"]["cost"] == 2 * 10 * 64 == 1280
    assert n["fc"]["memory"] == 2 * 10 * F
    assert n["fc"]["deps"] == ["pool"] and n["fc"]["saves"] == ["pool"]
    assert n["loss"]["deps"] == ["fc"] and n["loss"]["cost"] == 20
    # parameters x2 (weights + gradients); BN running statistics x1
    params = 108 + 4 + 4 + 4 + 72 + 640 + 10
    assert g["fixed_memory"] == 2 * F * params + F * 8 == 6768


def test_mac_formulas_of_other_ops(tmp_path):
    # N = 2 throughout
    x = h.make_tensor_value_info("x", T.FLOAT, ["N", 4, 5, 5])
    z = h.make_tensor_value_info("z", T.FLOAT, ["N", 2, 3])  # LSTM: [seq, batch, in]
    outs = [h.make_tensor_value_info(k, T.FLOAT, [None] * r)
            for k, r in (("gap", 4), ("s3", 3), ("yh", 3))]
    nodes = [
        h.make_node("ConvTranspose", ["x", "wt"], ["ct"], name="deconv", group=2,
                    kernel_shape=[2, 2], strides=[2, 2]),
        h.make_node("AveragePool", ["ct"], ["ap"], name="avgpool", kernel_shape=[2, 2],
                    strides=[2, 2]),
        h.make_node("GlobalAveragePool", ["ap"], ["gap"], name="gap"),
        _const("shape", [0, 4, 25], dtype=T.INT64, dims=[3]),
        h.make_node("Reshape", ["ap", "shape"], ["r"], name="view"),
        h.make_node("MatMul", ["r", "w2"], ["mm"], name="matmul"),
        h.make_node("LayerNormalization", ["mm", "g", "b"], ["ln"], name="ln", axis=-1),
        h.make_node("Einsum", ["ln", "ln"], ["es"], name="einsum", equation="bij,bkj->bik"),
        h.make_node("Sum", ["es", "es", "es"], ["s3"], name="sum3"),
        h.make_node("LSTM", ["z", "wl", "rl"], ["y_all", "yh"], name="lstm", hidden_size=5),
    ]
    inits = [_w("wt", [4, 2, 2, 2]), _w("w2", [25, 6]), _w("g", [6]), _w("b", [6]),
             _w("wl", [1, 20, 3]), _w("rl", [1, 20, 5])]
    g = _import(_save(tmp_path, nodes, [x, z], outs, inits), "--batch", "2")
    n = _by_name(g)
    # ConvTranspose: input elements x (out channels / group) x kernel
    assert n["deconv"]["cost"] == (2 * 4 * 5 * 5) * 2 * 4 == 1600
    assert n["deconv"]["memory"] == 2 * 4 * 10 * 10 * F
    assert n["avgpool"]["cost"] == (2 * 4 * 5 * 5) * 4 and n["avgpool"]["saves"] == []
    assert n["gap"]["cost"] == 2 * 4 * 5 * 5  # input elements
    # Reshape is a view; MatMul [2,4,25] @ [25,6] broadcasts the weight
    assert n["matmul"]["deps"] == ["avgpool"]
    assert n["matmul"]["cost"] == 2 * 4 * 6 * 25
    assert n["ln"]["cost"] == 4 * 2 * 4 * 6 and n["ln"]["saves"] == ["matmul"]
    # Einsum: output elements x contracted j; one dep for the repeated input
    assert n["einsum"]["cost"] == 2 * 4 * 4 * 6 and n["einsum"]["deps"] == ["ln"]
    assert n["einsum"]["saves"] == ["ln"]
    assert n["sum3"]["cost"] == 2 * (2 * 4 * 4)  # two additions per element
    # LSTM: seq x batch x (|W| + |R|); its unread output Y is dropped, so
    # the one kept output carries the whole cost under the node's own name
    assert n["lstm"]["cost"] == 2 * 2 * (20 * 3 + 20 * 5) == 640
    assert n["lstm"]["memory"] == 1 * 2 * 5 * F and n["lstm"]["deps"] == ["z"]
    assert n["loss"]["deps"] == ["gap", "sum3", "lstm"]
    assert n["loss"]["cost"] == 2 * 4 + 2 * 4 * 4 + 1 * 2 * 5


# ------------------------------------------- shape ops, views, multi-output


def test_shape_ops_fold_and_multi_output_split(tmp_path):
    # x[N,4,3] -> Reshape(x, concat(shape(x)[0], [-1])) -> [N,12]
    #   -> Split into two [N,6] -> Mul -> Softmax -> y
    x = h.make_tensor_value_info("x", T.FLOAT, ["N", 4, 3])
    y = h.make_tensor_value_info("y", T.FLOAT, ["N", 6])
    nodes = [
        h.make_node("Shape", ["x"], ["sh"], name="shape"),
        h.make_node("Gather", ["sh", "zero"], ["n"], name="gather", axis=0),
        h.make_node("Unsqueeze", ["n", "axes"], ["n1"], name="unsq"),
        h.make_node("Concat", ["n1", "minus1"], ["tgt"], name="cat", axis=0),
        h.make_node("Reshape", ["x", "tgt"], ["flat"], name="reshape"),
        h.make_node("Split", ["flat", "halves"], ["s0", "s1"], name="split", axis=1),
        h.make_node("Mul", ["s0", "s1"], ["m"], name="mul"),
        h.make_node("Softmax", ["m"], ["y"], name="softmax", axis=1),
    ]
    inits = [
        h.make_tensor("zero", T.INT64, [], [0]),
        h.make_tensor("axes", T.INT64, [1], [0]),
        h.make_tensor("minus1", T.INT64, [1], [-1]),
        h.make_tensor("halves", T.INT64, [2], [6, 6]),
    ]
    g = _import(_save(tmp_path, nodes, [x], [y], inits), "--batch", "5")
    n = _by_name(g)
    assert [v["name"] for v in g["nodes"]] == [
        "x", "split:0", "split:1", "mul", "softmax", "loss"]
    # Split is one op with two outputs: one node each, reading the reshaped
    # input's base (x), the copy cost split by elements
    for k in ("split:0", "split:1"):
        assert n[k]["deps"] == ["x"] and n[k]["cost"] == 5 * 6
        assert n[k]["memory"] == 5 * 6 * F and n[k]["op"] == "Split"
        # no parameter upstream: no gradient, so no saves either
        assert n[k]["requires_grad"] is False and "saves" not in n[k]
    assert n["mul"]["deps"] == ["split:0", "split:1"]
    assert n["softmax"]["cost"] == 3 * 5 * 6
    # integer initializers are constants: resident once, no gradient
    assert g["fixed_memory"] == 8 * (1 + 1 + 1 + 2)


def test_requires_grad_and_saves_with_parameters(tmp_path):
    # x -> Mul(x, w) -> Tanh -> Add(., x) -> y: Mul saves x, Tanh self, Add nothing
    x = h.make_tensor_value_info("x", T.FLOAT, [2, 3])
    y = h.make_tensor_value_info("y", T.FLOAT, [2, 3])
    nodes = [
        h.make_node("Mul", ["x", "w"], ["m"], name="scale"),
        h.make_node("Tanh", ["m"], ["t"], name="tanh"),
        h.make_node("Add", ["t", "x"], ["y"], name="add"),
    ]
    g = _import(_save(tmp_path, nodes, [x], [y], [_w("w", [3])]))
    n = _by_name(g)
    assert n["scale"]["saves"] == ["x"] and "requires_grad" not in n["scale"]
    assert n["tanh"]["saves"] == ["self"]
    assert n["add"]["saves"] == [] and n["add"]["deps"] == ["tanh", "x"]
    assert g["batch_size"] == 2  # the model's own fixed batch


def _const(name, value, dtype=T.FLOAT, dims=()):
    vals = value if isinstance(value, list) else [value]
    return h.make_node("Constant", [], [name], name=f"const_{name}",
                       value=h.make_tensor(name, dtype, list(dims), vals))


def test_attention_saves_what_each_gradient_reads(tmp_path):
    # x[N,4,8]: q, k, v = x @ Wq, x @ Wk, x @ Wv; p = softmax(q @ k^T / 2)
    # out = p @ v; then out * 3 (a constant, not a weight)
    x = h.make_tensor_value_info("x", T.FLOAT, ["N", 4, 8])
    y = h.make_tensor_value_info("y", T.FLOAT, ["N", 4, 8])
    nodes = [
        h.make_node("MatMul", ["x", "wq"], ["q"], name="q"),
        h.make_node("MatMul", ["x", "wk"], ["k"], name="k"),
        h.make_node("MatMul", ["x", "wv"], ["v"], name="v"),
        h.make_node("Transpose", ["k"], ["kt"], name="kt", perm=[0, 2, 1]),
        h.make_node("MatMul", ["q", "kt"], ["s"], name="scores"),
        _const("two", 2.0),
        h.make_node("Div", ["s", "two"], ["sd"], name="scale"),
        h.make_node("Softmax", ["sd"], ["p"], name="softmax", axis=-1),
        h.make_node("MatMul", ["p", "v"], ["o"], name="attn"),
        _const("three", 3.0),
        h.make_node("Mul", ["o", "three"], ["y"], name="times3"),
    ]
    inits = [_w("wq", [8, 8]), _w("wk", [8, 8]), _w("wv", [8, 8])]
    g = _import(_save(tmp_path, nodes, [x], [y], inits), "--batch", "2")
    n = _by_name(g)
    assert [v["name"] for v in g["nodes"]] == [
        "x", "q", "k", "v", "kt", "scores", "scale", "softmax", "attn", "times3", "loss"]
    # batched MatMul: output elements x inner dimension
    assert n["q"]["cost"] == 2 * 4 * 8 * 8
    assert n["scores"]["cost"] == 2 * 4 * 4 * 8
    assert n["attn"]["cost"] == 2 * 4 * 8 * 4
    assert n["scores"]["memory"] == 2 * 4 * 4 * F
    assert n["q"]["saves"] == ["x"]  # for the weight's gradient
    assert n["kt"]["saves"] == []
    assert n["scores"]["saves"] == ["q", "kt"]  # two activations: both
    assert n["scale"]["saves"] == []  # a constant divisor
    assert n["softmax"]["saves"] == ["self"]
    assert n["attn"]["saves"] == ["softmax", "v"]
    assert n["times3"]["saves"] == []
    # Constant ops are resident once: two float scalars
    assert g["fixed_memory"] == 2 * F * 3 * 64 + 2 * F


def test_shape_arithmetic_is_folded(tmp_path):
    # Reshape(x, Cast(Cast(Shape(x), float) * [2, 0.5], int64)): ONNX's data
    # propagation stops at the Cast; the importer evaluates the arithmetic
    x = h.make_tensor_value_info("x", T.FLOAT, ["N", 8])
    y = h.make_tensor_value_info("y", T.FLOAT, [None, None])
    nodes = [
        h.make_node("Shape", ["x"], ["sh"], name="shape"),
        h.make_node("Cast", ["sh"], ["shf"], name="castf", to=T.FLOAT),
        _const("factors", [2.0, 0.5], dims=[2]),
        h.make_node("Mul", ["shf", "factors"], ["tf"], name="mul"),
        h.make_node("Cast", ["tf"], ["target"], name="casti", to=T.INT64),
        h.make_node("Reshape", ["x", "target"], ["r"], name="reshape"),
        h.make_node("Relu", ["r"], ["y"], name="relu"),
    ]
    model = h.make_model(h.make_graph(nodes, "g", [x], [y], []),
                         opset_imports=[h.make_opsetid("", 17)])
    bound = onnx.load_from_string(model.SerializeToString())
    onnx_import._bind_dims(bound, 4, {})
    assert onnx_import._has_symbolic(onnx_import._infer(bound))  # needs the fold
    path = str(tmp_path / "fold.onnx")
    onnx.save(model, path)
    g = _import(path, "--batch", "4")
    n = _by_name(g)
    assert [v["name"] for v in g["nodes"]] == ["x", "relu", "loss"]
    assert n["relu"]["memory"] == 8 * 4 * F and n["relu"]["deps"] == ["x"]
    assert n["loss"]["cost"] == 32


def test_folding_keeps_a_small_weight_a_node(tmp_path):
    # a class token: Expand(tok[1,1,4], shape computed from Shape(x) through
    # Casts) is concatenated with x. The shape arithmetic is folded; the
    # Expand of the weight stays a node with a gradient.
    x = h.make_tensor_value_info("x", T.FLOAT, ["N", 3, 4])
    y = h.make_tensor_value_info("y", T.FLOAT, [None, None, None])
    nodes = [
        h.make_node("Shape", ["x"], ["sh"], name="shape", end=1),
        _const("rest", [1, 4], dtype=T.INT64, dims=[2]),
        h.make_node("Concat", ["sh", "rest"], ["target"], name="cat_shape", axis=0),
        h.make_node("Cast", ["target"], ["tf"], name="castf", to=T.FLOAT),
        _const("one", 1.0),
        h.make_node("Mul", ["tf", "one"], ["tm"], name="times1"),
        h.make_node("Cast", ["tm"], ["ti"], name="casti", to=T.INT64),
        h.make_node("Expand", ["tok", "ti"], ["toks"], name="expand"),
        h.make_node("Concat", ["toks", "x"], ["y"], name="cat", axis=1),
    ]
    path = _save(tmp_path, nodes, [x], [y], [_w("tok", [1, 1, 4])])
    bound = onnx.load(path)
    onnx_import._bind_dims(bound, 2, {})
    assert onnx_import._has_symbolic(onnx_import._infer(bound))  # needs the fold
    g = _import(path, "--batch", "2")
    n = _by_name(g)
    assert [v["name"] for v in g["nodes"]] == ["x", "expand", "cat", "loss"]
    assert n["expand"]["memory"] == 2 * 4 * F and "deps" not in n["expand"]
    assert "requires_grad" not in n["expand"]  # the token is trained
    assert n["cat"]["deps"] == ["expand", "x"]
    assert n["cat"]["memory"] == 2 * 4 * 4 * F and n["cat"]["cost"] == 32


def test_dropout_training_mode_is_a_node(tmp_path):
    # training-mode Dropout (opset 12 on, training_mode = true) computes a
    # new tensor; without training_mode it is the identity and folds away
    x = h.make_tensor_value_info("x", T.FLOAT, ["N", 6])
    y = h.make_tensor_value_info("y", T.FLOAT, ["N", 6])
    nodes = [
        h.make_node("Gemm", ["x", "w"], ["a"], name="fc"),
        _const("ratio", 0.1),
        _const("train", True, dtype=T.BOOL),
        h.make_node("Dropout", ["a", "ratio", "train"], ["d", "mask"], name="drop"),
        h.make_node("Dropout", ["d"], ["e"], name="eval_drop"),
        h.make_node("Relu", ["e"], ["y"], name="relu"),
    ]
    g = _import(_save(tmp_path, nodes, [x], [y], [_w("w", [6, 6])]), "--batch", "3")
    n = _by_name(g)
    assert [v["name"] for v in g["nodes"]] == ["x", "fc", "drop", "relu", "loss"]
    assert n["drop"]["cost"] == 18 and n["drop"]["memory"] == 18 * F
    assert n["drop"]["saves"] == ["self"]  # its output stands in for the mask
    assert n["relu"]["deps"] == ["drop"]


def test_unknown_op_warns_once(tmp_path, capsys):
    x = h.make_tensor_value_info("x", T.FLOAT, ["N", 3, 3])
    y = h.make_tensor_value_info("y", T.FLOAT, ["N"])
    nodes = [
        h.make_node("Det", ["x"], ["d1"], name="det1"),
        h.make_node("Mul", ["x", "x"], ["xx"], name="sq"),
        h.make_node("Det", ["xx"], ["d2"], name="det2"),
        h.make_node("Add", ["d1", "d2"], ["y"], name="add"),
    ]
    g = _import(_save(tmp_path, nodes, [x], [y], []), "--batch", "4")
    n = _by_name(g)
    assert n["det1"]["cost"] == 4  # output elements
    assert n["sq"]["deps"] == ["x"]  # a repeated input is one dep
    err = capsys.readouterr().err
    assert err.count("no MAC formula for Det") == 1


def test_names_made_unique_and_valid(tmp_path):
    x = h.make_tensor_value_info("x", T.FLOAT, [2])
    y = h.make_tensor_value_info("y", T.FLOAT, [2])
    nodes = [
        h.make_node("Relu", ["x"], ["a"], name="loss"),
        h.make_node("Relu", ["a"], ["b"], name="loss"),
        h.make_node("Relu", ["b"], ["c"], name="grad/x"),
        h.make_node("Relu", ["c"], ["d"], name=""),
        h.make_node("Relu", ["d"], ["y"], name="self"),
    ]
    g = _import(_save(tmp_path, nodes, [x], [y], []))
    names = [v["name"] for v in g["nodes"]]
    # 'loss' is kept for the added sink
    assert names == ["x", "loss_2", "loss_3", "_grad/x", "Relu_3", "_self", "loss"]
    assert g["nodes"][-1]["op"] == "Loss"


# ------------------------------------------------------------- bad input


def _run_cli(*args, cwd=None):
    env = dict(os.environ)
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # python/
    env["PYTHONPATH"] = here + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run(
        [sys.executable, "-m", "remat_torch.onnx_import", *args],
        capture_output=True, text=True, env=env, timeout=120, check=False, cwd=cwd,
    )


def _one_line_error(res, *fragments):
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("error: ")
    for frag in fragments:
        assert frag in lines[0], lines[0]
    assert "Traceback" not in res.stderr


def test_not_an_onnx_file(tmp_path):
    p = tmp_path / "notes.onnx"
    p.write_text("hello, this is not a model\n")
    _one_line_error(_run_cli(str(p), "-o", str(tmp_path / "o.yaml")),
                    str(p), "not an ONNX model")
    assert not (tmp_path / "o.yaml").exists()


def test_missing_file(tmp_path):
    p = str(tmp_path / "absent.onnx")
    _one_line_error(_run_cli(p, "-o", str(tmp_path / "o.yaml")), p, "cannot read")


def test_shape_inference_failure_names_node(tmp_path):
    x = h.make_tensor_value_info("x", T.FLOAT, [2, 3])
    y = h.make_tensor_value_info("y", T.FLOAT, ["a", "b"])
    nodes = [h.make_node("MatMul", ["x", "w"], ["y"], name="mm")]
    p = _save(tmp_path, nodes, [x], [y], [_w("w", [4, 5])])
    _one_line_error(_run_cli(p, "-o", str(tmp_path / "o.yaml")),
                    p, "node 'mm'", "shape inference failed")


def test_op_without_shape_function_names_node(tmp_path):
    x = h.make_tensor_value_info("x", T.FLOAT, ["N", 3])
    y = h.make_tensor_value_info("y", T.FLOAT, [None, None])
    nodes = [h.make_node("Relu", ["x"], ["r"], name="relu"),
             h.make_node("FusedThing", ["r"], ["y"], name="fused", domain="com.example")]
    g = h.make_graph(nodes, "g", [x], [y])
    model = h.make_model(g, opset_imports=[h.make_opsetid("", 17),
                                           h.make_opsetid("com.example", 1)])
    p = str(tmp_path / "custom.onnx")
    onnx.save(model, p)
    _one_line_error(_run_cli(p, "-o", str(tmp_path / "o.yaml")),
                    p, "node 'fused'", "unknown", "no shape function for com.example.FusedThing")


def test_unknown_dtype_names_node(tmp_path):
    x = h.make_tensor_value_info("x", T.FLOAT, [2])
    y = h.make_tensor_value_info("y", T.STRING, [2])
    nodes = [h.make_node("Cast", ["x"], ["y"], name="tostr", to=T.STRING)]
    p = _save(tmp_path, nodes, [x], [y], [])
    _one_line_error(_run_cli(p, "-o", str(tmp_path / "o.yaml")),
                    p, "node 'tostr'", "STRING")


def test_unbound_symbolic_dim(tmp_path):
    x = h.make_tensor_value_info("x", T.FLOAT, ["N", "seq"])
    y = h.make_tensor_value_info("y", T.FLOAT, ["N", "seq"])
    p = _save(tmp_path, [h.make_node("Relu", ["x"], ["y"], name="r")], [x], [y], [])
    _one_line_error(_run_cli(p, "-o", str(tmp_path / "o.yaml")),
                    p, "input 'x'", "--dim seq=N")
    g = _import(p, "--batch", "2", "--dim", "seq=7")
    assert _by_name(g)["r"]["memory"] == 2 * 7 * F


def test_fixed_batch_refuses_other_batch(tmp_path):
    x = h.make_tensor_value_info("x", T.FLOAT, [2, 3])
    y = h.make_tensor_value_info("y", T.FLOAT, [2, 3])
    p = _save(tmp_path, [h.make_node("Relu", ["x"], ["y"], name="r")], [x], [y], [])
    _one_line_error(_run_cli(p, "-o", str(tmp_path / "o.yaml"), "--batch", "8"),
                    p, "fixed at 2")


# ------------------------------------------------------- resnet18 export


def resnet18_conv_macs(batch, res):
    """Closed form: MACs of resnet18's 20 convolutions at res x res input."""
    def area(stride):
        return (res // stride) ** 2

    total = area(2) * 64 * 3 * 7 * 7  # stem
    total += 4 * area(4) * 64 * 64 * 9  # layer1: four 3x3 convs
    for c, s in ((128, 8), (256, 16), (512, 32)):
        total += area(s) * (
            c * (c // 2) * 9  # strided 3x3 conv, C/2 -> C
            + 3 * c * c * 9  # three 3x3 convs, C -> C
            + c * (c // 2)  # 1x1 downsample
        )
    return batch * total


_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _remat_bin():
    """$REMAT_BIN, else this checkout's release build, else the main one's."""
    if os.environ.get("REMAT_BIN"):
        candidates = [os.environ["REMAT_BIN"]]
    else:
        candidates = [os.path.join(_REPO, "target", "release", "remat"),
                      "/work/main/target/release/remat"]
    for b in candidates:
        if os.path.isfile(b) and os.access(b, os.X_OK):
            return b
    return None


@pytest.fixture(scope="module")
def resnet18_graph(tmp_path_factory):
    torch = pytest.importorskip("torch")
    torchvision = pytest.importorskip("torchvision")
    d = tmp_path_factory.mktemp("r18")
    path = str(d / "resnet18.onnx")
    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).eval()
    x = torch.randn(1, 3, 64, 64)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            torch.onnx.export(
                model, (x,), path, dynamo=False, input_names=["image"],
                output_names=["logits"],
                dynamic_axes={"image": {0: "batch"}, "logits": {0: "batch"}},
            )
        except (RuntimeError, ImportError, ValueError, TypeError) as e:
            # an exporter that needs what is not installed
            pytest.skip(f"torch.onnx.export failed here: {e}")
    out = str(d / "resnet18.yaml")
    assert onnx_import.main([path, "-o", out, "--batch", "2"]) == 0
    with open(out) as f:
        return out, yaml.safe_load(f)


def test_resnet18_conv_macs_closed_form(resnet18_graph):
    _, g = resnet18_graph
    convs = [n for n in g["nodes"] if n["op"] == "Conv"]
    assert len(convs) == 20
    assert sum(n["cost"] for n in convs) == resnet18_conv_macs(2, 64) == 296_091_648
    gemm = [n for n in g["nodes"] if n["op"] == "Gemm"]
    assert [n["cost"] for n in gemm] == [2 * 1000 * 512]
    n = _by_name(g)
    assert n["image"]["memory"] == 2 * 3 * 64 * 64 * F
    assert n["loss"]["cost"] == 2 * 1000
    # the exporter folds eval-mode BN into the convs; the weights are the
    # conv and fc tensors (with conv biases from the folding)
    assert g["fixed_memory"] == 2 * F * int(g["meta"]["parameters"])
    # the graph has one sink
    used = {d for v in g["nodes"] for d in v.get("deps", [])}
    assert [v["name"] for v in g["nodes"] if v["name"] not in used] == ["loss"]


def _remat(*args):
    return subprocess.run(
        [_remat_bin(), *args], capture_output=True, text=True, timeout=300, check=False
    )


@pytest.mark.skipif(_remat_bin() is None, reason="remat binary not built")
def test_resnet18_remat_inspect_and_solve(resnet18_graph):
    path, _ = resnet18_graph
    res = _remat("inspect", "--json", path)
    assert res.returncode == 0, res.stderr
    info = json.loads(res.stdout)
    assert info["batch_size"] == 2
    peak, low = info["checkpoint_all_peak"], info["smallest_budget"]
    assert low < peak
    # the weights dominate a small-resolution resnet18, so a budget between
    # the smallest feasible one and the checkpoint-all peak, in bytes
    budget = (low + peak) // 2
    res = _remat("solve", path, "-b", str(budget), "-s", "remat-fast", "--time-limit", "10")
    assert res.returncode == 0, res.stderr
    assert re.search(r"status\s+(optimal|feasible)", res.stdout), res.stdout


def test_initializer_dims_must_match_its_data(tmp_path):
    """A weight whose dims were edited (16x3 over 16x8 floats) was imported with the
    phantom shape's parameter count and MACs; a directory said 'no such file'."""
    path = mlp(tmp_path)
    model = onnx.load(path)
    w1 = next(t for t in model.graph.initializer if t.name == "w1")
    full = onnx.numpy_helper.to_array(w1)
    w1.CopyFrom(onnx.numpy_helper.from_array(full, "w1"))  # raw_data form
    del w1.dims[:]
    w1.dims.extend([16, 3])
    onnx.save(model, path)
    _one_line_error(_run_cli(path, "-o", str(tmp_path / "x.yaml")),
                    "initializer 'w1' has dims [16, 3] (192 bytes) but holds 512 bytes")
    _one_line_error(_run_cli(str(tmp_path), "-o", str(tmp_path / "y.yaml")), "a directory")


# ------------------------------------------------- defects found in testing


def test_reshape_to_a_size_fixed_at_export_is_refused(tmp_path):
    """A Reshape whose target was baked in at export (seq=16 in a
    TransformerEncoder, imported with --dim seq=40) was accepted, and the
    file mixed sizes of both values for a model that cannot run."""
    x = h.make_tensor_value_info("x", T.FLOAT, ["batch", 32])
    y = h.make_tensor_value_info("y", T.FLOAT, ["a", "b", "c"])
    nodes = [
        h.make_node("MatMul", ["x", "W"], ["a"], name="mm"),
        h.make_node("Reshape", ["a", "shp"], ["r"], name="rs"),
        h.make_node("Relu", ["r"], ["y"], name="relu"),
    ]
    inits = [_w("W", [32, 32]), h.make_tensor("shp", T.INT64, [3], [2, 4, 8])]
    p = _save(tmp_path, nodes, [x], [y], inits)
    # batch 8: 8 x 32 = 256 elements cannot become 2 x 4 x 8 = 64
    _one_line_error(_run_cli(p, "-o", str(tmp_path / "o.yaml"), "--batch", "8"),
                    p, "node 'rs' (Reshape)", "[8, 32] (256 elements)",
                    "[2, 4, 8] (64 elements)", "fixed at export")
    assert not (tmp_path / "o.yaml").exists()
    # at the exported batch (2 x 32 = 64) it is a view, as before
    g = _import(p, "--batch", "2")
    n = _by_name(g)
    assert n["relu"]["deps"] == ["mm"] and n["relu"]["memory"] == 64 * F


def test_scalar_parameter_is_not_folded(tmp_path):
    """A learnable scalar (CLIP's logit_scale) was folded into a constant
    when the shapes needed folding, so the Mul reading exp(scale) lost its
    dep and its saved inputs."""
    x = h.make_tensor_value_info("x", T.FLOAT, ["N", 4, 8])
    y = h.make_tensor_value_info("y", T.FLOAT, [None, None])
    nodes = [
        h.make_node("MatMul", ["x", "W"], ["a"], name="mm"),
        # target = Cast(Cast(Shape(a)[0:1]) * one): data propagation stops at
        # the Casts; `one` is a float scalar initializer in shape arithmetic
        h.make_node("Shape", ["a"], ["sh"], name="shape", end=1),
        h.make_node("Cast", ["sh"], ["shf"], name="castf", to=T.FLOAT),
        h.make_node("Mul", ["shf", "one"], ["tf"], name="times1"),
        h.make_node("Cast", ["tf"], ["n"], name="casti", to=T.INT64),
        h.make_node("Concat", ["n", "minus1"], ["target"], name="cat", axis=0),
        h.make_node("Reshape", ["a", "target"], ["r"], name="flat"),
        h.make_node("Exp", ["scale"], ["e"], name="exp"),
        h.make_node("Mul", ["r", "e"], ["y"], name="mul"),
    ]
    inits = [_w("W", [8, 8]), h.make_tensor("scale", T.FLOAT, [], [2.3]),
             h.make_tensor("one", T.FLOAT, [], [1.0]),
             h.make_tensor("minus1", T.INT64, [1], [-1])]
    p = _save(tmp_path, nodes, [x], [y], inits)
    bound = onnx.load(p)
    onnx_import._bind_dims(bound, 3, {})
    assert onnx_import._has_symbolic(onnx_import._infer(bound))  # needs the fold
    g = _import(p, "--batch", "3")
    n = _by_name(g)
    assert n["exp"]["memory"] == F and n["exp"]["cost"] == 1 and "deps" not in n["exp"]
    assert "requires_grad" not in n["exp"]  # the scale is trained
    assert n["mul"]["deps"] == ["mm", "exp"]
    assert n["mul"]["saves"] == ["mm", "exp"]  # each factor for the other's gradient
    assert n["mul"]["memory"] == 3 * 32 * F
    # W, scale and one are parameters (float initializers), minus1 is not;
    # the folded Reshape target [-1, 32] is a constant of two int64
    assert g["meta"]["parameters"] == str(64 + 1 + 1)
    assert g["fixed_memory"] == 2 * F * 66 + 8 + 16


def test_batch_binds_only_the_batch_dimension(tmp_path):
    """A second input bias[seq, seq] had its leading 'seq' bound to --batch."""
    x = h.make_tensor_value_info("x", T.FLOAT, ["batch", "seq", 4])
    bias = h.make_tensor_value_info("bias", T.FLOAT, ["seq", "seq"])
    m = h.make_tensor_value_info("m", T.FLOAT, ["batch", 1, 1])
    y = h.make_tensor_value_info("y", T.FLOAT, ["batch", "seq", "seq"])
    nodes = [
        h.make_node("MatMul", ["x", "W"], ["a"], name="mm"),
        h.make_node("Transpose", ["a"], ["at"], name="t", perm=[0, 2, 1]),
        h.make_node("MatMul", ["a", "at"], ["s"], name="scores"),
        h.make_node("Add", ["s", "bias"], ["sb"], name="add"),
        h.make_node("Mul", ["sb", "m"], ["y"], name="mask"),
    ]
    p = _save(tmp_path, nodes, [x, bias, m], [y], [_w("W", [4, 4])])
    _one_line_error(_run_cli(p, "-o", str(tmp_path / "o.yaml"), "--batch", "4"),
                    p, "'seq'", "--dim seq=N")
    g = _import(p, "--batch", "4", "--dim", "seq=3")
    n = _by_name(g)
    assert g["batch_size"] == 4
    assert n["x"]["memory"] == 4 * 3 * 4 * F
    assert n["bias"]["memory"] == 3 * 3 * F  # not 4 x 4
    assert n["m"]["memory"] == 4 * F  # its leading 'batch' is the batch
    assert n["mask"]["memory"] == 4 * 3 * 3 * F


def test_dim_option_checks(tmp_path):
    """--dim N=8 on the batch wrote batch_size 1 over sizes of batch 8; a
    --dim naming nothing, or given twice, was accepted; '²' crashed."""
    p = mlp(tmp_path)  # x[N, 8]: N is the batch
    g = _import(p, "--dim", "N=8")
    assert g["batch_size"] == 8 and _by_name(g)["x"]["memory"] == 8 * 8 * F
    g = _import(p, "--batch", "8", "--dim", "N=8")
    assert g["batch_size"] == 8
    o = str(tmp_path / "o.yaml")
    _one_line_error(_run_cli(p, "-o", o, "--batch", "2", "--dim", "N=8"),
                    "--dim N=8 and --batch 2 disagree", "--batch")
    _one_line_error(_run_cli(p, "-o", o, "--dim", "nosuch=3"),
                    p, "no symbolic dimension 'nosuch'", "they have: N")
    _one_line_error(_run_cli(p, "-o", o, "--dim", "N=2", "--dim", "N=2"),
                    "--dim N is given twice")
    for bad in (["--dim", "N=\u00b2"], ["--dim", "N=\u0663"], ["--dim", "N=0"],
                ["--batch", "\u00b2"], ["--batch", "0"]):
        _one_line_error(_run_cli(p, "-o", o, *bad),
                        "--batch must be a whole number from 1 to" if bad[0] == "--batch"
                        else "N a whole number from 1 to")
    assert not os.path.exists(o)


def test_batch_and_dim_upper_bounds(tmp_path, capsys):
    """--batch 2**63 was a ValueError traceback (protobuf's int64), and --batch 2**32
    wrote a file remat refuses ('batch_size: expected a whole number from 1 to
    4294967295'); so did --dim on the batch's name, and --dim N=2**63 crashed."""
    p = mlp(tmp_path)  # x[N, 8]: N is the batch
    o = str(tmp_path / "o.yaml")
    for bad, needle in [
        (["--batch", "4294967296"],
         "--batch must be a whole number from 1 to 4294967295, not '4294967296'"),
        (["--batch", "9223372036854775808"], "from 1 to 4294967295, not '9223372036854775808'"),
        (["--dim", "N=4294967296"],
         f"{p}: --dim N=4294967296: the batch must be at most 4294967295 (remat's batch_size)"),
        (["--dim", "N=9223372036854775808"], "--dim wants NAME=N with N a whole number from "
         "1 to 9223372036854775807 (an ONNX dimension is an int64), not 'N=9223372036854775808'"),
    ]:
        capsys.readouterr()
        rc = onnx_import.main([p, "-o", o, *bad])  # in-process: faster than _run_cli
        err = capsys.readouterr().err
        _one_line_error(subprocess.CompletedProcess([], rc, "", err), needle)
    assert not os.path.exists(o)
    # the largest batch remat takes is written, and remat reads it (_import runs inspect)
    g = _import(p, "--batch", "4294967295")
    assert g["batch_size"] == 4294967295
    assert _by_name(g)["x"]["memory"] == 4294967295 * 8 * F


def test_random_ops_with_inputs_are_fresh_values(tmp_path):
    """RandomNormalLike(ConstantOfShape(...)) (a VAE's noise) and Bernoulli
    were folded as constants: the Mul reading the noise saved nothing."""
    x = h.make_tensor_value_info("x", T.FLOAT, [2, 4])
    y = h.make_tensor_value_info("y", T.FLOAT, [2, 4])
    nodes = [
        h.make_node("Gemm", ["x", "W"], ["a"], name="fc"),
        _const("zeros", [0.0] * 8, dims=[2, 4]),
        h.make_node("RandomNormalLike", ["zeros"], ["eps"], name="noise"),
        h.make_node("Mul", ["a", "eps"], ["m"], name="reparam"),
        _const("half", [0.5] * 8, dims=[2, 4]),
        h.make_node("Bernoulli", ["half"], ["keep"], name="coin"),
        h.make_node("Sigmoid", ["m"], ["s"], name="sig"),
        h.make_node("Bernoulli", ["s"], ["b"], name="sample"),
        h.make_node("Mul", ["m", "keep"], ["mk"], name="drop"),
        h.make_node("Add", ["mk", "b"], ["y"], name="add"),
    ]
    g = _import(_save(tmp_path, nodes, [x], [y], [_w("W", [4, 4])]))
    n = _by_name(g)
    assert n["noise"]["requires_grad"] is False and "deps" not in n["noise"]
    assert n["noise"]["memory"] == 8 * F and n["noise"]["cost"] == 8
    assert n["reparam"]["deps"] == ["fc", "noise"]
    assert n["reparam"]["saves"] == ["noise"]  # for fc's gradient
    assert n["coin"]["requires_grad"] is False and "deps" not in n["coin"]
    assert n["drop"]["deps"] == ["reparam", "coin"] and n["drop"]["saves"] == ["coin"]
    # Bernoulli reads its probabilities, but no gradient flows through it
    assert n["sample"]["deps"] == ["sig"] and n["sample"]["requires_grad"] is False


def test_identity_of_a_parameter_is_a_parameter(tmp_path):
    """The TorchScript exporter stores equal-valued parameters once and the
    other copies as Identity(first); a 2-layer TransformerEncoder counted
    8448 parameters of PyTorch's 17088."""
    x = h.make_tensor_value_info("x", T.FLOAT, ["N", 4])
    y = h.make_tensor_value_info("y", T.FLOAT, ["N", 4])
    nodes = [
        h.make_node("Identity", ["W"], ["W2"], name="dup"),
        h.make_node("Identity", ["shp"], ["shp2"], name="dup_shape"),
        h.make_node("MatMul", ["x", "W"], ["a"], name="mm1"),
        h.make_node("Reshape", ["a", "shp"], ["ar"], name="view1"),
        h.make_node("MatMul", ["ar", "W2"], ["b"], name="mm2"),
        h.make_node("Reshape", ["b", "shp2"], ["y"], name="view2"),
    ]
    inits = [_w("W", [4, 4]), h.make_tensor("shp", T.INT64, [2], [-1, 4])]
    g = _import(_save(tmp_path, nodes, [x], [y], inits), "--batch", "2")
    n = _by_name(g)
    assert g["meta"]["parameters"] == str(2 * 16)
    # two 4x4 parameters with gradients; the integer shape once
    assert g["fixed_memory"] == 2 * F * 32 + 2 * 8
    assert [v["name"] for v in g["nodes"]] == ["x", "mm1", "mm2", "loss"]
    assert n["mm2"]["deps"] == ["mm1"] and n["mm2"]["saves"] == ["mm1"]
    assert "requires_grad" not in n["mm2"]


def _if_model(tmp_path):
    x = h.make_tensor_value_info("x", T.FLOAT, ["N", 4])
    y = h.make_tensor_value_info("y", T.FLOAT, ["N", 4])
    then_g = h.make_graph(
        [h.make_node("Gemm", ["x", "W", "b"], ["t1"], transB=1),
         h.make_node("Relu", ["t1"], ["t_out"])],
        "then", [], [h.make_tensor_value_info("t_out", T.FLOAT, None)])
    else_g = h.make_graph(
        [h.make_node("Gemm", ["x", "W", "b"], ["e1"], transB=1),
         h.make_node("Mul", ["e1", "two"], ["e_out"])],
        "else", [], [h.make_tensor_value_info("e_out", T.FLOAT, None)])
    nodes = [
        h.make_node("ReduceSum", ["x"], ["s"], name="sum", keepdims=0),
        _const("zero", 0.0),
        h.make_node("Greater", ["s", "zero"], ["c"], name="cond"),
        h.make_node("If", ["c"], ["y"], name="branch", then_branch=then_g,
                    else_branch=else_g),
    ]
    inits = [_w("W", [4, 4]), _w("b", [4]), h.make_tensor("two", T.FLOAT, [], [2.0])]
    return _save(tmp_path, nodes, [x], [y], inits)


def test_if_reads_what_its_branches_read(tmp_path):
    """An If whose branches multiply by a weight got requires_grad false (no
    backward pass at all) while the weight was charged in fixed_memory."""
    g = _import(_if_model(tmp_path), "--batch", "3")
    n = _by_name(g)
    assert n["branch"]["deps"] == ["cond", "x"]
    assert "requires_grad" not in n["branch"]  # the branches read W and b
    assert "saves" not in n["branch"]  # the default: itself and its deps
    assert n["branch"]["memory"] == 3 * 4 * F
    assert g["fixed_memory"] == 2 * F * (16 + 4 + 1) + F


def test_loop_shape_failure_names_control_flow(tmp_path):
    # a Loop whose scan output stacks one x @ W per iteration: its leading
    # dimension is the trip count, a runtime value
    x = h.make_tensor_value_info("x", T.FLOAT, ["N", 4])
    n_in = h.make_tensor_value_info("n", T.INT64, [])
    y = h.make_tensor_value_info("y", T.FLOAT, [None, "N", 4])
    body = h.make_graph(
        [h.make_node("MatMul", ["x", "W"], ["xo"]),
         h.make_node("Identity", ["cond_in"], ["cond_out"])],
        "body",
        [h.make_tensor_value_info("i", T.INT64, []),
         h.make_tensor_value_info("cond_in", T.BOOL, [])],
        [h.make_tensor_value_info("cond_out", T.BOOL, []),
         h.make_tensor_value_info("xo", T.FLOAT, None)])
    nodes = [_const("true", True, dtype=T.BOOL),
             h.make_node("Loop", ["n", "true"], ["y"], name="loop", body=body)]
    p = _save(tmp_path, nodes, [x, n_in], [y], [_w("W", [4, 4])])
    _one_line_error(_run_cli(p, "-o", str(tmp_path / "o.yaml"), "--batch", "2"),
                    p, "node 'loop' (Loop)", "dimension 0 of output 'y' unknown",
                    "Loop is control flow", "export with tracing")


def test_typed_field_initializers_are_accepted(tmp_path):
    """COMPLEX64 in float_data (two floats each) and INT4 packed in
    int32_data (two per entry) were refused as holding the wrong count."""
    x = h.make_tensor_value_info("x", T.FLOAT, ["N", 6])
    y = h.make_tensor_value_info("y", T.FLOAT, ["N", 6])
    c = h.make_tensor("c", T.COMPLEX64, [6], [complex(i, -i) for i in range(6)])
    assert len(c.float_data) == 12
    nodes = [h.make_node("Size", ["c"], ["s"]), h.make_node("Cast", ["s"], ["sf"], to=T.FLOAT),
             h.make_node("Add", ["x", "sf"], ["y"], name="add")]
    g = _import(_save(tmp_path, nodes, [x], [y], [c], "c.onnx", opset=21))
    assert g["fixed_memory"] == 6 * 8  # a buffer: 6 complex64 of 8 bytes
    q = h.make_tensor("q", T.INT4, [5], [1, -2, 3, -4, 5])
    assert len(q.int32_data) == 3
    nodes = [h.make_node("DequantizeLinear", ["q", "sc"], ["dq"], name="dq"),
             h.make_node("Add", ["x", "dq"], ["y"], name="add")]
    x5 = h.make_tensor_value_info("x", T.FLOAT, ["N", 5])
    y5 = h.make_tensor_value_info("y", T.FLOAT, ["N", 5])
    sc = h.make_tensor("sc", T.FLOAT, [], [0.5])
    p = _save(tmp_path, nodes, [x5], [y5], [q, sc], "q.onnx", opset=21)
    g = _import(p)
    assert g["fixed_memory"] == 3 + 2 * F  # 5 int4 in 3 bytes; the scale a parameter
    # one packed entry short is still refused
    model = onnx.load(p)
    del model.graph.initializer[0].int32_data[-1]
    onnx.save(model, p)
    _one_line_error(_run_cli(p, "-o", str(tmp_path / "o.yaml")),
                    "initializer 'q' has dims [5] (5 elements, 3 values) but holds 2 values")


def test_names_with_emoji_and_control_characters(tmp_path):
    """An emoji was written as a surrogate pair escape that remat cannot
    read; C1 control characters were kept; --name with a tab was written."""
    x = h.make_tensor_value_info("x", T.FLOAT, ["batch", 8])
    y = h.make_tensor_value_info("y", T.FLOAT, ["batch", 8])
    nodes = [h.make_node("MatMul", ["x", "W"], ["a"], name="mm\U0001F600"),
             h.make_node("Relu", ["a"], ["b"], name="r\u00e9lu\u009bx"),
             h.make_node("Tanh", ["b"], ["y"], name="t\u2028h")]
    p = _save(tmp_path, nodes, [x], [y], [_w("W", [8, 8])])
    g = _import(p, "--batch", "2", "--name", "mod\u00e8le \u2713")
    assert [v["name"] for v in g["nodes"]] == [
        "x", "mm\U0001F600", "r\u00e9lu_x", "t_h", "loss"]
    assert g["name"] == "mod\u00e8le \u2713"
    with open(tmp_path / "out.yaml", encoding="utf-8") as f:
        text = f.read()
    assert "mm\U0001F600" in text and "\\ud83d" not in text
    for bad in ("a\tb", "a\nb", "a\u0085b", "  "):
        _one_line_error(_run_cli(p, "-o", str(tmp_path / "o.yaml"), "--name", bad),
                        "--name", "control characters")
    assert not (tmp_path / "o.yaml").exists()


def test_node_name_with_invalid_utf8(tmp_path):
    """protobuf returns a string field holding invalid UTF-8 as bytes: the
    importer crashed with a TypeError."""
    x = h.make_tensor_value_info("x", T.FLOAT, ["N", 4])
    y = h.make_tensor_value_info("y", T.FLOAT, ["N", 4])
    p = _save(tmp_path, [h.make_node("Tanh", ["x"], ["y"], name="TANH")], [x], [y], [])
    with open(p, "rb") as f:
        data = f.read()
    assert data.count(b"TANH") == 1
    with open(p, "wb") as f:
        f.write(data.replace(b"TANH", b"T\xffNH"))  # same length
    out = str(tmp_path / "o.yaml")
    res = _run_cli(p, "-o", out, "--batch", "2")
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr
    with open(out, encoding="utf-8") as f:
        g = yaml.safe_load(f)
    assert _by_name(g)["T\ufffdNH"]["memory"] == 2 * 4 * F


def test_truncated_external_data_is_refused(tmp_path):
    """A truncated .onnx.data file was imported as if whole."""
    d = _mlp_with_external_data(tmp_path)
    m = onnx.load(str(d / "mlp.onnx"), load_external_data=False)
    w1 = next(t for t in m.graph.initializer if t.name == "w1")
    offset = int({e.key: e.value for e in w1.external_data}.get("offset", 0))
    os.truncate(d / "mlp.data", offset + 100)
    _one_line_error(_run_cli(str(d / "mlp.onnx"), "-o", str(tmp_path / "o.yaml")),
                    "initializer 'w1' has dims [16, 8] (512 bytes)",
                    f"external data file 'mlp.data' holds 100 bytes from offset {offset}")
