"""Import an ONNX model as a `graph: forward` file for remat.

Usage::

    python -m remat_torch.onnx_import model.onnx -o graph.yaml [--batch N]
    python -m remat_torch from-onnx model.onnx -o graph.yaml [--batch N]

Every ONNX op output that is a real tensor becomes a node: its memory is the
element count from ONNX shape inference times the dtype size, its cost the
op's multiply-accumulate count (`cost_unit: mac`). Graph inputs become nodes
without a gradient, initializers go into `fixed_memory`, views (Reshape,
Flatten, Squeeze, Unsqueeze, Identity, inference Dropout) are folded into the
tensor they alias, shape arithmetic is folded away as constant, and a `loss`
node reading the graph outputs is added as the single sink. The choices are
written down in docs/onnx.md.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import re
import sys

from .files import write_text

IMPORTER = "remat_torch.onnx_import"
MAX_BATCH = 2**32 - 1  # remat's batch_size is a u32 (docs/format.md)
MAX_DIM = 2**63 - 1  # an ONNX dim_value is an int64


class ImportFailure(Exception):
    """A problem with the input: reported as one line, exit code 2."""


# --------------------------------------------------------------------------
# dtypes

# Bits per element, by TensorProto data type name. STRING and UNDEFINED have
# no fixed size and are refused.
_DTYPE_BITS = {
    "FLOAT": 32, "UINT8": 8, "INT8": 8, "UINT16": 16, "INT16": 16,
    "INT32": 32, "INT64": 64, "BOOL": 8, "FLOAT16": 16, "DOUBLE": 64,
    "UINT32": 32, "UINT64": 64, "COMPLEX64": 64, "COMPLEX128": 128,
    "BFLOAT16": 16, "FLOAT8E4M3FN": 8, "FLOAT8E4M3FNUZ": 8, "FLOAT8E5M2": 8,
    "FLOAT8E5M2FNUZ": 8, "FLOAT8E8M0": 8, "UINT4": 4, "INT4": 4,
    "FLOAT4E2M1": 4, "UINT2": 2, "INT2": 2, "FLOAT6E2M3": 6, "FLOAT6E3M2": 6,
}

# Types a gradient can flow through (what PyTorch lets require grad and ONNX
# exports from a trainable model).
_GRAD_DTYPES = {"FLOAT", "DOUBLE", "FLOAT16", "BFLOAT16"}


def _dtype_name(elem_type: int) -> str:
    from onnx import TensorProto

    try:
        return TensorProto.DataType.Name(elem_type)
    except ValueError:
        return f"type #{elem_type}"


def _nbytes(numel: int, elem_type: int, where: str) -> int:
    name = _dtype_name(elem_type)
    bits = _DTYPE_BITS.get(name)
    if bits is None:
        raise ImportFailure(f"{where} has dtype {name}, which has no fixed byte size")
    return (numel * bits + 7) // 8


def _numel(shape) -> int:
    return math.prod(shape) if shape else 1


# --------------------------------------------------------------------------
# op tables

# Ops whose first output is a view of (or identical to) their first input: no
# node, no memory; readers of the output read the input's node instead.
VIEW_OPS = {"Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Dropout"}

# Ops whose outputs depend on shapes only: folded as constants.
SHAPE_OPS = {"Shape", "Size"}

# Random ops produce a fresh tensor each step, whatever they read: never
# folded as constants, never a gradient through them. The `*Like` ops read
# their input for its shape and dtype only; Bernoulli and Multinomial read
# probabilities, so those are their deps. (A VAE's `RandomNormalLike` noise,
# torchvision's StochasticDepth mask in a training export.)
SOURCE_OPS = {
    "RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
    "Bernoulli", "Multinomial",
}
SHAPE_ONLY_INPUT_OPS = {"RandomNormalLike", "RandomUniformLike"}

# Ops that reshape without moving data: input and output hold the same
# elements, which the importer checks (see build_graph).
RESHAPE_OPS = {"Reshape", "Flatten", "Squeeze", "Unsqueeze"}

# Ops with subgraphs: the importer treats each as one opaque op.
CONTROL_FLOW = {"If", "Loop", "Scan"}

ELEMENTWISE = {
    "Add", "Sub", "Mul", "Div", "Pow", "Neg", "Abs", "Relu", "LeakyRelu",
    "PRelu", "Elu", "Selu", "Celu", "Gelu", "Sigmoid", "HardSigmoid",
    "HardSwish", "Swish", "Tanh", "Exp", "Log", "Sqrt", "Reciprocal", "Erf",
    "Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh",
    "Acosh", "Atanh", "Softplus", "Softsign", "Mish", "ThresholdedRelu",
    "Clip", "Floor", "Ceil", "Round", "Sign", "Mod", "BitShift", "And", "Or",
    "Xor", "Not", "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual",
    "IsNaN", "IsInf", "Where", "Shrink", "QuantizeLinear", "DequantizeLinear",
    "BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitwiseNot", "CumSum", "Trilu",
    "Dropout",  # training mode only; in inference it is a view
}
# n-ary reductions over inputs: (inputs - 1) operations per output element.
VARIADIC = {"Sum", "Mean", "Max", "Min"}
# Pure data movement: one per output element.
COPY_OPS = {
    "Concat", "Split", "Slice", "Transpose", "Pad", "Expand", "Tile",
    "Gather", "GatherElements", "GatherND", "ScatterElements", "ScatterND",
    "Cast", "CastLike", "DepthToSpace", "SpaceToDepth", "ReverseSequence",
    "Compress", "OneHot", "ConstantOfShape", "EyeLike", "Range",
}
# Reductions read every input element once.
REDUCE_OPS = {
    "ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd",
    "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp",
    "ReduceSumSquare", "ArgMax", "ArgMin", "GlobalAveragePool",
    "GlobalMaxPool", "GlobalLpPool", "TopK",
}
# Per-element operation counts of normalisations and softmax (see docs).
PER_ELEMENT = {
    "BatchNormalization": 2,  # inference form: (x - mean) * scale', + bias
    "LayerNormalization": 4,  # mean, variance, normalise, affine
    "GroupNormalization": 4,
    "InstanceNormalization": 4,
    "MeanVarianceNormalization": 4,
    "RMSNormalization": 3,  # mean square, normalise, scale
    "LpNormalization": 2,
    "Softmax": 3,  # exp, sum, divide
    "LogSoftmax": 3,
    "Hardmax": 1,
}
POOL_OPS = {"MaxPool", "AveragePool", "LpPool", "MaxRoiPool"}

# What each op's gradient reads besides the incoming gradient (only tensors
# that are nodes; weights are resident in fixed_memory anyway).
#   "self": the output; "inputs": the op's activation inputs; "indices": its
#   non-float activation inputs (gather indices, where-conditions); [] none.
# Ops not listed keep the format's default, self + inputs.
SAVES_SELF = {
    "Relu", "Sigmoid", "Tanh", "Exp", "Sqrt", "Reciprocal", "Softmax",
    "LogSoftmax", "Elu", "Selu",
}
# Products (Gemm's bias input aside): the gradient for one factor reads the
# others, so a factor is saved only when another factor needs a gradient
# (x @ W saves x for W's gradient; x / 8 saves nothing).
PRODUCTS = {
    "Conv", "ConvTranspose", "ConvInteger", "Gemm", "MatMul", "MatMulInteger",
    "Einsum", "Mul",
}
SAVES_INPUTS = {
    "Pow", "BatchNormalization", "LayerNormalization",
    "GroupNormalization", "InstanceNormalization", "RMSNormalization",
    "MeanVarianceNormalization", "LpNormalization", "LeakyRelu", "PRelu",
    "Celu", "Gelu", "Erf", "Log", "Abs", "Sin", "Cos", "Tan", "Asin", "Acos",
    "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "Softplus", "Softsign",
    "HardSigmoid", "HardSwish", "Swish", "Mish", "Clip", "ThresholdedRelu",
    "Shrink", "ReduceSumSquare", "ReduceL1",
}
SAVES_NOTHING = {
    "Add", "Sub", "Neg", "Sum", "Mean", "Concat", "Split", "Slice",
    "Transpose", "Pad", "Expand", "Tile", "Cast", "CastLike", "DepthToSpace",
    "SpaceToDepth", "AveragePool", "GlobalAveragePool", "ReduceSum",
    "ReduceMean", "Resize", "Upsample", "Floor", "Ceil", "Round", "Sign",
    "Trilu", "CumSum", "ReverseSequence",
}
SAVES_INDICES = {
    "Gather", "GatherElements", "GatherND", "ScatterElements", "ScatterND",
    "Where", "Compress",
}


def _attr(node, name, default=None):
    from onnx import helper

    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def _einsum_macs(equation: str, in_shapes, out_shape):
    eq = equation.replace(" ", "")
    lhs, _, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(in_shapes):
        return None
    sizes = {}
    for term, shape in zip(terms, in_shapes):
        if shape is None:
            return None
        letters = term.replace("...", "")
        if "..." in term:
            # the letters after the ellipsis are the trailing dimensions
            head, _, tail = term.partition("...")
            dims = list(shape[: len(head)]) + list(shape[len(shape) - len(tail):])
        else:
            dims = list(shape)
        if len(dims) != len(letters):
            return None
        for ch, d in zip(letters, dims):
            sizes[ch] = max(sizes.get(ch, 1), d)
    if "->" not in eq:
        counts = {ch: lhs.count(ch) for ch in sizes}
        rhs = "".join(sorted(ch for ch, c in counts.items() if c == 1))
    contracted = [sizes[ch] for ch in sizes if ch not in rhs]
    return _numel(out_shape) * _numel(contracted)


def op_macs(node, in_shapes, out_shapes):
    """Multiply-accumulate count of one op, or None when there is no formula.

    `in_shapes`/`out_shapes` are the static shapes of the node's inputs and
    outputs (None for an absent optional one or an unknown shape).
    """
    op = node.op_type
    x = in_shapes[0] if in_shapes else None
    y = out_shapes[0] if out_shapes else None
    out_total = sum(_numel(s) for s in out_shapes if s is not None)
    try:
        if op in ("Conv", "ConvInteger"):
            w = in_shapes[1]
            return _numel(y) * w[1] * _numel(w[2:])
        if op == "QLinearConv":
            w = in_shapes[3]
            return _numel(y) * w[1] * _numel(w[2:])
        if op == "ConvTranspose":
            w = in_shapes[1]
            return _numel(x) * w[1] * _numel(w[2:])
        if op == "Gemm":
            a, b = in_shapes[0], in_shapes[1]
            m, k = (a[1], a[0]) if _attr(node, "transA", 0) else (a[0], a[1])
            n = b[0] if _attr(node, "transB", 0) else b[1]
            return m * n * k
        if op in ("MatMul", "MatMulInteger"):
            return _numel(y) * x[-1]
        if op == "QLinearMatMul":
            return _numel(y) * x[-1]
        if op == "Einsum":
            return _einsum_macs(_attr(node, "equation").decode(), in_shapes, y)
        if op in ("LSTM", "GRU", "RNN"):
            w, r = in_shapes[1], in_shapes[2]
            seq_batch = x[0] * x[1]
            return seq_batch * (_numel(w) + _numel(r))
        if op in POOL_OPS:
            k = _attr(node, "kernel_shape")
            if k is None:
                return None
            return _numel(y) * _numel(k)
        if op in PER_ELEMENT:
            return PER_ELEMENT[op] * _numel(y)
        if op in ELEMENTWISE:
            return _numel(y)  # Dropout's mask is not counted apart
        if op in VARIADIC:
            return max(1, len([s for s in in_shapes if s is not None]) - 1) * out_total
        if op in COPY_OPS or op in SOURCE_OPS:
            return out_total
        if op in REDUCE_OPS:
            return _numel(x)
        if op == "LRN":
            return _numel(y) * _attr(node, "size", 1)
        if op in ("Resize", "Upsample"):
            mode = _attr(node, "mode", b"nearest")
            mode = mode.decode() if isinstance(mode, bytes) else mode
            spatial = max(0, len(y) - 2)
            per = {"linear": 2**spatial, "cubic": 4**spatial}.get(mode, 1)
            return per * _numel(y)
    except (TypeError, IndexError, AttributeError, KeyError):
        return None
    return None


# --------------------------------------------------------------------------
# the import


class _Tensor:
    """What an ONNX tensor name stands for."""

    __slots__ = ("key", "kind")

    # kind: "input" | "act" (a node), "param" | "buffer" (fixed memory),
    # "const" (folded: constants and shape arithmetic)
    def __init__(self, kind, key=None):
        self.kind = kind
        self.key = key  # for input/act: the tensor name of the node


class _Node:
    __slots__ = (
        "deps", "elem_type", "key", "onnx_index", "op", "out_index",
        "requires_grad", "saves", "shape", "total_cost",
    )


def _dropout_training(node, const_nodes, opset) -> bool:
    """Whether a Dropout runs in training mode (opset 12 on: a constant true
    `training_mode` input, as a PyTorch export in TRAINING mode writes)."""
    from onnx import numpy_helper

    if opset < 12 or len(node.input) < 3 or not node.input[2]:
        return False
    src = const_nodes.get(node.input[2])
    if src is None:
        return False
    tensor = src if not hasattr(src, "op_type") else _attr(src, "value")
    try:
        return bool(numpy_helper.to_array(tensor).reshape(-1)[0])
    except (TypeError, ValueError, IndexError, AttributeError):
        return False


def _product_saves(op, ins, needs_grad):
    """Saved inputs of a product: each factor that another factor's gradient
    reads. `ins` are the op's inputs (None where absent)."""
    factors = list(enumerate(ins))
    if op == "Gemm":
        factors = factors[:2]  # C is added, not multiplied
    saves = []

    def add(x):
        if x is not None and x.kind in ("input", "act") and x.key not in saves:
            saves.append(x.key)

    if op == "Div":
        a = ins[0] if ins else None
        b = ins[1] if len(ins) > 1 else None
        if needs_grad(b):
            add(a)  # d(a/b)/db = -a/b^2
        if needs_grad(a) or needs_grad(b):
            add(b)
        return saves
    for i, x in factors:
        if any(needs_grad(y) for j, y in factors if j != i):
            add(x)
    return saves


