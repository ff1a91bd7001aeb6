"""Capture PyTorch's own joint forward+backward graph, and map it to graph-file nodes.

Public API (stable; ``compare-pytorch`` and the executor build on it)::

    cap = capture(model, batch, loss_fn)      # a Capture
    cap.gm                                    # the joint FX GraphModule (aten ops)
    cap.nodes                                 # list[GraphNode], in FX (topological) order
    cap.node_of[fx_node]                      # GraphNode owning the storage of an FX value, or None
    cap.by_name["addmm"]                      # GraphNode by graph-file name
    cap.members[fx_node]                      # a kernel's GraphNodes (one, or a group's members)
    cap.bases[fx_node]                        # the GraphNodes whose storage an FX value lives in

Tracing runs under ``FakeTensorMode`` (inside AOTAutograd): no activation is
allocated, only the parameters the model already holds.

Node naming: a graph-file node is one fresh output storage of a kernel (an FX
``call_function`` node of the joint graph that produces fresh storage).

* A kernel with one fresh output storage (``addmm``, ``relu``...) is one plain
  node named after the FX node (``addmm``, ``mm_2``...).
* A kernel with several (``native_layer_norm`` -> out, mean, rstd;
  ``native_dropout`` -> out, mask; ``max_pool2d_with_indices``;
  ``convolution_backward``...) is split into **members**, one per distinct
  fresh output storage (outputs sharing a storage are one member), listed
  consecutively in output order, all carrying ``group = <FX name>``. The
  first member is named after the FX node, the others ``<FX name>.<k>`` with
  ``k`` the index of the member's first tuple output (``native_layer_norm``,
  ``native_layer_norm.1``, ``native_layer_norm.2``). Every member has the
  kernel's full dependency list; each is freed on its own, so layer norm's
  small ``rstd`` saved for the backward no longer pins the large output.
  The kernel still runs once (see ``executor``).

Those names are deterministic for a given model, batch shape and torch
version. ``capture(..., groups=False)`` gives the format before groups (one
node per kernel, memory the sum of its outputs), for comparisons.

Everything else is not a node:

* placeholders (parameters, buffers, the batch, the loss tangent) are
  resident all step (``fixed_memory``);
* alias values (``getitem`` of a multi-output kernel, ops whose schema returns
  an alias such as ``view``/``t``/``detach``/``expand``, and any op whose
  output shares its input's storage) belong to their base node: a reader of
  an alias depends on the base (for ``getitem(kernel, j)``: the member owning
  output ``j``'s storage), and the executor re-derives the alias from the
  base when it needs it;
* a kernel output that shares an input's storage is not a member (it is an
  alias of that input); a reader of it depends on the kernel's first member
  (which carries it) and on the input's bases. No kernel of the examples or
  resnet18 has one.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import operator
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch
import torch.fx as fx
import torch.fx.traceback as fx_traceback

from .errors import RematInputError, quote_error

# --------------------------------------------------------------------------- model wrapper


class LossWrapper(torch.nn.Module):
    """``forward(*batch) = loss_fn(model(batch[0]), *batch[1:])``: one scalar output.

    A buffer the forward rebinds (``self.step = self.step + 1``) instead of updating
    in place is written back into the buffer it replaced, in place, at the end of the
    forward: AOTAutograd only sees mutations of its inputs, and a rebinding is none,
    so the joint graph would otherwise drop the new value (eager's module then holds
    it, the executor's never would)."""

    def __init__(self, model: torch.nn.Module, loss_fn: Callable[..., Any]):
        super().__init__()
        self.model = model
        self.loss_fn = loss_fn

    def forward(self, *batch):
        bound = _bound_buffers(self.model)
        loss = self.loss_fn(self.model(batch[0]), *batch[1:])
        _write_back_rebound(bound)
        return loss


def _bound_buffers(model: torch.nn.Module) -> List[Tuple[str, torch.nn.Module, str, Any]]:
    """(qualified name, module, key, tensor) of every buffer slot, as bound now."""
    out = []
    for mname, m in model.named_modules():
        if isinstance(m, torch.jit.ScriptModule):  # its buffers live in its C++ module
            continue
        for k, b in m._buffers.items():
            if isinstance(b, torch.Tensor):
                out.append((f"{mname}.{k}" if mname else k, m, k, b))
    return out


def _write_back_rebound(bound) -> None:
    """Copy the value of each buffer the forward rebound into the tensor it replaced and
    bind that one again (a mutation the joint graph records); refuse a rebinding the
    buffer's storage cannot hold."""
    for name, m, k, old in bound:
        new = m._buffers.get(k)
        if new is old:
            continue
        if not isinstance(new, torch.Tensor):
            raise RematInputError(
                f"the forward sets buffer '{name}' to {type(new).__name__} (rebinds it instead "
                "of updating it in place): unsupported")
        if new.shape != old.shape or new.dtype != old.dtype or new.device != old.device:
            raise RematInputError(
                f"the forward rebinds buffer '{name}' to a {_describe(new)} tensor, where "
                f"it is a {_describe(old)} one: the new value is written into the buffer "
                "in place, so it must keep the buffer's shape, dtype and device")
        with torch.no_grad():
            old.copy_(new.detach())
        m._buffers[k] = old


def _describe(t: torch.Tensor) -> str:
    dev = "" if t.device.type == "cpu" else f" {t.device}"
    return f"{str(t.dtype).replace('torch.', '')} {list(t.shape)}{dev}"


# --------------------------------------------------------------------------- data model


@dataclass
class GraphNode:
    """One graph-file node: a kernel's fresh output storage (or all of them, for a kernel
    with one). Members of a multi-output kernel share ``fx_node``, ``deps`` and ``group``."""

    name: str
    fx_node: fx.Node  # the kernel (shared by all members of a group)
    deps: List[str]
    memory: int  # bytes: the distinct fresh storages of this node's outputs
    op: str  # "aten.addmm.default"
    module: str  # module path ("encoder.0.attn"), "" for the top level
    shapes: List[List[int]]
    dtypes: List[str]
    random: bool  # torch.Tag.nondeterministic_seeded
    backward: bool  # reads the loss tangent (transitively)
    index: int = 0
    # the kernel's FX name for members of a multi-output kernel, None for a plain node
    group: Optional[str] = None
    # tuple indices of the kernel's outputs this node's storage backs ([0] for a kernel
    # returning one tensor)
    outputs: List[int] = field(default_factory=list)
    member: int = 0  # position in its group (0: the first member, which runs the kernel)


@dataclass
class Capture:
    gm: fx.GraphModule
    nodes: List[GraphNode]
    by_name: Dict[str, GraphNode]
    # FX value -> the GraphNode owning its storage (None for placeholder-derived values)
    node_of: Dict[fx.Node, Optional[GraphNode]]
    # placeholder FX node -> ("param", fqn) | ("buffer", fqn) | ("input", i) | ("tangent", 0);
    # a get_attr node (a tensor constant) -> ("constant", target)
    placeholders: Dict[fx.Node, Tuple[str, Any]]
    # outputs of the joint graph
    loss: fx.Node
    # parameter fqn (of the wrapped model) -> FX value. A tied (shared) parameter has one
    # entry per name AOTAutograd gave it, each a partial gradient: their sum is its gradient
    grads: Dict[str, fx.Node]
    mutations: Dict[str, fx.Node]  # buffer fqn -> FX value holding its new value
    # fqn (without the "model." prefix) -> parameter, under every name it goes by
    # (``named_parameters(remove_duplicate=False)``): a tied parameter appears once per name
    params: Dict[str, torch.Tensor]
    buffers: Dict[str, torch.Tensor]  # likewise, every name of each buffer
    batch_meta: List[Tuple[List[int], str]]
    api: str  # which AOTAutograd entry point captured it
    fingerprint: str = ""
    # kernel FX node -> its graph nodes in member order (one for a plain node)
    members: Dict[fx.Node, List[GraphNode]] = field(default_factory=dict)
    # tensor constants of the joint graph (``get_attr`` nodes: a plain tensor attribute
    # of a module, or a tensor the forward closes over), by target: resident all step
    constants: Dict[str, torch.Tensor] = field(default_factory=dict)
    # FX value -> the graph nodes whose storage it lives in (readers depend on them)
    bases: Dict[fx.Node, List[GraphNode]] = field(default_factory=dict)

    def kernel_members(self, g: GraphNode) -> List[GraphNode]:
        """All members of ``g``'s kernel (``[g]`` for a plain node)."""
        return self.members[g.fx_node]

    def kernels(self) -> List[GraphNode]:
        """The first member of every kernel, in graph order: one entry per kernel run."""
        return [g for g in self.nodes if g.member == 0]

    def trained_params(self) -> Dict[str, torch.Tensor]:
        """The parameters that get a gradient, each once (under the first of its names in
        ``grads``): a tied parameter's gradient, one ``p.grad``, is accumulated from
        several entries of ``grads`` but is one buffer, as is its optimizer state."""
        out: Dict[str, torch.Tensor] = {}
        seen: set = set()
        for k in self.grads:
            p = self.params[k]
            if id(p) not in seen:
                seen.add(id(p))
                out[k] = p
        return out

    def tied_names(self) -> List[List[str]]:
        """The names of each parameter that ``grads`` has under several names (in
        ``grads`` order): ``[["emb.weight", "head.weight"]]`` for a tied embedding."""
        return _shared((k, self.params[k]) for k in self.grads)


def _strip(fqn: str) -> str:
    return fqn[len("model."):] if fqn.startswith("model.") else fqn


# --------------------------------------------------------------------------- capture


@contextlib.contextmanager
def _module_paths(model: torch.nn.Module):
    """Record the module path of every traced op in ``node.meta['custom']['module']``."""
    names = {m: n for n, m in model.named_modules()}
    stack: List[str] = []

    def pre(mod, args):
        if mod in names:
            stack.append(names[mod])
            fx_traceback.current_meta["custom"] = {"module": names[mod]}

    def post(mod, args, out):
        if mod in names and stack:
            stack.pop()
            fx_traceback.current_meta["custom"] = {"module": stack[-1] if stack else ""}

    h1 = torch.nn.modules.module.register_module_forward_pre_hook(pre)
    h2 = torch.nn.modules.module.register_module_forward_hook(post)
    try:
        with fx_traceback.preserve_node_meta():
            yield
    finally:
        h1.remove()
        h2.remove()


@contextlib.contextmanager
def _quiet_torch_errors():
    """Keep torch's own error logs quiet while tracing: a model that fails under
    FakeTensorMode (a shape mismatch...) makes ``torch._subclasses.fake_tensor`` log
    the whole traceback at ERROR level before raising; the exception itself is
    reported in one line. Loggers given their own level (``TORCH_LOGS``) still
    print. AOTAutograd traces the backward in anomaly mode, so an exception there (a
    module's backward hook that raises) also comes with torch's "Error detected in
    ..." warning and the forward's traceback: silenced too."""
    import logging
    import warnings

    root = logging.getLogger("torch")
    level = root.level
    root.setLevel(max(level, logging.CRITICAL))
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Error detected in ")
            yield
    finally:
        root.setLevel(level)


@contextlib.contextmanager
def _restore_tensors(model: torch.nn.Module):
    """Put every module's own parameters and buffers back after tracing.

    AOTAutograd swaps them for its tracing tensors and back; for a module
    reachable under several names (one layer reused in a ``ModuleList``, a
    shared block), torch 2.15 swaps one name back and leaves a
    ``FunctionalTensor`` under the other, which breaks every later use of the
    model (running it, ``deepcopy``)."""
    # (a TorchScript module's parameters live in its C++ module: not swapped, skipped)
    mods = [m for m in model.modules() if not isinstance(m, torch.jit.ScriptModule)]
    saved = [(m, dict(m._parameters), dict(m._buffers)) for m in mods]
    # plain tensor attributes too: a forward (pre-)hook that assigns one (the old
    # nn.utils.spectral_norm and weight_norm set ``module.weight``) leaves a tracing
    # tensor there, which breaks running or deep-copying the model afterwards
    attrs = [(m, {k: v for k, v in vars(m).items() if isinstance(v, torch.Tensor)})
             for m in mods]
    try:
        yield
    finally:
        for m, ps, bs in saved:
            for d, was in ((m._parameters, ps), (m._buffers, bs)):
                if list(d) != list(was) or any(d[k] is not v for k, v in was.items()):
                    d.clear()
                    d.update(was)
        for m, was in attrs:
            for k, v in list(vars(m).items()):
                if isinstance(v, torch.Tensor) and was.get(k) is not v:
                    if k in was:
                        vars(m)[k] = was[k]
                    else:
                        del vars(m)[k]


@contextlib.contextmanager
def _cpu_faithful_fakes():
    """While tracing, fake kernels whose output strides differ from the CPU kernel's
    are replaced by ones that agree.

    ``native_dropout_backward``'s fake kernel (a Python decomposition) lays its
    output out as the CUDA kernel does, contiguous for a non-contiguous
    ``grad_output``; the CPU kernel follows ``grad_output``'s strides
    (TensorIterator). Traced with the wrong strides, the backward took a ``view`` of
    it (a batch-first MultiheadAttention's dropout gradient is transposed), which
    the real, non-contiguous tensor does not allow: the executor failed on it. With
    the CPU strides, the trace reshapes it with a real copy, a node of its own."""
    from torch._decomp import decomposition_table
    from torch._subclasses import fake_tensor as ft

    op = torch.ops.aten.native_dropout_backward.default
    was = decomposition_table.get(op)
    if was is None:
        yield
        return

    def native_dropout_backward(grad_output, mask, scale):
        if grad_output.device.type != "cpu":
            return was(grad_output, mask, scale)
        return grad_output * (mask.type_as(grad_output) * scale)  # TensorIterator's strides

    # fake tensors use a decomposition only if it is torch's own (module and name)
    native_dropout_backward.__module__ = was.__module__
    check = getattr(ft, "torch_decomp_decompositions", None)
    decomposition_table[op] = native_dropout_backward
    if check is not None and hasattr(check, "cache_clear"):
        check.cache_clear()
    try:
        yield
    finally:
        decomposition_table[op] = was
        if check is not None and hasattr(check, "cache_clear"):
            check.cache_clear()


@contextlib.contextmanager
def _no_onednn():
    """oneDNN (mkldnn) off while tracing; only its enabled flag is touched
    (``torch.backends.mkldnn.flags`` also sets TF32 flags, which warns on CPU)."""
    was = torch._C._get_mkldnn_enabled()
    torch._C._set_mkldnn_enabled(False)
    try:
        yield
    finally:
        torch._C._set_mkldnn_enabled(was)


def _fake_mode():
    """The FakeTensorMode a capture traces under, without FakeTensorMode's dispatch
    cache (see ``_no_fake_cache``)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    mode = FakeTensorMode(allow_non_fake_inputs=True)
    mode.cache_enabled = False
    return mode


@contextlib.contextmanager
def _no_fake_cache():
    """FakeTensorMode's dispatch cache off while tracing (every mode AOTAutograd makes
    reads ``torch._dynamo.config.fake_tensor_cache_enabled`` when it is created).

    The cache (shared by the whole process) rebuilds a cached kernel's outputs from
    their shapes and strides alone: each output gets the smallest storage those allow,
    and outputs that share a storage come back as separate storages. So the second
    trace of the same model in a process (``verify`` re-captures; a graph exported
    from a warm process) could differ from the first: an ``aten.copy`` whose output
    is a strided view of a larger buffer (an in-place write into a slice, ``h[:, 0] =
    0``) came back at the view's extent, another node size and fingerprint; an LSTM
    layer's backward, returning one tensor as both bias gradients, came back as two
    members. Without the cache a warm capture takes about half as long again."""
    try:
        import torch._dynamo.config as dynamo_config

        patch = dynamo_config.patch(fake_tensor_cache_enabled=False)
    except (ImportError, AttributeError):  # another torch: _fake_mode's own flag only
        patch = contextlib.nullcontext()
    with patch:
        yield


def _token_descs() -> Tuple[tuple, tuple]:
    """(effect-token input descriptors, output descriptors); empty before torch 2.9."""
    try:
        from torch._functorch._aot_autograd import descriptors as d
    except ImportError:
        return (), ()
    return ((d.ForwardTokenAOTInput, d.BackwardTokenAOTInput),
            (d.ForwardTokenAOTOutput, d.BackwardTokenAOTOutput))


def _drop_effect_tokens(gm: fx.GraphModule, token_descs: tuple) -> None:
    """Make every ``with_effects(token, op, *args)`` node of the joint graph a plain call
    ``op(*args)``, and drop the effect-token placeholders.

    AOTAutograd threads a token through ops registered as side-effecting, so that
    they keep their order: ``torch.linalg.solve``, ``inv`` and ``cholesky`` check
    their result with ``_linalg_check_errors`` (which raises on a singular input and
    returns nothing). The token is a 0-byte tensor that orders nothing a plan can
    change the meaning of (the check reads the values it checks); the op itself
    stays a node (of 0 bytes for the check), run and recomputed as the plan says."""
    import operator as op_

    effects = [n for n in gm.graph.nodes if n.op == "call_function"
               and getattr(n.target, "__name__", "") == "with_effects"]
    for w in effects:
        token, target = w.args[0], w.args[1]
        val = w.meta.get("val")
        rest = list(val[1:]) if _is_tuple(val) else []
        single = len(rest) <= 1
        with gm.graph.inserting_before(w):
            call = gm.graph.call_function(target, tuple(w.args[2:]), dict(w.kwargs))
        call.meta.update({k: v for k, v in w.meta.items() if k != "val"})
        call.meta["val"] = (rest[0] if rest else None) if single else tuple(rest)
        for u in list(w.users):
            if u.target is op_.getitem and u.args[1] == 0:
                u.replace_all_uses_with(token)  # the token chain collapses to its input
                gm.graph.erase_node(u)
            elif u.target is op_.getitem and single:
                u.replace_all_uses_with(call)
                gm.graph.erase_node(u)
            elif u.target is op_.getitem:
                u.args = (call, u.args[1] - 1)
            else:
                raise RematInputError(f"unsupported use of {w.name} ({u.name})")
        gm.graph.erase_node(w)
    out = next(n for n in gm.graph.nodes if n.op == "output")
    tokens = [n for n in gm.graph.nodes if n.op == "placeholder"
              and isinstance(n.meta.get("desc"), token_descs)]
    if not tokens:
        return
    out.args = (tuple(None if v in tokens else v for v in out.args[0]),) + tuple(out.args[1:])
    for t in tokens:
        if t.users:
            raise RematInputError(f"effect token {t.name} is read by "
                                  f"{', '.join(u.name for u in t.users)}: unsupported")
        gm.graph.erase_node(t)
    gm.recompile()


def _param_mutation_hint(model: torch.nn.Module, fqn: str) -> str:
    """Why a parameter is written in place, for the usual cause."""
    owner = model.get_submodule(fqn.rpartition(".")[0]) if "." in fqn else model
    if isinstance(owner, torch.nn.Embedding) and owner.max_norm is not None:
        return (f" (nn.Embedding with max_norm={owner.max_norm:g} renormalizes the rows it "
                "looks up in place: use max_norm=None)")
    return ""


def _joint_with_descriptors(wrapper, batch):
    from torch._functorch._aot_autograd import descriptors as d
    from torch._functorch.aot_autograd import aot_export_joint_with_descriptors

    # fake inputs from a mode that accepts real tensors: a plain tensor attribute of a
    # module (not a buffer) or a global tensor the forward reads becomes a constant of
    # the graph (a get_attr node), as in the aot_module fallback, instead of an error
    fake_mode = _fake_mode()
    fake_batch = tuple(fake_mode.from_tensor(t) for t in batch)
    with contextlib.ExitStack() as stack:
        jd = aot_export_joint_with_descriptors(stack, wrapper, fake_batch)
        gm = jd.graph_module
    _drop_effect_tokens(gm, _token_descs()[0])
    placeholders: Dict[fx.Node, Tuple[str, Any]] = {}
    for n in gm.graph.nodes:
        if n.op != "placeholder":
            continue
        desc = n.meta.get("desc")
        if isinstance(desc, d.ParamAOTInput):
            placeholders[n] = ("param", _strip(desc.target))
        elif isinstance(desc, d.BufferAOTInput):
            placeholders[n] = ("buffer", _strip(desc.target))
        elif isinstance(desc, d.PlainAOTInput):
            placeholders[n] = ("input", desc.idx)
        elif isinstance(desc, d.TangentAOTInput):
            placeholders[n] = ("tangent", 0)
        else:
            raise RematInputError(f"unsupported joint-graph input {desc!r} ({n.name})")
    out = next(n for n in gm.graph.nodes if n.op == "output")
    loss = None
    grads: Dict[str, fx.Node] = {}
    mutations: Dict[str, fx.Node] = {}
    for v, desc in zip(out.args[0], out.meta["desc"]):
        if v is None:
            continue
        if isinstance(desc, d.PlainAOTOutput):
            if desc.idx != 0:
                raise RematInputError("the loss function must return one scalar tensor")
            loss = v  # checked by _capture (a Python number is no FX node)
        elif isinstance(desc, d.GradAOTOutput) and isinstance(desc.grad_of, d.ParamAOTInput):
            grads[_strip(desc.grad_of.target)] = v
        elif isinstance(desc, d.GradAOTOutput):
            continue  # gradient of an input of the batch: not needed
        elif isinstance(desc, d.InputMutationAOTOutput) and isinstance(
            desc.mutated_input, d.BufferAOTInput
        ):
            mutations[_strip(desc.mutated_input.target)] = v
        elif isinstance(desc, d.InputMutationAOTOutput) and isinstance(
                desc.mutated_input, d.PlainAOTInput):
            raise RematInputError(f"the model mutates batch[{desc.mutated_input.idx}] in place "
                                  "(an input other than a buffer): unsupported")
        elif isinstance(desc, d.InputMutationAOTOutput) and isinstance(
                desc.mutated_input, d.ParamAOTInput):
            fqn = _strip(desc.mutated_input.target)
            raise RematInputError(f"the model mutates parameter '{fqn}' in place: unsupported"
                                  + _param_mutation_hint(wrapper.model, fqn))
        else:
            raise RematInputError(f"unsupported joint-graph output {desc!r}")
    if loss is None:
        raise RematInputError("the joint graph has no loss output")
    return gm, placeholders, loss, grads, mutations, "aot_export_joint_with_descriptors"


def _joint_with_aot_module(wrapper, batch):
    """Fallback for torch < 2.9: ``aot_module`` with a partition function that records
    the joint graph (traced under FakeTensorMode, so nothing is computed for real)."""
    from torch._functorch.aot_autograd import aot_module
    from torch._functorch.partitioners import default_partition

    recorded = {}

    def partition(joint_module, joint_inputs, **kw):
        recorded["gm"] = joint_module
        recorded["num_fwd_outputs"] = kw["num_fwd_outputs"]
        return default_partition(joint_module, joint_inputs, **kw)

    # aot_module passes every name of a parameter or buffer (then the batch), but
    # AOTAutograd de-duplicates a tensor passed twice (a module reachable under two names):
    # the primals are the distinct tensors under their first names, as named_parameters()
    # lists them. torch >= 2.9 says which input each primal is (an index into all names).
    names_p = [n for n, _ in wrapper.named_parameters()]
    names_b = [n for n, _ in wrapper.named_buffers()]
    all_p = [n for n, _ in wrapper.named_parameters(remove_duplicate=False)]
    all_b = [n for n, _ in wrapper.named_buffers(remove_duplicate=False)]

    def input_of(i: int) -> Tuple[str, Any]:
        """aot_module's flat input ``i`` (every name of every parameter, buffer, the batch)."""
        if i < len(all_p):
            return ("param", _strip(all_p[i]))
        if i < len(all_p) + len(all_b):
            return ("buffer", _strip(all_b[i - len(all_p)]))
        return ("input", i - len(all_p) - len(all_b))

    compiled = aot_module(wrapper, fw_compiler=lambda g, _: g, partition_fn=partition)
    fake_mode = _fake_mode()
    try:
        with fake_mode:
            fake_batch = [fake_mode.from_tensor(t) for t in batch]
            compiled(*fake_batch)
    except Exception as e:  # noqa: BLE001 - say why, if it is weight tying
        tied = _shared(wrapper.named_parameters(remove_duplicate=False))
        if tied:
            raise RematInputError(
                f"tied parameters ({'; '.join(' = '.join(_strip(n) for n in t) for t in tied)})"
                f" cannot be captured with aot_module on this torch "
                f"({quote_error(e, with_type=False)}): use "
                "torch >= 2.9 (aot_export_joint_with_descriptors)") from e
        raise
    gm = recorded["gm"]
    tok_in, tok_out = _token_descs()
    if any(getattr(n.target, "__name__", "") == "with_effects" for n in gm.graph.nodes) and (
            not tok_in or not all(n.meta.get("desc") is not None
                                  for n in gm.graph.nodes if n.op == "placeholder")):
        raise RematInputError("the model calls an op with side effects (effect tokens: "
                              "torch.linalg.solve/inv/cholesky...), and this torch does not "
                              "say which inputs are tokens: use torch >= 2.9")
    _drop_effect_tokens(gm, tok_in)
    phs = [n for n in gm.graph.nodes if n.op == "placeholder"]
    placeholders: Dict[fx.Node, Tuple[str, Any]] = {}
    n_pb = len(names_p) + len(names_b)
    primals = [n for n in phs if n.name.startswith("primals")]
    indexed = all(isinstance(getattr(n.meta.get("desc"), "idx", None), int) for n in primals)
    for i, n in enumerate(primals):
        if indexed:
            placeholders[n] = input_of(n.meta["desc"].idx)
        elif i < len(names_p):
            placeholders[n] = ("param", _strip(names_p[i]))
        elif i < n_pb:
            placeholders[n] = ("buffer", _strip(names_b[i - len(names_p)]))
        else:
            placeholders[n] = ("input", i - n_pb)
    for n in phs:
        if n not in placeholders:
            placeholders[n] = ("tangent", 0)
    out = next(n for n in gm.graph.nodes if n.op == "output")
    flat = list(out.args[0])
    n_fwd = recorded["num_fwd_outputs"]
    fw_outs, grad_outs = flat[:n_fwd], flat[n_fwd:]
    descs = out.meta.get("desc")
    if descs is not None and tok_out:  # effect tokens (dropped) are not forward outputs
        keep = [i for i in range(n_fwd) if not isinstance(descs[i], tok_out)]
        fw_outs, descs = [fw_outs[i] for i in keep], [descs[i] for i in keep]
    # forward outputs: the mutated inputs' new values (in input order), then the loss
    n_mut = len(fw_outs) - 1
    if descs is not None and indexed:  # torch >= 2.9 says which input each one mutates
        mutated = [input_of(d.mutated_input.idx) for d in descs[:n_mut]]
        if any(kind != "buffer" for kind, _ in mutated):
            raise RematInputError("the model mutates an input other than a buffer: unsupported")
        mutated_names = [key for _, key in mutated]
    elif n_mut in (0, len(names_b)):
        mutated_names = [_strip(nm) for nm in names_b][:n_mut]
    else:
        raise RematInputError(f"the model mutates {n_mut} of its {len(names_b)} buffers, and "
                              "this torch does not say which: use torch >= 2.9")
    mutations = dict(zip(mutated_names, fw_outs[:n_mut]))
    loss = fw_outs[n_mut]
    # one gradient output per primal, in primal order
    grads = {placeholders[p][1]: v for p, v in zip(primals, grad_outs)
             if v is not None and placeholders[p][0] == "param"}
    return gm, placeholders, loss, grads, mutations, "aot_module"


def _shared(named) -> List[List[str]]:
    """From (name, tensor) pairs, the names of each tensor that goes by several, in order."""
    by_tensor: Dict[int, List[str]] = {}
    for n, t in named:
        by_tensor.setdefault(id(t), []).append(n)
    return [ns for ns in by_tensor.values() if len(ns) > 1]


def _is_alias_op(n: fx.Node) -> bool:
    if n.target is operator.getitem:
        return True
    if isinstance(n.target, torch._ops.OpOverload):
        return any(r.alias_info is not None and not r.alias_info.is_write
                   for r in n.target._schema.returns)
    return False


def _tensor_leaves(val) -> List[torch.Tensor]:
    if isinstance(val, torch.Tensor):
        return [val]
    if isinstance(val, (tuple, list)):
        out: List[torch.Tensor] = []
        for v in val:
            out.extend(_tensor_leaves(v))
        return out
    return []


def storage_key(t: torch.Tensor) -> int:
    """Identity of a tensor's storage (the address of its StorageImpl)."""
    return t.untyped_storage()._cdata


def _storages(val) -> Dict[int, int]:
    out: Dict[int, int] = {}
    for t in _tensor_leaves(val):
        s = t.untyped_storage()
        out[storage_key(t)] = s.nbytes()
    return out