def _outer_reads(node) -> list:
    """Names that the subgraphs of `node` (an If's branches, a Loop's or a
    Scan's body, nested ones included) read from the enclosing graph, in
    order. They are inputs of the op as much as its listed ones: an `If`
    whose branches multiply by a weight once got no gradient."""
    from onnx import AttributeProto

    reads = []

    def graph_reads(sub):
        defined = {i.name for i in sub.input}
        defined.update(t.name for t in sub.initializer)
        defined.update(t.values.name for t in sub.sparse_initializer)
        used = []
        for n in sub.node:
            used.extend(t for t in n.input if t)
            used.extend(node_reads(n))
            defined.update(o for o in n.output if o)
        used.extend(o.name for o in sub.output)
        return [t for t in used if t not in defined]

    def node_reads(n):
        out = []
        for a in n.attribute:
            if a.type == AttributeProto.GRAPH:
                out.extend(graph_reads(a.g))
            elif a.type == AttributeProto.GRAPHS:
                for sub in a.graphs:
                    out.extend(graph_reads(sub))
        return out

    for t in node_reads(node):
        if t not in reads:
            reads.append(t)
    return reads


def _load(path: str):
    import onnx
    from google.protobuf.message import DecodeError

    if os.path.isdir(path):
        raise ImportFailure("cannot read: a directory, not an ONNX file")
    if not os.path.isfile(path):
        raise ImportFailure("cannot read: no such file")
    try:
        model = onnx.load(path, load_external_data=False)
    except (DecodeError, ValueError, RuntimeError, UnicodeDecodeError) as e:
        raise ImportFailure(f"not an ONNX model ({_one_line(e)})") from None
    except OSError as e:
        raise ImportFailure(f"cannot read: {e.strerror or e}") from None
    if model.ir_version <= 0:
        raise ImportFailure("not an ONNX model (no IR version)")
    if len(model.graph.node) == 0:
        raise ImportFailure("the model's graph has no nodes")
    try:
        # by path, so that external data is looked up beside the model
        onnx.checker.check_model(path)
    except (onnx.checker.ValidationError, RuntimeError, ValueError) as e:
        raise ImportFailure(f"invalid ONNX model: {_one_line(e)}") from None
    _check_initializers(model, path)
    _strip_weights(model)
    if model.functions:
        import onnx.inliner

        try:
            model = onnx.inliner.inline_local_functions(model)
        except (RuntimeError, ValueError) as e:
            raise ImportFailure(f"cannot inline its local functions: {_one_line(e)}") from None
    return model


# Elements per entry of a typed data field, where it is not one: complex
# numbers take two floats (doubles) each; 4-bit and 2-bit types are packed
# into bytes, one byte per int32_data entry (as onnx.helper.make_tensor
# writes them), the low bits first.
_PER_ENTRY = {
    "COMPLEX64": 0.5, "COMPLEX128": 0.5,
    "INT4": 2, "UINT4": 2, "FLOAT4E2M1": 2, "INT2": 4, "UINT2": 4,
}


def _check_initializers(model, path):
    """Each initializer's data holds as many elements as its dims say. The checker does
    not look: a weight whose dims were edited (32x5x3x3 over 32x16x3x3 floats) was
    imported, with the parameter count and the convolution's MACs of the phantom
    shape. External data is checked by the file's length, without reading it: a
    truncated `.onnx.data` file was imported as if whole."""
    from onnx import TensorProto

    typed = ("float_data", "int32_data", "int64_data", "double_data", "uint64_data")
    for t in model.graph.initializer:
        numel = _numel(list(t.dims))
        where = f"initializer '{_text(t.name)}'"
        if t.data_location == TensorProto.EXTERNAL:
            _check_external(t, numel, where, os.path.dirname(os.path.abspath(path)))
            continue
        if t.raw_data:
            want = _nbytes(numel, t.data_type, where)
            if len(t.raw_data) != want:
                raise ImportFailure(f"{where} has dims {list(t.dims)} ({want} bytes) but holds "
                                    f"{len(t.raw_data)} bytes of data")
            continue
        per = _PER_ENTRY.get(_dtype_name(t.data_type), 1)
        want = math.ceil(numel / per)
        for f in typed:
            n = len(getattr(t, f))
            if n and n != want:
                shown = f"{numel} elements" if want == numel else f"{numel} elements, {want} values"
                raise ImportFailure(f"{where} has dims {list(t.dims)} ({shown}) but "
                                    f"holds {n} values")