def storage_bytes(tensors: Sequence[torch.Tensor]) -> int:
    """Bytes of the distinct storages of ``tensors`` (each counted once)."""
    seen: Dict[Any, int] = {}
    for t in tensors:
        s = t.untyped_storage()
        seen[storage_key(t)] = s.nbytes()
    return sum(seen.values())


def _shape_dtype(val) -> Tuple[List[List[int]], List[str]]:
    ts = _tensor_leaves(val)
    return [list(map(int, t.shape)) for t in ts], [str(t.dtype).replace("torch.", "") for t in ts]


def capture(model: torch.nn.Module, batch: Sequence[torch.Tensor], loss_fn: Callable[..., Any],
            api: Optional[str] = None, groups: bool = True) -> Capture:
    """Capture the joint forward+backward graph of ``loss_fn(model(batch[0]), *batch[1:])``.

    A ``DistributedDataParallel`` model is captured as its ``module``.

    ``api`` forces the entry point ("descriptors" or "aot_module"); by default the
    descriptor API is used where torch has it. ``groups=False`` keeps each
    multi-output kernel one node (all its outputs freed together), as before the
    graph format had groups: only for comparing the two.
    """
    batch = normalize_inputs(model, batch, loss_fn)
    # a DistributedDataParallel model's graph is its module's (the same fingerprint): a
    # remat step runs the module and does DDP's communication around it
    from .ddp import split

    model = split(model)[0]
    check_not_meta(model, batch, loss_fn)
    # capturing must not consume the global RNG (the step that follows would then
    # draw other dropout masks than an uncaptured one): save and restore it
    cpu_rng = torch.get_rng_state()
    cuda_rng = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None
    try:
        return _capture(model, batch, loss_fn, api, groups)
    finally:
        torch.set_rng_state(cpu_rng)
        if cuda_rng is not None:
            torch.cuda.set_rng_state_all(cuda_rng)