def _check_external(t, numel, where, model_dir):
    """The external data file of initializer `t` holds its bytes."""
    info = {e.key: e.value for e in t.external_data}
    loc = info.get("location", "")
    want = _nbytes(numel, t.data_type, where)
    try:
        offset = int(info.get("offset") or 0)
        length = int(info["length"]) if info.get("length") else None
    except ValueError:
        raise ImportFailure(f"{where}: its external data offset or length is not "
                            "a number") from None
    if length is not None and length != want:
        raise ImportFailure(f"{where} has dims {list(t.dims)} ({want} bytes) but its "
                            f"external data length is {length} bytes")
    try:
        size = os.path.getsize(os.path.join(model_dir, loc))
    except OSError as e:
        raise ImportFailure(f"{where}: cannot read its external data file '{loc}': "
                            f"{e.strerror or e}") from None
    have = max(0, size - offset)
    if have < want:
        raise ImportFailure(f"{where} has dims {list(t.dims)} ({want} bytes) but its "
                            f"external data file '{loc}' holds {have} bytes from offset "
                            f"{offset} (truncated?)")


def _strip_weights(model):
    """Drops the data of large initializers, in place, keeping type and dims.

    Shape inference needs only those, and copies the whole model on every
    call: without the weights, a 300 MB model infers in a fraction of the
    time. Small tensors keep their data (they may be shape arithmetic).
    """
    from onnx import TensorProto

    fields = ("raw_data", "float_data", "int32_data", "int64_data", "double_data",
              "uint64_data", "string_data")
    for t in model.graph.initializer:
        if t.data_location == TensorProto.EXTERNAL or _numel(list(t.dims)) <= 64:
            continue
        for f in fields:
            t.ClearField(f)
        t.data_location = TensorProto.EXTERNAL
        del t.external_data[:]
        entry = t.external_data.add()
        entry.key, entry.value = "location", "remat-import-stripped"


def _one_line(e) -> str:
    msg = str(e).strip()
    return re.sub(r"\s+", " ", msg) or type(e).__name__


def _bind_dims(model, batch: int | None, dims: dict[str, int]):
    """Replace symbolic dimensions by values, in place.

    The batch is the leading dimension of the first graph input whose leading
    dimension is symbolic; `--batch` binds its name wherever it occurs. Other
    symbolic dimensions, the leading ones of other inputs included, are bound
    by name (`--dim NAME=N`): a second input `bias[seq, seq]` once had its
    `seq` silently set to the batch. Unnamed leading dimensions, which no
    `--dim` can reach, are taken as the batch. Returns the batch size the
    file is for.
    """
    g = model.graph
    inits = {t.name for t in g.initializer}
    inputs = [i for i in g.input if i.name not in inits]

    def leading(vi):
        t = vi.type.tensor_type
        if not vi.type.HasField("tensor_type") or not t.HasField("shape") or not t.shape.dim:
            return None
        return t.shape.dim[0]

    symbolic = []  # the inputs' symbolic dimension names, in order
    for vi in inputs:
        t = vi.type.tensor_type
        if vi.type.HasField("tensor_type") and t.HasField("shape"):
            for d in t.shape.dim:
                if not d.HasField("dim_value") and d.dim_param and d.dim_param not in symbolic:
                    symbolic.append(d.dim_param)
    for k in dims:
        if k not in symbolic:
            have = ", ".join(symbolic) if symbolic else "none"
            raise ImportFailure(f"--dim {k}=...: the model's inputs have no symbolic "
                                f"dimension '{k}' (they have: {have})")

    fixed_batches = set()
    batch_name = None  # None: no symbolic batch; "": an unnamed one
    for vi in inputs:
        d0 = leading(vi)
        if d0 is None:
            continue
        if d0.HasField("dim_value"):
            fixed_batches.add(d0.dim_value)
        elif batch_name is None:
            batch_name = d0.dim_param
    if batch_name and batch_name in dims:
        if batch is not None and batch != dims[batch_name]:
            raise ImportFailure(
                f"--dim {batch_name}={dims[batch_name]} and --batch {batch} disagree: "
                f"'{batch_name}' is the batch dimension (give it with --batch alone)")
        batch = dims[batch_name]
    symbolic_batch = batch_name is not None
    if batch is not None and not symbolic_batch and fixed_batches and batch not in fixed_batches:
        shown = ", ".join(str(b) for b in sorted(fixed_batches))
        raise ImportFailure(
            f"the model's batch dimension is fixed at {shown}, so --batch {batch} cannot apply "
            "(export it with a dynamic batch axis)"
        )
    if batch is None:
        batch = next(iter(sorted(fixed_batches)), None) if not symbolic_batch else 1
        batch = batch or 1
    if batch > MAX_BATCH:  # remat would refuse the file's batch_size
        given = (f"--dim {batch_name}={batch}" if batch_name and batch_name in dims
                 else f"the batch {batch}")
        raise ImportFailure(f"{given}: the batch must be at most {MAX_BATCH} "
                            "(remat's batch_size)")
    bind = dict(dims)
    if batch_name:
        bind[batch_name] = batch

    def fix(vi, is_input):
        t = vi.type.tensor_type
        if not t.HasField("shape"):
            return
        for k, d in enumerate(t.shape.dim):
            if d.HasField("dim_value"):
                continue
            if d.dim_param in bind:
                d.dim_value = bind[d.dim_param]
            elif is_input and k == 0 and not d.dim_param:
                d.dim_value = batch
            elif is_input:
                what = f"'{d.dim_param}'" if d.dim_param else "unnamed"
                hint = f"--dim {d.dim_param}=N" if d.dim_param else "a static export"
                raise ImportFailure(
                    f"input '{vi.name}': dimension {k} is symbolic ({what}); bind it with {hint}"
                )
            else:
                d.Clear()  # let shape inference compute it

    for vi in inputs:
        fix(vi, True)
    for vi in list(g.output) + list(g.value_info):
        fix(vi, False)
    return batch


def _infer(model):
    import onnx

    try:
        return onnx.shape_inference.infer_shapes(
            model, check_type=True, strict_mode=True, data_prop=True
        )
    except (
        onnx.shape_inference.InferenceError,
        onnx.checker.ValidationError,
        RuntimeError,
        ValueError,
    ) as e:
        msg = _one_line(e)
        m = re.search(r"node name: ([^)]*)\)", msg)
        where = f"node '{m.group(1)}': " if m and m.group(1) else ""
        raise ImportFailure(f"{where}shape inference failed: {msg}") from None