def _capture(model, batch, loss_fn, api, groups=True) -> Capture:
    import torch._functorch.aot_autograd as aa

    # the model is traced in the mode it is in (each module's own): a BatchNorm frozen
    # with .eval() in a training model uses its running statistics, as in eager
    for name, m in model.named_modules():
        if isinstance(m, torch.nn.RNNBase) and m.dropout > 0 and m.num_layers > 1:
            # torch's RNN decomposition tests ``num_layers < i - 1`` for the dropout
            # between layers, never true: the traced graph has no dropout there
            raise RematInputError(
                f"'{name}' ({type(m).__name__}, num_layers={m.num_layers}, "
                f"dropout={m.dropout:g}): PyTorch's traced {type(m).__name__} leaves out "
                "the dropout between layers that eager applies, so its plans would train "
                "another model: use dropout=0, or single-layer modules with nn.Dropout "
                "between them")
    wrapper = LossWrapper(model, loss_fn)
    use_desc = hasattr(aa, "aot_export_joint_with_descriptors") if api is None else (
        api == "descriptors")
    # oneDNN off while tracing: torch's LSTM decomposition otherwise picks
    # ``mkldnn_rnn_layer`` (meant for inference) whenever the traced input does not
    # require grad, which it does not under AOTAutograd. Its real kernel allocates a
    # workspace (28 KB on a tiny 2-layer LSTM) that the fake kernel says is 0 bytes,
    # and only when grad mode is on, which the executor's no_grad run never has: the
    # backward then failed on an undefined workspace. Without it, the LSTM is traced
    # as the plain per-step ops (as nn.GRU always is), which run as captured.
    with _module_paths(model), _restore_tensors(model), _quiet_torch_errors(), _no_onednn(), \
            _cpu_faithful_fakes(), _no_fake_cache():
        try:
            if use_desc:
                gm, phs, loss, grads, muts, used = _joint_with_descriptors(wrapper, batch)
            else:
                gm, phs, loss, grads, muts, used = _joint_with_aot_module(wrapper, batch)
        except RematInputError:
            raise
        except Exception as e:  # noqa: BLE001 - tracing failures are user-facing
            raise RematInputError(f"capturing the joint graph failed: {quote_error(e)}"
                                  + _where(e) + _why_untraceable(e)) from e
    if not isinstance(loss, fx.Node):  # a Python number: nothing to differentiate
        raise RematInputError("the loss must be a floating-point scalar tensor "
                              f"(got {type(loss).__name__} {loss!r})")
    val = loss.meta.get("val")
    if not (isinstance(val, torch.Tensor) and val.dim() == 0 and val.is_floating_point()):
        got = (f"dtype {str(val.dtype).replace('torch.', '')}, shape {list(val.shape)}"
               if isinstance(val, torch.Tensor) else type(val).__name__)
        raise RematInputError(f"the loss must be a floating-point scalar tensor (got {got})")
    if not grads:
        # no backward at all: eager's loss.backward() fails, and there is nothing to train
        n_req = sum(p.requires_grad for p in model.parameters())
        raise RematInputError(
            "no parameter gets a gradient: "
            + ("the model has no parameter that requires grad" if not n_req else
               f"the loss does not depend on any of its {n_req} parameters that require grad")
            + " (nothing to train)")
    cap = _build(gm, phs, loss, grads, muts, used, model, batch, groups, loss_fn)
    trained = [(k, t) for k, t in cap.constants.items() if t.requires_grad]
    if trained:
        t = trained[0][1]
        name = _closure_name(loss_fn, t)
        raise RematInputError(
            "the forward or the loss reads a tensor that requires grad but is not the "
            f"model's ({name + ', ' if name else ''}{'x'.join(map(str, t.shape))} "
            f"{str(t.dtype).replace('torch.', '')}): the joint graph takes it as a "
            "constant and would not compute its gradient; make it part of the model (a "
            "submodule or an nn.Parameter of it) or set requires_grad=False")
    return cap