def _param_names(g):
    """The tensors taken as trainable parameters: every floating-point
    initializer except BatchNormalization's running statistics, and the
    output of an `Identity` reading a floating-point initializer.

    PyTorch's TorchScript exporter stores equal-valued parameters once and
    gives each other copy as `Identity(first)` (the freshly initialised
    layers of a TransformerEncoder, biases that start at zero): in the
    trained model each is a parameter of its own, with its own gradient.
    Counting and folding both use this one set, so that a scalar parameter
    (CLIP's `logit_scale`) is never folded into a constant.
    """
    bn_stats = set()
    for n in g.node:
        if n.op_type == "BatchNormalization":
            bn_stats.update(i for i in n.input[3:5] if i)
    floats = {t.name for t in g.initializer if _dtype_name(t.data_type) in _GRAD_DTYPES}
    params = floats - bn_stats
    for n in g.node:
        if (n.op_type == "Identity" and n.input and n.input[0] in floats
                and n.output and n.output[0] not in bn_stats):
            params.add(n.output[0])
    return params


# Shape arithmetic that ONNX's data propagation cannot follow (a Div or Cast
# between Shape and Reshape, say) leaves symbolic dimensions behind. With
# every input dimension bound, that arithmetic is constant: evaluate it with
# onnx's reference evaluator, replace it by Constant nodes, infer again.
_FOLD_MAX_ELEMENTS = 1 << 16
_FOLD_MAX_ROUNDS = 64
_EVAL_ERRORS = (
    RuntimeError, ValueError, TypeError, KeyError, IndexError, AttributeError,
    NotImplementedError, ArithmeticError,
)


def _static(vi):
    t = vi.type.tensor_type
    if not vi.type.HasField("tensor_type") or not t.HasField("shape"):
        return None
    dims = [d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim]
    return None if any(d is None for d in dims) else dims


def _has_symbolic(model) -> bool:
    g = model.graph
    known = {vi.name: vi for vi in list(g.value_info) + list(g.output)}
    for n in g.node:
        for o in n.output:
            if o and (o not in known or _static(known[o]) is None):
                return True
    return False


def _fold_constants(inferred, model) -> bool:
    """Replaces computable shape arithmetic in `model` by Constant nodes.

    `inferred` is `model` after shape inference. Returns whether anything
    was replaced.
    """
    import numpy as np
    from onnx import AttributeProto, TensorProto, helper, numpy_helper
    from onnx.reference import ReferenceEvaluator

    g = inferred.graph
    shapes = {vi.name: _static(vi) for vi in list(g.input) + list(g.value_info)
              + list(g.output)}
    values = {}
    # What derives from a parameter (_param_names, scalars included) through
    # floating-point tensors is never replaced, so that it stays a node with
    # a gradient. An integer tensor carries no gradient: shape arithmetic
    # that goes through a float scalar initializer and is cast back to int
    # still folds.
    params = _param_names(g)
    elem_types = {vi.name: vi.type.tensor_type.elem_type
                  for vi in list(g.input) + list(g.value_info) + list(g.output)}

    def floating(name, v):
        if name in elem_types:
            return _dtype_name(elem_types[name]) in _GRAD_DTYPES
        return np.asarray(v).dtype.kind == "f"

    from_param = set()
    for t in g.initializer:
        if t.data_location == TensorProto.EXTERNAL or _numel(list(t.dims)) > _FOLD_MAX_ELEMENTS:
            continue
        values[t.name] = numpy_helper.to_array(t)
        if t.name in params:
            from_param.add(t.name)
    opset = next((o.version for o in inferred.opset_import if o.domain in ("", "ai.onnx")), None)
    producers = {}
    for i, n in enumerate(g.node):
        for o in n.output:
            producers[o] = i
        ins = [t for t in n.input if t]
        try:
            if n.op_type == "Constant":
                out = ReferenceEvaluator(n, opsets={"": opset}).run(None, {})
            elif n.op_type in ("Shape", "Size"):
                shape = shapes.get(n.input[0])
                if shape is None:
                    continue
                if n.op_type == "Size":
                    out = [np.array(_numel(shape), dtype=np.int64)]
                else:
                    start = _attr(n, "start", 0)
                    end = _attr(n, "end", None)
                    out = [np.array(shape[slice(start, end)], dtype=np.int64)]
            elif (
                n.domain in ("", "ai.onnx")
                and ins
                and all(t in values for t in ins)
                and n.op_type not in SOURCE_OPS
                and not any(a.type in (AttributeProto.GRAPH, AttributeProto.GRAPHS)
                            for a in n.attribute)
            ):
                feeds = {t: values[t] for t in ins}
                out = ReferenceEvaluator(n, opsets={"": opset}).run(None, feeds)
            else:
                continue
        except _EVAL_ERRORS:  # a node the evaluator cannot run stays as it is
            continue
        for o, v in zip(n.output, out):
            if o and v is not None and np.asarray(v).size <= _FOLD_MAX_ELEMENTS:
                values[o] = np.asarray(v)
                if o in params or (any(t in from_param for t in ins) and floating(o, v)):
                    from_param.add(o)
    # replace the producers of valued tensors read by a node that is not valued
    replace = set()
    for n in g.node:
        if all(o in values and o not in from_param for o in n.output if o):
            continue  # folded itself: its inputs need no Constant of their own
        for t in n.input:
            if (t in values and t not in from_param and t in producers
                    and g.node[producers[t]].op_type != "Constant"):
                replace.add(producers[t])
    if not replace:
        return False
    new_nodes = []
    folded = set()  # indices in new_nodes of the Constants made here
    for i, n in enumerate(model.graph.node):
        if i not in replace or not all(o in values for o in n.output if o):
            new_nodes.append(n)
            continue
        for o in n.output:
            if o:
                folded.add(len(new_nodes))
                new_nodes.append(helper.make_node(
                    "Constant", [], [o], name=f"{_text(n.name) or n.op_type}/folded",
                    value=numpy_helper.from_array(values[o], o)))
    # Drop computable nodes that reach no output now, such as what fed the
    # folded arithmetic (Mul(Cast(Shape(x)), scale) before a Cast back to
    # int): they would be warned about as ops left out. The file's own
    # Constant nodes stay (they are counted in fixed_memory either way).
    needed = {o.name for o in model.graph.output}
    kept = []
    for k in range(len(new_nodes) - 1, -1, -1):
        n = new_nodes[k]
        outs = [o for o in n.output if o]
        valued = all(o in values for o in outs) and (n.op_type != "Constant" or k in folded)
        if valued and not any(o in needed for o in outs):
            continue
        kept.append(n)
        needed.update(t for t in n.input if t)
        needed.update(_outer_reads(n))
    del model.graph.node[:]
    model.graph.node.extend(reversed(kept))
    return True