def _closure_name(fn: Any, t: torch.Tensor) -> str:
    """``'head.weight' of the loss_fn`` if ``fn`` closes over ``t`` (or a module holding
    it) by that name; empty if not found."""
    code = getattr(fn, "__code__", None)
    cells = getattr(fn, "__closure__", None) or ()
    for var, cell in zip(getattr(code, "co_freevars", ()), cells):
        try:
            v = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        if v is t:
            return f"'{var}' of the loss_fn"
        if isinstance(v, torch.nn.Module):
            for k, p in v.named_parameters():
                if p is t:
                    return f"'{var}.{k}' of the loss_fn"
    return ""


def _source_frame(e: BaseException):
    """The innermost frame of ``e``'s traceback in the model's code or in torch's
    modules (``torch/nn/...``), past the tracing machinery (torch's private packages,
    ``torch/fx``, ``torch/utils``, ``Module.__call__``, and this package): the line
    that did what the trace cannot follow. None if there is none."""
    import os
    import traceback

    here = os.path.dirname(os.path.abspath(__file__))
    torch_dir = os.path.dirname(os.path.abspath(torch.__file__))
    found = None
    for fs in traceback.extract_tb(e.__traceback__):
        path = os.path.abspath(fs.filename)
        if path.startswith(here + os.sep):
            continue
        if path.startswith(torch_dir + os.sep):
            rel = os.path.relpath(path, torch_dir).replace(os.sep, "/")
            if rel.startswith(("_", "fx/", "utils/", "autograd/", "overrides.py")) or (
                    rel == "nn/modules/module.py"):
                continue
        found = fs
    return found


def _where(e: BaseException) -> str:
    """`` at FILE:LINE (FUNCTION)`` of :func:`_source_frame`, torch's files named from
    the ``torch/`` directory; empty if there is no such frame."""
    import os

    fs = _source_frame(e)
    if fs is None:
        return ""
    path = os.path.abspath(fs.filename)
    base = os.path.dirname(os.path.dirname(os.path.abspath(torch.__file__)))
    if path.startswith(base + os.sep + "torch" + os.sep):
        path = os.path.relpath(path, base).replace(os.sep, "/")
    return f" at {path}:{fs.lineno} ({fs.name})"