def _infer_static(model):
    """Shape inference, folding shape arithmetic until every shape is static."""
    inferred = _infer(model)
    rounds = 0
    while _has_symbolic(inferred) and rounds < _FOLD_MAX_ROUNDS:
        if not _fold_constants(inferred, model):
            break
        inferred = _infer(model)
        rounds += 1
    return inferred


def _unknown_shape(node, output, shape) -> str:
    """Why an output's size is unknown, for the one-line error."""
    import onnx.defs

    if shape is None:
        what = f"shape inference gave output '{output}' no shape"
    else:
        k = next(k for k, d in enumerate(shape) if not isinstance(d, int))
        what = f"shape inference left dimension {k} of output '{output}' unknown"
    domain = node.domain or ""
    if domain not in ("", "ai.onnx") or not onnx.defs.has(node.op_type, domain):
        shown = f"{domain}.{node.op_type}" if domain else node.op_type
        what += f" (ONNX has no shape function for {shown})"
    elif node.op_type in CONTROL_FLOW:
        what += (f" ({node.op_type} is control flow, which the importer does not follow: "
                 "export with tracing, so that it is unrolled)")
    return what


def _text(s) -> str:
    """A name from the protobuf as text: a string field holding invalid UTF-8
    comes back as bytes (a node name did, and crashed the importer)."""
    if isinstance(s, bytes):
        return s.decode("utf-8", errors="replace")
    return s


# remat refuses names with control characters (Unicode's Cc: C0, DEL and the
# C1 range U+0080-U+009F) and names with outer whitespace.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def _sanitize(name) -> str:
    name = re.sub(r"[\x00-\x1f\x7f-\x9f\s]+", "_", _text(name)).lstrip("/")
    return name


def build_graph(path: str, batch: int | None = None, dims=None, name=None):
    """Returns (graph dict, warnings) for the ONNX model at `path`."""
    model = _load(path)
    batch = _bind_dims(model, batch, dims or {})
    model = _infer_static(model)
    g = model.graph
    warnings = []

    # static types and shapes of every tensor shape inference knows
    types = {}
    for vi in list(g.input) + list(g.value_info) + list(g.output):
        t = vi.type.tensor_type
        if not vi.type.HasField("tensor_type"):
            continue
        shape = None
        if t.HasField("shape"):
            shape = [d.dim_value if d.HasField("dim_value") else d.dim_param or "?"
                     for d in t.shape.dim]
        types[vi.name] = (t.elem_type, shape)
    for t in g.initializer:
        types[t.name] = (t.data_type, list(t.dims))

    def static_shape(tname):
        s = types.get(tname, (None, None))[1]
        if s is None or any(not isinstance(d, int) for d in s):
            return None
        return s

    # classify initializers: BN running statistics and non-float tensors are
    # buffers (resident, no gradient); every other one is a parameter.
    params = _param_names(g)
    init_by_name = {t.name: t for t in g.initializer}
    fixed = 0
    tensors: dict[str, _Tensor] = {}
    n_params = 0
    for t in g.initializer:
        nbytes = _nbytes(_numel(list(t.dims)), t.data_type, f"initializer '{_text(t.name)}'")
        if t.name in params:
            tensors[t.name] = _Tensor("param")
            fixed += 2 * nbytes
            n_params += _numel(list(t.dims))
        else:
            tensors[t.name] = _Tensor("buffer")
            fixed += nbytes

    nodes: dict[str, _Node] = {}  # by tensor name, in creation order
    input_names = []
    for vi in g.input:
        if vi.name in tensors:
            continue
        elem, shape = types.get(vi.name, (None, None))
        if shape is None or elem is None:
            raise ImportFailure(f"input '{vi.name}' has no tensor shape")
        _nbytes(0, elem, f"input '{vi.name}'")  # refuses STRING etc.
        nd = _Node()
        nd.key, nd.onnx_index, nd.op, nd.deps = vi.name, -1, "Input", []
        nd.elem_type, nd.shape, nd.total_cost = elem, shape, 0
        nd.requires_grad, nd.saves, nd.out_index = False, None, 0
        nodes[vi.name] = nd
        tensors[vi.name] = _Tensor("input", vi.name)
        input_names.append(vi.name)

    const_nodes = {n.output[0]: n for n in g.node if n.op_type == "Constant" and n.output}
    for t in g.initializer:
        const_nodes[t.name] = t
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)

    def label(i, n):
        name = _text(n.name)
        return f"node '{name}' ({n.op_type})" if name else f"node #{i} ({n.op_type})"

    def needs_grad(x):
        if x is None:
            return False
        return x.kind == "param" or (x.kind in ("input", "act") and nodes[x.key].requires_grad)

    unknown_ops = {}  # ONNX node index -> op type without a formula
    onnx_nodes = list(g.node)
    for i, n in enumerate(onnx_nodes):
        op = n.op_type
        # a control-flow op also reads what its subgraphs read from this graph
        in_names = list(n.input)
        in_names += [t for t in _outer_reads(n) if t not in in_names]
        ins = [tensors.get(t) if t else None for t in in_names]
        for t, info in zip(in_names, ins):
            if t and info is None:
                # an undefined name (the checker lets some through): treat
                # it as a constant
                tensors[t] = _Tensor("const")
        ins = [tensors.get(t) if t else None for t in in_names]
        present = [x for x in ins if x is not None]
        in_shapes = [static_shape(t) if t else None for t in n.input]

        if op in RESHAPE_OPS and n.input and n.output and n.output[0]:
            # A shape baked in at export (a TransformerEncoder's attention
            # reshapes its [seq, batch*heads, d] tensor to a constant seq)
            # cannot hold the input once --dim binds another value: the
            # model would not run, and the sizes would mix both values.
            out_shape = static_shape(n.output[0])
            if in_shapes[0] is not None and out_shape is not None:
                a, b = _numel(in_shapes[0]), _numel(out_shape)
                if a != b:
                    raise ImportFailure(
                        f"{label(i, n)} turns {in_shapes[0]} ({a} elements) into "
                        f"{out_shape} ({b} elements): a dimension was probably fixed "
                        "at export (export it as dynamic, or import at the exported size)")

        if op == "Identity" and n.input and n.input[0] in init_by_name and n.output[0]:
            # a copy of an initializer the exporter merged with an equal one
            # (_param_names): a tensor of its own
            o, t = n.output[0], init_by_name[n.input[0]]
            nbytes = _nbytes(_numel(list(t.dims)), t.data_type, label(i, n))
            if o in params:
                tensors[o] = _Tensor("param")
                fixed += 2 * nbytes
                n_params += _numel(list(t.dims))
            elif _dtype_name(t.data_type) in _GRAD_DTYPES:
                tensors[o] = _Tensor("buffer")  # a running statistic
                fixed += nbytes
            else:
                tensors[o] = tensors[n.input[0]]  # integer constants stay shared
            continue

        if op == "Constant":
            for o in n.output:
                if o:
                    tensors[o] = _Tensor("const")
                    elem, shape = types.get(o, (None, None))
                    if elem is not None and static_shape(o) is not None:
                        fixed += _nbytes(_numel(shape), elem, f"{label(i, n)}: output '{o}'")
            continue
        if op in SHAPE_OPS or (op not in SOURCE_OPS
                               and all(x.kind in ("const", "buffer") for x in present)):
            for o in n.output:
                if o:
                    tensors[o] = _Tensor("const")
            continue
        dropout_train = op == "Dropout" and _dropout_training(n, const_nodes, opset)
        if op in VIEW_OPS and n.input and ins[0] is not None and not dropout_train:
            tensors[n.output[0]] = ins[0]
            for o in n.output[1:]:
                if o:
                    tensors[o] = _Tensor("const")  # the inference dropout mask
            continue

        # a computing op: one node per output tensor
        deps = []
        for x in ([] if op in SHAPE_ONLY_INPUT_OPS else present):
            if x.kind in ("input", "act") and x.key not in deps:
                deps.append(x.key)
        touches_param = any(x.kind == "param" for x in present)

        grad_in = touches_param or any(nodes[d].requires_grad for d in deps)
        if op in SOURCE_OPS:
            grad_in = False  # no gradient flows through sampling
        out_shapes = []
        for o in n.output:
            if not o:
                out_shapes.append(None)
                continue
            elem, shape = types.get(o, (None, None))
            if elem is None or shape is None or any(not isinstance(d, int) for d in shape):
                raise ImportFailure(f"{label(i, n)}: {_unknown_shape(n, o, shape)}")
            _nbytes(0, elem, f"{label(i, n)}: output '{o}'")  # refuses STRING etc.
            out_shapes.append(shape)
        macs = op_macs(n, in_shapes, out_shapes)
        if macs is None:
            unknown_ops[i] = op
            macs = sum(_numel(s) for s in out_shapes if s is not None)
        for k, o in enumerate(n.output):
            if not o:
                continue
            elem, shape = types[o]
            nd = _Node()
            nd.key, nd.onnx_index, nd.op, nd.deps = o, i, op, deps
            nd.elem_type, nd.shape, nd.total_cost = elem, shape, macs
            nd.requires_grad = grad_in and _dtype_name(elem) in _GRAD_DTYPES
            nd.out_index = k
            if op in PRODUCTS or op == "Div":
                nd.saves = _product_saves(op, ins, needs_grad)
            elif op in SAVES_SELF or dropout_train:
                nd.saves = ["self"]
            elif op in SAVES_INPUTS:
                nd.saves = list(deps)
            elif op in SAVES_NOTHING:
                nd.saves = []
            elif op in SAVES_INDICES:
                nd.saves = [d for d in deps if _dtype_name(nodes[d].elem_type) not in _GRAD_DTYPES]
            else:
                nd.saves = None  # the format's default: self + deps
            nodes[o] = nd
            tensors[o] = _Tensor("act", o)

    # the loss reads every graph output that is a node
    out_keys = []
    out_elems = 0
    for vi in g.output:
        x = tensors.get(vi.name)
        if x is None or x.kind not in ("input", "act"):
            continue
        if x.key not in out_keys:
            out_keys.append(x.key)
        s = static_shape(vi.name) or nodes[x.key].shape
        out_elems += _numel(s)
    if not out_keys:
        raise ImportFailure("no graph output depends on a graph input")

    # keep what reaches an output
    live = set()
    stack = list(out_keys)
    while stack:
        k = stack.pop()
        if k in live:
            continue
        live.add(k)
        stack.extend(nodes[k].deps)
    dropped_ops = {nodes[k].onnx_index for k in nodes if k not in live} - {
        nodes[k].onnx_index for k in live
    }
    dropped_ops.discard(-1)

    # the op's cost is split over its kept outputs, by element count
    kept_by_op: dict[int, list[str]] = {}
    for k, nd in nodes.items():
        if k in live and nd.onnx_index >= 0:
            kept_by_op.setdefault(nd.onnx_index, []).append(k)

    # names: ONNX node names (leading '/' dropped), unique, not 'self', not
    # under 'grad/'; graph inputs by their tensor name
    used = {"loss"}  # the added sink's name

    def unique(base):
        base = _sanitize(base) or "node"
        if base in ("self",) or base.startswith("grad/"):
            base = "_" + base
        cand, j = base, 2
        while cand in used:
            cand, j = f"{base}_{j}", j + 1
        used.add(cand)
        return cand

    names = {}
    for k in input_names:
        if k in live:
            names[k] = unique(k)
    op_base = {}
    for idx in kept_by_op:
        n = onnx_nodes[idx]
        op_base[idx] = _text(n.name) or f"{n.op_type}_{idx}"
    for k, nd in nodes.items():
        if k not in live or nd.onnx_index < 0:
            continue
        keys = kept_by_op[nd.onnx_index]
        base = op_base[nd.onnx_index]
        names[k] = unique(base if len(keys) == 1 else f"{base}:{nd.out_index}")
    loss_name = "loss"

    out_nodes = []
    for k, nd in nodes.items():
        if k not in live:
            continue
        numel = _numel(nd.shape)
        mem = _nbytes(numel, nd.elem_type, f"tensor '{k}'")
        if nd.onnx_index >= 0:
            keys = kept_by_op[nd.onnx_index]
            total = sum(_numel(nodes[j].shape) for j in keys)
            share = numel / total if total else 1.0 / len(keys)
            cost = nd.total_cost * share
            cost = int(cost) if float(cost).is_integer() else float(cost)
        else:
            cost = 0
        entry = {"name": names[k], "op": nd.op, "cost": cost, "memory": mem}
        if nd.deps:
            entry["deps"] = [names[d] for d in nd.deps]
        if not nd.requires_grad:
            entry["requires_grad"] = False
        elif nd.saves is not None:
            saves = [s if s == "self" else names[s] for s in nd.saves]
            default = ["self"] + entry.get("deps", [])
            if saves != default:
                entry["saves"] = saves
        out_nodes.append(entry)
    out_nodes.append({
        "name": loss_name, "op": "Loss", "cost": out_elems, "memory": 4,
        "deps": [names[k] for k in out_keys],
    })

    unknown = {op for i, op in unknown_ops.items() if i in kept_by_op}
    if unknown:
        warnings.append(
            "no MAC formula for " + ", ".join(sorted(unknown))
            + " (counted as one MAC per output element)"
        )
    if dropped_ops:
        warnings.append(f"{len(dropped_ops)} op(s) reach no graph output and are left out")

    with open(path, "rb") as f:
        digest = hashlib.sha256()
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    opsets = ",".join(
        f"{o.domain or 'ai.onnx'}:{o.version}" for o in model.opset_import
    )
    meta = {
        "importer": IMPORTER,
        "source": "onnx",
        "onnx_file": os.path.basename(path),
        "onnx_sha256": digest.hexdigest(),
        "opset": opsets,
        "parameters": str(n_params),
    }
    if model.producer_name:
        meta["producer"] = f"{model.producer_name} {model.producer_version}".strip()
    gname = name or _CONTROL.sub("_", os.path.splitext(os.path.basename(path))[0]).strip()
    gname = gname or "onnx-model"
    graph = {
        "name": gname,
        "graph": "forward",
        "batch_size": batch,
        "cost_unit": "mac",
        "fixed_memory": fixed,
        "meta": meta,
        "nodes": out_nodes,
    }
    return graph, warnings