def _why_untraceable(e: Exception) -> str:
    """What a tracing failure usually means, for the exceptions whose message is only
    an op's name."""
    from torch._subclasses import fake_tensor as ft

    fs = _source_frame(e)
    if isinstance(e, ft.DataDependentOutputException) and fs is not None and (
            fs.name == "_detect_is_causal_mask"):
        return (" (nn.Transformer, TransformerEncoder and TransformerDecoder read an "
                "attention mask passed without is_causal to tell whether it is causal: "
                "pass tgt_is_causal=/src_is_causal= (is_causal= for the encoder or "
                "decoder alone) along with the mask)")
    if isinstance(e, ft.DataDependentOutputException):
        return (" (the model reads a tensor's value in Python: .item(), float(t), bool(t), "
                "an if on a tensor, or BatchNorm with momentum=None; the joint graph must "
                "not depend on the data)")
    if "entirely functional graph" in str(e) and "_tensor_constant" in str(e):
        return (" (the model writes in place into a plain tensor attribute or a global "
                "tensor: register it as a buffer, register_buffer, to update it)")
    if isinstance(e, ft.DynamicOutputShapeException):
        return (" (an op whose output shape depends on the data, e.g. nonzero or boolean-mask "
                "indexing: the joint graph needs static shapes)")
    return ""


def normalize_inputs(model: Any, batch: Any, loss_fn: Any) -> Tuple[torch.Tensor, ...]:
    """Check the Python API's (model, batch, loss_fn) as the factory's are checked, and
    return the batch as a tuple (a single tensor is a 1-tuple)."""
    if not isinstance(model, torch.nn.Module):
        raise RematInputError(f"the model must be an nn.Module (got {type(model).__name__})")
    if isinstance(batch, torch.Tensor):
        batch = (batch,)
    if not (isinstance(batch, (tuple, list)) and batch
            and all(isinstance(t, torch.Tensor) for t in batch)):
        raise RematInputError("the batch must be a non-empty tuple of tensors (got "
                              f"{type(batch).__name__})")
    if not callable(loss_fn):
        raise RematInputError(f"loss_fn is not callable (got {type(loss_fn).__name__})")
    check_batch_grad(batch)
    for i, t in enumerate(batch):
        # a step on no data trains nothing, and the trace of a mean over it divides by
        # zero somewhere inside torch ('float division by zero', with no location)
        if t.numel() == 0:
            raise RematInputError(f"batch[{i}] has no elements (shape {list(t.shape)}): a "
                                  "training step needs data")
    return tuple(batch)


def check_batch_grad(batch: Sequence[torch.Tensor]) -> None:
    """Refuse a batch tensor that requires grad: the joint graph computes the
    parameters' gradients only, so its ``.grad``, which eager sets, would stay None."""
    for i, t in enumerate(batch):
        if t.requires_grad:
            raise RematInputError(
                f"batch[{i}] requires grad: a plan computes the parameters' gradients "
                f"only, never an input's (batch[{i}].grad would not be set, as eager sets "
                "it); pass it without requires_grad (.detach())")


def check_not_meta(model: torch.nn.Module, batch: Sequence[torch.Tensor],
                   loss_fn: Callable[..., Any]) -> None:
    """Refuse tensors on the meta device (shapes without values): such a model traced
    and exported, and verify then failed in torch.equal (NotImplementedError)."""
    named = [(f"parameter '{k}'", t) for k, t in model.named_parameters()]
    named += [(f"buffer '{k}'", t) for k, t in model.named_buffers()]
    if isinstance(loss_fn, torch.nn.Module):
        named += [(f"loss_fn parameter '{k}'", t) for k, t in loss_fn.named_parameters()]
        named += [(f"loss_fn buffer '{k}'", t) for k, t in loss_fn.named_buffers()]
    named += [(f"batch[{i}]", t) for i, t in enumerate(batch)]
    refuse_meta(named)


def refuse_meta(named: Sequence[Tuple[str, torch.Tensor]]) -> None:
    """:func:`check_not_meta` of ``(what, tensor)`` pairs: the executor checks each
    call's batch too (a meta batch passed the captured-shape check, and a kernel then
    failed on it, blamed on the node)."""
    for what, t in named:
        if t.device.type == "meta":
            raise RematInputError(
                f"{what} is on the meta device (a shape without values): a plan runs on "
                "real tensors; materialize the model and batch first (model.to_empty("
                "device=...) then initialize, or load a state dict)")


def capture_factory(spec: str, model: torch.nn.Module, batch: Sequence[torch.Tensor],
                    loss_fn: Callable[..., Any]) -> Capture:
    """:func:`capture` for a factory ``MODULE.py:FACTORY``: errors name its file."""
    try:
        return capture(model, batch, loss_fn)
    except RematInputError as e:
        raise RematInputError(f"{spec.rpartition(':')[0]}: {spec.rpartition(':')[2]}: {e}") from e