# --------------------------------------------------------------------------
# output


# Characters YAML does not allow raw in a document (outside its printable
# set: DEL, C1 controls, surrogates, U+FFFE/U+FFFF), and the ones YAML 1.1
# parsers read as line breaks (NEL, U+2028, U+2029): written as escapes.
_YAML_ESCAPE = re.compile("[\x7f-\x9f\u2028\u2029\ud800-\udfff\ufeff\ufffe\uffff]")


def _scalar(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return json.dumps(v)
    # A JSON string is a YAML double-quoted scalar. Non-ASCII text is written
    # as UTF-8, which remat reads: JSON's ASCII escapes write a character
    # outside the BMP (an emoji) as a surrogate pair, which YAML refuses.
    text = json.dumps(str(v), ensure_ascii=False)
    return _YAML_ESCAPE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def to_yaml(graph: dict) -> str:
    lines = []
    for key in ("name", "graph", "batch_size", "cost_unit", "fixed_memory"):
        lines.append(f"{key}: {_scalar(graph[key])}")
    lines.append("meta:")
    for k, v in graph["meta"].items():
        lines.append(f"  {k}: {_scalar(v)}")
    lines.append("nodes:")
    for nd in graph["nodes"]:
        parts = []
        for k, v in nd.items():
            if isinstance(v, list):
                parts.append(f"{k}: [" + ", ".join(_scalar(x) for x in v) + "]")
            else:
                parts.append(f"{k}: {_scalar(v)}")
        lines.append("  - {" + ", ".join(parts) + "}")
    return "\n".join(lines) + "\n"


def _parser():
    p = argparse.ArgumentParser(
        prog="remat_torch from-onnx",
        description="Write a remat `graph: forward` file from an ONNX model "
        "(shape inference for sizes, MAC counts for costs).",
    )
    p.add_argument("model", help="the .onnx file")
    p.add_argument("-o", "--output", required=True,
                   help="graph file to write (.yaml, or .json for JSON; '-' for stdout)")
    p.add_argument("--batch", default=None, metavar="N",
                   help="value of the symbolic batch (leading) dimension of the inputs "
                   "(default: the model's own, or 1)")
    p.add_argument("--dim", action="append", default=[], metavar="NAME=N",
                   help="bind another symbolic dimension by name (repeatable)")
    p.add_argument("--name", default=None, help="graph name (default: the file's stem)")
    return p


def main(argv: list[str]) -> int:
    try:
        args = _parser().parse_args(argv)
    except SystemExit as e:  # --help, or a usage error already printed
        return e.code if isinstance(e.code, int) else 2
    path = args.model
    batch = None
    if args.batch is not None:
        # ASCII digits only: str.isdigit and int() also take '²' or '٣'
        if not re.fullmatch(r"[0-9]+", args.batch) or not 1 <= int(args.batch) <= MAX_BATCH:
            print(f"error: --batch must be a whole number from 1 to {MAX_BATCH}, "
                  f"not '{args.batch}'", file=sys.stderr)
            return 2
        batch = int(args.batch)
    dims = {}
    for spec in args.dim:
        k, sep, v = spec.partition("=")
        if not sep or not k or not re.fullmatch(r"[0-9]+", v) or not 1 <= int(v) <= MAX_DIM:
            print(f"error: --dim wants NAME=N with N a whole number from 1 to {MAX_DIM} "
                  f"(an ONNX dimension is an int64), not '{spec}'", file=sys.stderr)
            return 2
        if k in dims:
            print(f"error: --dim {k} is given twice", file=sys.stderr)
            return 2
        dims[k] = int(v)
    if args.name is not None and (not args.name.strip() or _CONTROL.search(args.name)):
        # remat refuses such a graph name; node names are sanitised instead,
        # but a name you typed is not silently changed
        print(f"error: --name {json.dumps(args.name)}: a graph name must not be blank "
              "or contain control characters (tab, newline, ...)", file=sys.stderr)
        return 2
    try:
        graph, warnings = build_graph(path, batch, dims, args.name)
    except ImportFailure as e:
        print(f"error: {path}: {e}", file=sys.stderr)
        return 2
    except ImportError as e:
        print(f"error: the ONNX importer needs the 'onnx' package ({e})", file=sys.stderr)
        return 2
    for w in warnings:
        print(f"warning: {path}: {w}", file=sys.stderr)
    if args.output.endswith(".json"):
        text = json.dumps(graph, indent=1) + "\n"
    else:
        text = to_yaml(graph)
    try:
        write_text(args.output, text)
    except OSError as e:
        print(f"error: {args.output}: cannot write: {e.strerror or e}", file=sys.stderr)
        return 2
    except UnicodeEncodeError:
        print(f"error: {args.output}: cannot write non-ASCII names in this locale's "
              "encoding (set PYTHONUTF8=1)", file=sys.stderr)
        return 2
    if args.output != "-":
        n = len(graph["nodes"])
        print(f"wrote {args.output} ({n} nodes, batch {graph['batch_size']})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