def _build(gm, phs, loss, grads, muts, api, model, batch, groups=True, loss_fn=None) -> Capture:
    node_of: Dict[fx.Node, Optional[GraphNode]] = {}
    bases: Dict[fx.Node, List[GraphNode]] = {}
    members: Dict[fx.Node, List[GraphNode]] = {}
    backward: Dict[fx.Node, bool] = {}
    nodes: List[GraphNode] = []
    constants: Dict[str, torch.Tensor] = {}
    for n in gm.graph.nodes:
        if n.op == "get_attr":  # a tensor constant: resident, as a placeholder
            const = getattr(gm, n.target, None)
            if isinstance(const, torch.Generator) or "Generator" in type(const).__name__:
                raise RematInputError(
                    "a torch.Generator of the model's own is used in forward: a plan replays "
                    "random ops from the global RNG only; draw from it (torch.manual_seed) "
                    "instead of passing generator=")
            if not isinstance(const, torch.Tensor):
                raise RematInputError(f"unsupported FX node {n.name} (get_attr of "
                                      f"{type(const).__name__})")
            constants[n.target] = const
            phs[n] = ("constant", n.target)
        if n.op in ("placeholder", "get_attr"):
            bases[n] = []
            node_of[n] = None
            backward[n] = phs[n][0] == "tangent"
            continue
        if n.op == "output":
            continue
        if n.op != "call_function":
            raise RematInputError(f"unsupported FX node {n.name} ({n.op})")
        inputs = n.all_input_nodes
        backward[n] = any(backward[a] for a in inputs)
        dep_list: List[GraphNode] = []
        for a in inputs:
            for b in bases[a]:
                if b not in dep_list:
                    dep_list.append(b)
        val = n.meta.get("val")
        sparse = next((t for t in _tensor_leaves(val) if t.layout != torch.strided), None)
        if sparse is not None:
            raise RematInputError(
                f"{n.name} ({n.target}, module '{(n.meta.get('custom') or {}).get('module', '')}')"
                f" makes a {str(sparse.layout).replace('torch.', '')} tensor: only dense "
                "tensors are supported (nn.Embedding(sparse=True) makes sparse gradients)")
        alias = _is_alias_op(n)
        in_st: Dict[int, int] = {}
        for a in inputs:
            in_st.update(_storages(a.meta.get("val")))
        if not alias and val is not None:
            # storage level: an op whose output shares an input's storage is an alias too
            out_st = _storages(val)
            if out_st and all(s in in_st for s in out_st):
                alias = True
        if alias:
            src = n.args[0] if n.target is operator.getitem and n.args else None
            if isinstance(src, fx.Node) and src in members and _is_tuple(src.meta.get("val")):
                # getitem(kernel, j): the member owning output j's storage, only
                bases[n] = _output_bases(src, n.args[1], members[src], bases)
            else:
                bases[n] = dep_list
            node_of[n] = bases[n][0] if len(bases[n]) == 1 else None
            continue
        if not isinstance(n.target, torch._ops.OpOverload):
            raise RematInputError(f"unsupported FX node {n.name}: target {n.target!r}")
        parts = _split_outputs(val, in_st, groups)
        if _scalar_outputs(val) and torch.Tag.nondeterministic_seeded not in n.target.tags:
            probed = _probe_storage_bytes(n)
        else:
            probed = _probe_real_sized(n)
        if probed is not None:
            for p in parts:
                p["bytes"] = max(p["bytes"], sum(probed[j] for j in p["outputs"]
                                                 if j < len(probed)))
        full = _scatter_storage_bytes(n)
        if full is not None and len(parts) == 1:
            parts[0]["bytes"] = max(parts[0]["bytes"], full)
        module = (n.meta.get("custom") or {}).get("module", "")
        random = torch.Tag.nondeterministic_seeded in n.target.tags
        group = n.name if len(parts) > 1 else None
        ms: List[GraphNode] = []
        for k, p in enumerate(parts):
            if group is None:
                shapes, dtypes = _shape_dtype(val)  # a plain node: every output, as before
            else:
                shapes, dtypes = _shape_dtype([val[j] for j in p["outputs"]])
            gn = GraphNode(
                name=n.name if k == 0 else f"{n.name}.{p['outputs'][0]}", fx_node=n,
                deps=[d.name for d in dep_list], memory=int(p["bytes"]), op=str(n.target),
                module=module, shapes=shapes, dtypes=dtypes, random=random,
                backward=backward[n], index=len(nodes), group=group,
                outputs=list(p["outputs"]), member=k)
            nodes.append(gn)
            ms.append(gn)
        members[n] = ms
        bases[n] = list(ms)
        node_of[n] = ms[0] if len(ms) == 1 else None
    by_name = {g.name: g for g in nodes}
    if len(by_name) != len(nodes):
        dup = next(g.name for g in nodes if sum(x.name == g.name for x in nodes) > 1)
        raise RematInputError(f"two graph nodes are named '{dup}'")
    # every name of a tied (shared) parameter or buffer: AOTAutograd lifts each name as
    # its own input (and gives each its own partial gradient), all bound to the one tensor
    params = {_strip("model." + k): p for k, p in model.named_parameters(remove_duplicate=False)}
    buffers = {_strip("model." + k): b for k, b in model.named_buffers(remove_duplicate=False)}
    # a loss that is a module (CrossEntropyLoss(weight=...), a loss with a learnable
    # weighting) is a child of the wrapper: AOTAutograd lifts its tensors as
    # ``loss_fn.*`` inputs like the model's (the executor looked them up among the
    # model's and failed)
    if isinstance(loss_fn, torch.nn.Module):
        params.update({"loss_fn." + k: p
                       for k, p in loss_fn.named_parameters(remove_duplicate=False)})
        buffers.update({"loss_fn." + k: b
                        for k, b in loss_fn.named_buffers(remove_duplicate=False)})
    batch_meta = [(list(map(int, t.shape)), str(t.dtype).replace("torch.", "")) for t in batch]
    cap = Capture(gm=gm, nodes=nodes, by_name=by_name, node_of=node_of, placeholders=phs,
                  loss=loss, grads=grads, mutations=muts, params=params, buffers=buffers,
                  batch_meta=batch_meta, api=api, members=members, bases=bases,
                  constants=constants)
    for what, v in [("loss", loss)] + [(f"grad of {k}", v) for k, v in grads.items()] + [
            (f"new value of buffer {k}", v) for k, v in muts.items()]:
        if len(bases[v]) > 1:
            raise RematInputError(f"{what} ({v.name}) is an alias of several kernels: unsupported")
    cap.fingerprint = fingerprint(cap)
    return cap


def _is_tuple(val) -> bool:
    return isinstance(val, (tuple, list))


def _split_outputs(val, in_st: Dict[int, int], groups: bool) -> List[Dict[str, Any]]:
    """A kernel's members: ``[{"outputs": [j, ...], "bytes": b}]`` in output order.

    One member per distinct fresh output storage: outputs that share a storage are
    merged into one member (placed at the first of them); outputs that are None, not
    tensors, or live in an input's storage belong to no member. ``groups=False``
    merges all into one. A kernel with no fresh storage (outputs all empty) still
    gets one member of 0 bytes, as before groups."""
    outs = list(enumerate(val)) if _is_tuple(val) else [(0, val)]
    parts: List[Dict[str, Any]] = []
    for j, x in outs:
        st = {k: b for k, b in _storages(x).items() if k not in in_st}
        if not st:
            continue
        if groups:
            hit = [p for p in parts if set(p["st"]) & set(st)]
        else:
            hit = parts[:1]
        if not hit:
            parts.append({"outputs": [j], "st": dict(st)})
            continue
        keep = hit[0]
        for p in hit[1:]:  # output j shares storages of several members: they are one
            keep["outputs"] += p["outputs"]
            keep["st"].update(p["st"])
            parts.remove(p)
        keep["outputs"] = sorted(keep["outputs"] + [j])
        keep["st"].update(st)
    if not parts:
        parts = [{"outputs": [j for j, _ in outs], "st": {}}]
    return [{"outputs": p["outputs"], "bytes": sum(p["st"].values())} for p in parts]


def _output_bases(kernel: fx.Node, j: Any, ms: List[GraphNode],
                  bases: Dict[fx.Node, List[GraphNode]]) -> List[GraphNode]:
    """The graph nodes ``getitem(kernel, j)`` lives in: the member owning output ``j``;
    for an output in an input's storage (no member owns it), the first member, which
    carries it, then the bases of the kernel's inputs."""
    for m in ms:
        if j in m.outputs:
            return [m]
    out = [ms[0]]
    for a in kernel.all_input_nodes:
        for b in bases[a]:
            if b not in out:
                out.append(b)
    return out


def _scalar_outputs(val) -> bool:
    ts = _tensor_leaves(val)
    return bool(ts) and all(t.dim() == 0 for t in ts)


# kernels whose real CPU kernel allocates more storage than its fake kernel says: run once
# for real at export, on inputs of the real shapes (``_probe_real_sized``). ``col2im``
# (F.unfold's backward) holds a larger buffer than its output; ``native_layer_norm``
# returns float32 mean and rstd for a bf16 input with float32 weights (autocast), where
# the fake kernel says bf16.
_REAL_SIZED = ("_embedding_bag", "_embedding_bag_forward_only", "col2im", "native_layer_norm")


def _probe_real_sized(n: fx.Node) -> Optional[List[int]]:
    """Real output storage bytes, per tuple output, of a kernel in ``_REAL_SIZED``; None
    for other kernels, or if its inputs total more than ``PROBE_LIMIT`` bytes.

    nn.EmbeddingBag's ``_embedding_bag`` allocates its ``offset2bag`` output with one
    element more than it keeps (ATen resizes it down, the storage stays): 200 bytes
    for 24 indices, where the fake kernel says 192. Its inputs are indices and the
    table, run with zero indices (storage sizes depend on shapes only)."""
    packet = getattr(n.target, "_overloadpacket", None)
    if packet is None or packet.__name__ not in _REAL_SIZED:
        return None
    ts = [t for a in n.all_input_nodes for t in _tensor_leaves(a.meta.get("val"))]
    if sum(t.numel() * t.element_size() for t in ts) > PROBE_LIMIT:
        return None
    run = _run_probe(n, clip=False)
    return None if run is None else run[0]


# ops whose real kernel copies the whole storage under its input view (ATen's
# ``clone_preserve_strides``), where the fake kernel allocates only the view's extent
_SCATTER_OPS = ("slice_scatter", "select_scatter", "diagonal_scatter", "as_strided_scatter")


def _scatter_storage_bytes(n: fx.Node) -> Optional[int]:
    """Real output storage bytes of a ``*_scatter`` kernel, None for other kernels.

    The functionalized form of an in-place write into a view (``mask[:7, 2:5] = 1``
    on a slice of a larger tensor) is a ``slice_scatter``/``select_scatter``...
    whose first input is that view. The real kernel clones the *whole* storage
    under it (to keep its strides and offset: ``clone_preserve_strides``), unless
    the view overlaps itself (an expanded tensor), where it is a plain clone; the
    fake kernel allocates only the view's extent. So a scatter into the top half
    of a 14x14 mask holds 784 bytes, not the 392 its FakeTensor says."""
    if getattr(n.target, "_overloadpacket", None) is None or (
            n.target._overloadpacket.__name__ not in _SCATTER_OPS):
        return None
    src = n.args[0] if n.args else None
    v = src.meta.get("val") if isinstance(src, fx.Node) else None
    if not isinstance(v, torch.Tensor):
        return None
    if torch._debug_has_internal_overlap(v) == 1:  # MemOverlap::Yes: clone()
        return None
    return v.untyped_storage().nbytes()


PROBE_DIM = 3  # dimensions are clipped to this for the first, cheap probe


def _probe_storage_bytes(n: fx.Node) -> Optional[List[int]]:
    """Real output storage bytes, per tuple output, of a kernel whose outputs are all
    0-dim; None where the fake sizes are right.

    Fake (meta) kernels say 4 bytes, but some real kernels return a 0-dim view
    into a buffer the size of their input: on CPU, ``mse_loss``,
    ``smooth_l1_loss``, ``binary_cross_entropy`` and ``soft_margin_loss`` with a
    mean or sum reduction keep the whole elementwise loss alive under the
    scalar. The kernel is first run for real on its inputs with every dimension
    clipped to ``PROBE_DIM`` (a few bytes, from a private generator: the global
    RNG is untouched). Only if that shows more storage than the outputs need is
    the size found for the real shapes: by running it on inputs of the real
    shapes when they total at most ``PROBE_LIMIT`` bytes, else by scaling with
    the largest input's element count. Per output, so that each member of a
    multi-output kernel gets its own storage's size.
    """
    small = _run_probe(n, clip=True)
    if small is None:
        return None
    real_bytes, small_largest = small
    need = sum(t.element_size() for t in _tensor_leaves(n.meta.get("val")))
    if sum(real_bytes) <= need:
        return None
    in_vals = [a.meta.get("val") for a in n.all_input_nodes]
    in_tensors = [t for v in in_vals for t in _tensor_leaves(v)]
    total = sum(t.numel() * t.element_size() for t in in_tensors)
    if total <= PROBE_LIMIT:
        full = _run_probe(n, clip=False)
        if full is not None:
            return full[0]
    largest = max((t.numel() for t in in_tensors), default=1)
    return [b * largest // max(small_largest, 1) for b in real_bytes]


PROBE_LIMIT = 256 * 2**20


def _run_probe(n: fx.Node, clip: bool):
    """(output storage bytes per tuple output, largest input numel) of running ``n`` for
    real, or None. A storage shared by several outputs counts at the first of them."""
    largest = [1]

    def real(a):
        v = a.meta.get("val")
        if not isinstance(v, torch.Tensor):
            return v
        shape = [min(d, PROBE_DIM) for d in v.shape] if clip else list(v.shape)
        numel = 1
        for d in shape:
            numel *= d
        largest[0] = max(largest[0], numel)
        if v.dtype.is_floating_point:
            gen = torch.Generator(device=v.device).manual_seed(0)
            return torch.rand(shape, dtype=v.dtype, device=v.device,
                              generator=gen).clamp_(0.01, 0.99)
        return torch.zeros(shape, dtype=v.dtype, device=v.device)

    try:
        with torch.no_grad():
            out = n.target(*fx.node.map_arg(n.args, real), **fx.node.map_arg(n.kwargs, real))
    except Exception:  # noqa: BLE001 - a probe that cannot run keeps the fake size
        return None
    seen: set = set()
    per: List[int] = []
    for x in (out if _is_tuple(out) else [out]):
        st = {k: b for k, b in _storages(x).items() if k not in seen}
        seen.update(st)
        per.append(sum(st.values()))
    return per, largest[0]


def base_nodes(cap: Capture, v: fx.Node) -> List[GraphNode]:
    """The graph nodes whose storage an FX value lives in (empty for placeholder-derived).

    For ``getitem(kernel, j)`` of a multi-output kernel that is the member owning
    output ``j`` only, not the whole group."""
    if v in cap.bases:
        return list(cap.bases[v])
    if v.op in ("placeholder", "get_attr"):
        return []
    out: List[GraphNode] = []
    for a in v.all_input_nodes:
        for b in base_nodes(cap, a):
            if b not in out:
                out.append(b)
    return out


# --------------------------------------------------------------------------- fingerprint


def fingerprint(cap: Capture) -> str:
    """sha256 of the node list (names, targets, shapes, dtypes, deps, memory, and the
    group of a group's members) and the placeholders, and of which placeholders are one
    tied tensor (only when some are: an untied model's fingerprint is as before). A
    plain node's entry is what it was before groups."""
    items: List[Any] = []
    tensors = []
    for n, (kind, key) in cap.placeholders.items():
        shapes, dtypes = _shape_dtype(n.meta.get("val"))
        items.append(["placeholder", n.name, kind, key, shapes, dtypes])
        t = {"param": cap.params, "buffer": cap.buffers}.get(kind, {}).get(key)
        if t is not None:
            tensors.append((n.name, t))
    tied = _shared(tensors)
    if tied:  # tying changes the fixed memory and sums gradients: not the untied graph
        items.append(["tied", tied])
    for g in cap.nodes:
        item: List[Any] = [g.name, g.op, g.shapes, g.dtypes, g.deps, g.memory]
        if g.group is not None:
            item.append({"group": g.group, "outputs": g.outputs})
        items.append(item)
    blob = json.dumps(items, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()


def fixed_memory_bytes(cap: Capture, batch: Sequence[torch.Tensor]) -> int:
    """Bytes resident all step, as the executor allocates them (see docs/pytorch.md).

    Each storage once: a tied parameter, and its one gradient buffer, count once."""
    total = storage_bytes(list(cap.params.values()) + list(cap.buffers.values()) + list(batch)
                          + list(cap.constants.values()))
    total += sum(_grad_bytes(p) for p in cap.trained_params().values())
    total += _tangent_bytes(cap)
    return total


def _grad_bytes(p: torch.Tensor) -> int:
    return p.numel() * p.element_size()


def _tangent_bytes(cap: Capture) -> int:
    for n, (kind, _) in cap.placeholders.items():
        if kind == "tangent":
            v = n.meta["val"]
            return v.numel() * v.element_size()
    return 0
