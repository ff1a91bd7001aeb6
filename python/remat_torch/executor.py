"""Running a remat plan over the captured joint graph, as a training step.

``Executor(model, loss_fn, batch, plan)`` captures the model's joint graph,
checks that ``plan`` was solved for exactly that graph, and is then a callable
training step: ``loss = step(*batch)`` runs the plan's statements (compute,
free, recompute as written), writes each parameter's gradient into ``p.grad``
and each BatchNorm running statistic into its buffer, and returns the loss.

Semantics (see docs/pytorch.md):

* a register holds one graph node's tensors: a plain node's whole output (a
  tensor, or a kernel's tuple), a group member's own outputs only;
  ``deallocate`` drops the register, freeing that node's storages;
* a multi-output kernel split into group members runs once per computation of
  the group: on its first member's ``compute``; the following members'
  ``compute`` statements, which must come right after (only their
  ``allocate`` in between), take their outputs from that result, and the
  result itself is dropped at the last member's ``compute``, so no output
  outlives the register that owns it. A plan that computes some members of a
  group but not all, or not consecutively in member order, is refused;
* alias values (views, ``t``, ``getitem``...) are re-derived from the base
  register each time a kernel reads them, so no register pins a freed base;
* a node's sink actions (copy into ``p.grad``, into a buffer, record the
  loss) run on its first computation only, never on a recomputation;
* a parameter's own gradient hooks (``register_hook``, then
  ``register_post_accumulate_grad_hook``), which the joint graph never sees, run
  after the plan, once per parameter, on its whole gradient, as autograd runs them;
* the loss is returned in its own dtype and on its own device (a detached copy);
* a random kernel (``torch.Tag.nondeterministic_seeded``, e.g. dropout) that the
  plan recomputes gets the RNG state recorded before its first computation
  restored around every recomputation (the global state is restored after),
  so recomputed masks equal the originals;
* gradients overwrite ``p.grad`` (as after ``zero_grad()``): gradient
  accumulation across calls is not supported. A tied (shared) parameter has
  one partial gradient per name in the joint graph: the first one computed
  is copied into its one ``p.grad``, the others are added to it, in the
  order the plan first computes them (graph order, as the no-remat run);
* transfers (plans solved with ``--device``): ``copy_out`` makes a copy of a
  fast register in the slow tier (host memory: pinned CPU tensors, copied
  on a side CUDA stream, on a GPU; plain copies that the memory measurement
  does not count, on CPU), ``copy_in`` a new fast register from a slow one
  (counted in the fast tier from that statement, as the simulator counts
  it), ``wait`` makes the compute stream wait for the copy (nothing to do on
  CPU, where copies are synchronous), ``drop`` frees a slow register. A
  kernel reading a slow register directly (a device with ``direct_read``) is
  refused: PyTorch kernels here run on fast-tier tensors only;
* a ``DistributedDataParallel`` model runs its ``module``'s plan, with DDP's buffer
  broadcast before and its gradient average (outside ``no_sync()``) after the step
  (``remat_torch.ddp``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import operator
import os
import weakref
from collections import OrderedDict
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch
import torch.fx as fx
from torch.utils._pytree import tree_map

from . import ddp as _ddp
from .capture import (
    Capture,
    GraphNode,
    base_nodes,
    capture,
    check_batch_grad,
    normalize_inputs,
    refuse_meta,
    storage_bytes,
)
from .errors import RematInputError, quote_error
from .memory import StorageTracker


def graph_name(base: str, batch_size: int, fp: str) -> str:
    """The graph-file ``name``: it carries the fingerprint, and every plan repeats it."""
    return f"{base}-b{batch_size}-{fp[:12]}"


def _plan_path(plan: Any) -> Optional[str]:
    """The file name of a plan given as one (a str or a pathlib.Path); None otherwise."""
    if isinstance(plan, (str, os.PathLike)):
        return os.fsdecode(plan)
    return None


def load_plan(path: str) -> Dict[str, Any]:
    try:
        with open(path) as f:
            plan = json.load(f)
    except FileNotFoundError as e:
        raise RematInputError(f"{path}: no such file") from e
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise RematInputError(f"{path}: not a JSON plan ({e})") from e
    except OSError as e:  # a directory, no permission...
        raise RematInputError(f"{path}: cannot be read ({e.strerror or e})") from e
    if not isinstance(plan, dict) or not isinstance(plan.get("statements"), list):
        raise RematInputError(f"{path}: not a remat plan (no 'statements' list)")
    plan.setdefault("_path", path)
    return plan


# each statement's keys and their types (docs/format.md); an int is never a bool here
_STATEMENT_KEYS: Dict[str, Dict[str, type]] = {
    "allocate": {"register": int, "node": str, "bytes": int},
    "compute": {"node": str, "register": int, "args": list},
    "deallocate": {"register": int},
    "copy_out": {"register": int, "src": int},
    "copy_in": {"register": int, "src": int},
    "wait": {"register": int},
    "drop": {"register": int},
}


def _is(x: Any, t: type) -> bool:
    return isinstance(x, t) and not (t is int and isinstance(x, bool))


def check_statements(path: str, statements: Any) -> None:
    """Refuse, in one line naming the statement, a plan whose statements are not the
    format's (a statement that is not an object, an unknown op, a missing key, a key
    of the wrong type: ``"bytes": "64"``, ``"args": 5``), before anything reads them."""
    if not isinstance(statements, list):
        raise RematInputError(f"{path}: not a remat plan (no 'statements' list)")
    for i, st in enumerate(statements):
        if not isinstance(st, dict):
            raise RematInputError(f"{path}: statement {i}: not an object ({json.dumps(st)})")
        op = st.get("op")
        keys = _STATEMENT_KEYS.get(op) if isinstance(op, str) else None
        if keys is None:
            raise RematInputError(f"{path}: statement {i}: unknown op {json.dumps(op)} "
                                  f"({', '.join(_STATEMENT_KEYS)})")
        for k, t in keys.items():
            if not _is(st.get(k), t):
                got = "missing" if k not in st else f"got {json.dumps(st[k])}"
                raise RematInputError(f"{path}: statement {i} ({op}): '{k}' must be "
                                      f"{'a list of registers' if t is list else t.__name__}"
                                      f" ({got})")
        if op == "compute" and not all(_is(a, int) for a in st["args"]):
            raise RematInputError(f"{path}: statement {i} (compute): 'args' must be a list of "
                                  f"registers (got {json.dumps(st['args'])})")


class Executor:
    """A training step that runs a remat plan. See the module docstring."""

    def __init__(self, model: torch.nn.Module, loss_fn: Callable[..., Any],
                 batch: Sequence[torch.Tensor], plan: Dict[str, Any] | str | os.PathLike,
                 cap: Optional[Capture] = None, model_name: Optional[str] = None):
        batch = normalize_inputs(model, batch, loss_fn)
        # a DistributedDataParallel model: the plan is its module's, the step runs on the
        # module, and DDP's buffer broadcast and gradient averaging are done around it
        wrapper = model
        model, ddp = _ddp.split(model)
        if ddp is not None:
            _ddp.check(ddp)
        self._ddp = weakref.ref(ddp) if ddp is not None else None
        path = _plan_path(plan)
        if path is not None:
            plan = load_plan(path)
        if not isinstance(plan, dict):
            raise RematInputError(f"the plan must be a file name or a dict (got "
                                  f"{type(plan).__name__})")
        if not isinstance(plan.get("statements"), list):
            # as load_plan says of a file; _check_plan and the run index it
            raise RematInputError(f"{plan.get('_path', 'plan')}: not a remat plan "
                                  "(no 'statements' list)")
        # the model is reached through a weak reference: train_step's cache, keyed weakly by
        # the model, holds its executors, so a strong one there would keep every model it
        # ever saw alive; it drops `_keep`, an executor built directly keeps it
        self._model = weakref.ref(model)
        self._keep: Optional[torch.nn.Module] = wrapper
        self.loss_fn = loss_fn
        self.cap = cap if cap is not None else capture(model, batch, loss_fn)
        self.plan = plan
        self.path = plan.get("_path", "plan")
        self.batch_shapes = [(tuple(t.shape), t.dtype) for t in batch]
        self.batch_strides = self._captured_strides(batch)
        # what the graph was captured from besides the batch: the step refuses to run once
        # it changed (train_step re-captures instead)
        self.model_state = model_state(model)
        self._check_plan(model_name)
        self._prepare()
        self.last_peak: Optional[int] = None
        self.last_fixed: Optional[int] = None
        self.last_cuda_peak: Optional[int] = None
        self.computations: Dict[str, int] = {}
        # debugging hook: trace(statement index, live bytes, peak so far) after each statement
        self.trace: Optional[Callable[[int, int, int], None]] = None

    @property
    def model(self) -> torch.nn.Module:
        model = self._model()
        if model is None:
            raise RematInputError(f"{self.path}: the model this step was built for no "
                                  "longer exists")
        return model

    @property
    def ddp(self) -> Optional[torch.nn.Module]:
        """The DistributedDataParallel wrapper the step was built for (None: none)."""
        if self._ddp is None:
            return None
        ddp = self._ddp()
        if ddp is None:
            raise RematInputError(f"{self.path}: the DistributedDataParallel model this step "
                                  "was built for no longer exists")
        return ddp

    # ------------------------------------------------------------------ checks

    def _check_plan(self, model_name: Optional[str]) -> None:
        cap, plan, path = self.cap, self.plan, self.path
        name = plan.get("model")
        if not isinstance(name, str):
            raise RematInputError(f"{path}: the plan names no model")
        if model_name is not None and name != model_name:
            raise RematInputError(
                f"{path}: the plan is for model '{name}', but the factory's joint graph is "
                f"'{model_name}' (a different model, batch or torch version)")
        if model_name is None and not name.endswith(
                cap.fingerprint[:12]):
            raise RematInputError(
                f"{path}: the plan is for model '{name}', whose fingerprint does not match "
                f"this model's joint graph ({cap.fingerprint[:12]})")
        check_statements(path, plan.get("statements"))
        regs: Dict[int, GraphNode] = {}
        slow: set = set()  # registers in the slow tier
        copies: set = set()  # registers made by a copy (what a wait may name)
        # the group being computed: (its members, index of the member that must come next)
        pending: Optional[tuple] = None
        for i, st in enumerate(plan["statements"]):
            op = st.get("op")
            if op in ("copy_out", "copy_in", "wait", "drop"):
                if pending is not None:
                    raise RematInputError(_interrupted(path, pending, f"has a {op}"))
                reg, src = st.get("register"), st.get("src")
                if op in ("copy_out", "copy_in"):
                    if src not in regs or (src in slow) != (op == "copy_in"):
                        tier = "slow" if op == "copy_in" else "fast"
                        raise RematInputError(f"{path}: statement {i}: {op} from register {src}, "
                                              f"which is not a {tier}-tier register")
                    regs[reg] = regs[src]
                    copies.add(reg)
                    if op == "copy_out":
                        slow.add(reg)
                elif reg not in (copies if op == "wait" else slow):
                    raise RematInputError(f"{path}: statement {i}: {op} of register {reg}, "
                                          f"which is not a {'copy' if op == 'wait' else 'slow'}"
                                          " register")
                continue
            if op == "allocate":
                gn = cap.by_name.get(st.get("node"))
                if gn is None:
                    raise RematInputError(f"{path}: statement {i}: unknown node '{st.get('node')}'"
                                          " (not in this model's joint graph)")
                if st.get("bytes") != gn.memory:
                    raise RematInputError(
                        f"{path}: node '{gn.name}': the plan allocates {st.get('bytes')} bytes, "
                        f"the joint graph's kernel outputs {gn.memory}")
                if pending is not None and gn is not pending[0][pending[1]]:
                    raise RematInputError(_interrupted(path, pending, f"allocates '{gn.name}'"))
                regs[st["register"]] = gn
            elif op == "compute":
                gn = cap.by_name.get(st.get("node"))
                if gn is None:
                    raise RematInputError(f"{path}: statement {i}: unknown node '{st.get('node')}'"
                                          " (not in this model's joint graph)")
                if regs.get(st.get("register")) is not gn:
                    raise RematInputError(f"{path}: node '{gn.name}': computed into register "
                                          f"{st.get('register')}, which was not allocated for it")
                args = st.get("args", [])
                direct = next((a for a in args if a in slow), None)
                if direct is not None:
                    raise RematInputError(
                        f"{path}: node '{gn.name}': reads '{regs[direct].name}' straight from "
                        "the slow tier (a device with direct_read): the executor runs kernels "
                        "on fast-tier tensors only; solve for a device without direct_read")
                if [regs.get(a).name if regs.get(a) else None for a in args] != gn.deps:
                    raise RematInputError(
                        f"{path}: node '{gn.name}': the plan's arguments do not match its "
                        f"dependencies in the joint graph ({', '.join(gn.deps) or 'none'})")
                ms = cap.kernel_members(gn)
                if pending is not None and gn is not pending[0][pending[1]]:
                    raise RematInputError(_interrupted(path, pending, f"computes '{gn.name}'"))
                if pending is None and gn.member != 0:
                    raise RematInputError(
                        f"{path}: node '{gn.name}': computed without '{ms[0].name}' right "
                        f"before it: the members of group '{gn.group}' "
                        f"({', '.join(m.name for m in ms)}) are computed together, in order")
                nxt = gn.member + 1
                pending = (ms, nxt) if nxt < len(ms) else None
            elif op == "deallocate":
                if st.get("register") not in regs or st.get("register") in slow:
                    raise RematInputError(f"{path}: statement {i}: deallocates unknown register "
                                          f"{st.get('register')}")
                if pending is not None:
                    raise RematInputError(_interrupted(
                        path, pending, f"deallocates register {st.get('register')}"))
            else:
                raise RematInputError(f"{path}: statement {i}: unknown op '{op}'")
        if pending is not None:
            raise RematInputError(_interrupted(path, pending, "ends"))
        computed = {st["node"] for st in plan["statements"] if st["op"] == "compute"}
        missing = [g.name for g in cap.nodes if g.name not in computed]
        if missing:
            raise RematInputError(f"{path}: node '{missing[0]}' is never computed")

    def _prepare(self) -> None:
        cap = self.cap
        # sink actions per base node: (kind, key, fx value)
        self.sinks: Dict[str, List[tuple]] = {}
        self.const_sinks: List[tuple] = []
        items = [("loss", "", cap.loss)] + [("grad", k, v) for k, v in cap.grads.items()] + [
            ("buffer", k, v) for k, v in cap.mutations.items()]
        for kind, key, v in items:
            bases = base_nodes(cap, v)
            if not bases:
                self.const_sinks.append((kind, key, v))
            else:
                self.sinks.setdefault(bases[0].name, []).append((kind, key, v))
        counts: Dict[str, int] = {}
        for st in self.plan["statements"]:
            if st["op"] == "compute":
                counts[st["node"]] = counts.get(st["node"], 0) + 1
        # kernels (named by their first member, which runs them) whose RNG is replayed
        self.replay_rng = {n for n, c in counts.items()
                           if c > 1 and cap.by_name[n].random and cap.by_name[n].member == 0}
        self.phs: Dict[str, List[fx.Node]] = {}

    # ------------------------------------------------------------------ running

    def _placeholder_env(self, batch: Sequence[torch.Tensor], tangent: torch.Tensor):
        env: Dict[fx.Node, torch.Tensor] = {}
        for n, (kind, key) in self.cap.placeholders.items():
            if kind == "param":
                env[n] = self.cap.params[key]
            elif kind == "buffer":
                env[n] = self.cap.buffers[key]
            elif kind == "input":
                env[n] = batch[key]
            elif kind == "constant":
                env[n] = self.cap.constants[key]
            else:
                env[n] = tangent
        return env

    def _captured_strides(self, batch: Sequence[torch.Tensor]) -> List[Tuple[int, ...]]:
        """Each batch tensor's strides as traced (the capture's input placeholders; the
        given batch's where the graph does not read an input)."""
        out = [tuple(t.stride()) for t in batch]
        for n, (kind, key) in self.cap.placeholders.items():
            v = n.meta.get("val")
            if kind == "input" and isinstance(v, torch.Tensor) and key < len(out):
                out[key] = tuple(v.stride())
        return out

    def _check_batch(self, batch: Sequence[torch.Tensor]) -> None:
        # before the shapes: a meta batch has the captured ones
        refuse_meta([(f"batch[{i}]", t) for i, t in enumerate(batch)])
        got = [(tuple(t.shape), t.dtype) for t in batch]
        if got != self.batch_shapes:
            raise RematInputError(
                f"{self.path}: the batch's shapes {got} differ from the captured ones "
                f"{self.batch_shapes}; re-export and re-solve for this batch")
        for i, (t, traced) in enumerate(zip(batch, self.batch_strides)):
            # the graph's views and kernels were traced for the captured memory layout: a
            # channels-last batch of the same shape failed later in a 'view' node, blamed
            # on a fake kernel. Strides of size-1 dimensions (and of an empty tensor) do
            # not change the layout, as in torch's own significant-strides check
            if t.numel() and any(n > 1 and a != b
                                 for n, a, b in zip(t.shape, t.stride(), traced)):
                raise RematInputError(
                    f"{self.path}: batch[{i}]'s strides {tuple(t.stride())} differ from the "
                    f"captured ones {traced} (same shape {list(t.shape)}): the joint graph "
                    "was traced for the captured memory layout; pass the batch laid out as "
                    "at capture (.contiguous() for a contiguous one), or capture again")
        check_batch_grad(batch)
        changed = _state_change(self.model_state, model_state(self.model))
        if changed:
            raise RematInputError(
                f"{self.path}: {changed} since the model was captured: the joint graph is "
                "another one now; make a new Executor (train_step re-captures by itself)")

    def _kernel(self, name: str, n: fx.Node, args, kwargs):
        """Runs one captured kernel. Fake tensors cannot see values, so a kernel the
        capture accepted may still fail on the real batch (a class index past the
        logits, a token id past the embedding): that is the batch's fault, said in one
        line naming the node, not a traceback from deep in the executor."""
        try:
            return n.target(*args, **kwargs)
        except RematInputError:
            raise
        except Exception as e:
            raise RematInputError(
                f"{self.path}: node '{name}' ({getattr(n.target, '__name__', n.target)}) "
                f"failed on the real batch: {quote_error(e)}") from e

    def _ensure_grads(self) -> None:
        for p in self.cap.trained_params().values():
            if p.grad is None or p.grad.shape != p.shape:
                p.grad = torch.zeros_like(p)

    def __call__(self, *batch: torch.Tensor, measure: bool = False) -> torch.Tensor:
        """One training step with the plan. Returns the loss (a 0-dim tensor)."""
        return self.run(self.plan["statements"], batch, measure=measure)

    def run_no_remat(self, *batch: torch.Tensor, measure: bool = False) -> torch.Tensor:
        """The same joint graph, every node once in order, freed after its last reader."""
        return self.run(no_remat_statements(self.cap), batch, measure=measure)

    def run(self, statements: List[Dict[str, Any]], batch: Sequence[torch.Tensor],
            measure: bool = False) -> torch.Tensor:
        self._check_batch(batch)
        ddp = self.ddp
        if ddp is not None:
            _ddp.before_step(ddp, self.cap.trained_params())
        with _autocast_off():
            loss = self._run(statements, batch, measure)
        if ddp is not None:
            _ddp.after_step(ddp, self.cap.trained_params())
        return loss

    def _run(self, statements: List[Dict[str, Any]], batch: Sequence[torch.Tensor],
             measure: bool) -> torch.Tensor:
        self._ensure_grads()
        cap = self.cap
        dev = next((p.device for p in cap.params.values()), torch.device("cpu"))
        tangent = torch.ones((), dtype=cap.loss.meta["val"].dtype, device=dev)
        env = self._placeholder_env(batch, tangent)
        regs: Dict[int, Any] = {}
        tiers = _Tiers(dev)  # slow registers and copies in flight
        result: Any = None  # a group's kernel result, between its first and last member
        result_of: Optional[fx.Node] = None  # ... and that kernel
        done: set = set()
        rng: Dict[str, Any] = {}
        loss_value: List[torch.Tensor] = []
        self.computations = {}
        self.size_mismatches: Dict[str, tuple] = {}
        cuda = dev.type == "cuda"
        resident = list(cap.params.values()) + list(cap.buffers.values()) + list(batch) + [
            tangent] + [p.grad for p in cap.trained_params().values()] + list(
            cap.constants.values())
        tracker = StorageTracker(resident) if measure else None

        def evaluate(v: fx.Node, live: Dict[str, Any]):
            """An FX value from the placeholders and the live graph-node values ``live``
            (node name -> register value)."""
            if v.op in ("placeholder", "get_attr"):
                return env[v]
            ms = cap.members.get(v)
            if ms is not None:  # a kernel
                if not _is_tuple(v.meta.get("val")):
                    return live[ms[0].name]
                return _whole(v, ms, live)
            src = v.args[0] if v.target is operator.getitem else None
            if isinstance(src, fx.Node) and src in cap.members and _is_tuple(
                    src.meta.get("val")):
                # getitem(kernel, j): from the register of the member that owns output j
                return live[cap.bases[v][0].name][v.args[1]]
            args = fx.node.map_arg(v.args, lambda a: evaluate(a, live))
            kwargs = fx.node.map_arg(v.kwargs, lambda a: evaluate(a, live))
            try:
                return v.target(*args, **kwargs)
            except RuntimeError as e:  # an alias the real tensors do not allow
                base = next((a for a in v.all_input_nodes), None)
                real = next((x for x in args if isinstance(x, torch.Tensor)), None)
                fake = base.meta.get("val") if base is not None else None
                strides = (f": its input has strides {tuple(real.stride())}, traced as "
                           f"{tuple(fake.stride())} (a fake kernel that lays its output out "
                           "otherwise than the real one)"
                           if isinstance(real, torch.Tensor) and isinstance(fake, torch.Tensor)
                           and real.stride() != fake.stride() else "")
                why = quote_error(e, with_type=False)[:120]
                raise RematInputError(
                    f"{self.path}: {v.name} ({v.target}) of the joint graph cannot be taken "
                    f"from the real tensors ({why}){strides}") from e

        written: set = set()  # parameters whose p.grad this step has written
        # partial gradients still to come per parameter (a tied one has several); the
        # parameters whose gradient is complete, in the order they completed
        pending = _partials(cap)
        completed: List[str] = []
        # a buffer's new value is copied into it at its node's first computation; a kernel
        # that reads the buffer and is (re)computed after that must still see the old
        # value (spectral norm's power-iteration vectors feed the weight): the old value
        # is then kept in a copy for the rest of the step (executor overhead, as the RNG
        # states, outside the measurement)
        last_read = _last_buffer_reads(cap, statements)
        step = [0]  # index of the statement being run

        def sink(kind, key, v, live):
            t = evaluate(v, live)
            if kind == "grad":
                p = cap.params[key]
                if id(p) in written:  # a tied parameter's next partial gradient: sum
                    p.grad.add_(t)
                else:
                    p.grad.copy_(t)
                    written.add(id(p))
                pending[id(p)] -= 1
                if not pending[id(p)]:
                    completed.append(key)
            elif kind == "buffer":
                buf = cap.buffers[key]
                if last_read.get(id(buf), -1) > step[0]:
                    with (tracker.paused() if tracker is not None else _null()):
                        old = buf.clone()
                    for ph, (k2, key2) in cap.placeholders.items():
                        if k2 == "buffer" and cap.buffers[key2] is buf:
                            env[ph] = old
                buf.copy_(t)
            else:
                # a copy in the loss's own dtype and device, made outside the measurement:
                # the register it came from is freed as the plan says
                with (tracker.paused() if tracker is not None else _null()):
                    loss_value.append(t.detach().clone())

        if cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            cuda_base = torch.cuda.memory_allocated()
        with torch.no_grad():
            ctx = tracker if tracker is not None else _null()
            with ctx:
                for kind, key, v in self.const_sinks:
                    sink(kind, key, v, {})
                for i_st, st in enumerate(statements):
                    step[0] = i_st
                    op = st["op"]
                    if op == "compute":
                        name = st["node"]
                        gn = cap.by_name[name]
                        n = gn.fx_node
                        if gn.member == 0:
                            live = {d: regs[r] for d, r in zip(gn.deps, st["args"])}

                            def read(a, live=live):
                                return evaluate(a, live)

                            args = fx.node.map_arg(n.args, read)
                            kwargs = fx.node.map_arg(n.kwargs, read)
                            first_run = name not in done
                            if first_run and name in self.replay_rng:
                                rng[name] = _get_rng(cuda)
                            if not first_run and name in rng:
                                saved = _get_rng(cuda)
                                _set_rng(rng[name], cuda)
                                out = self._kernel(name, n, args, kwargs)
                                _set_rng(saved, cuda)
                            else:
                                out = self._kernel(name, n, args, kwargs)
                            del args, kwargs, live, read
                        else:
                            # the kernel ran at the group's first member, just before
                            # (_check_plan holds plans to that; this guards run()'s callers)
                            if result_of is not n:
                                raise RematInputError(
                                    f"{self.path}: node '{name}': computed without "
                                    f"'{cap.kernel_members(gn)[0].name}' right before it")
                            out = result
                        value = _member_value(gn, out, cap.kernel_members(gn))
                        # the whole result is kept only until the group's last member takes
                        # its outputs: then every output is held by its own register only
                        result = out if gn.member + 1 < len(cap.kernel_members(gn)) else None
                        result_of = n if result is not None else None
                        del out
                        regs[st["register"]] = value
                        first = name not in done
                        if tracker is not None and first:
                            real = _fresh_storage_bytes(value, tracker.resident)
                            if real != gn.memory:
                                self.size_mismatches[name] = (gn.memory, real)
                        self.computations[name] = self.computations.get(name, 0) + 1
                        if first:
                            done.add(name)
                            for kind, key, v in self.sinks.get(name, ()):
                                sink(kind, key, v, {name: value})
                        del value
                    elif op == "deallocate":
                        regs.pop(st["register"], None)
                    elif op == "copy_out":
                        tiers.copy_out(st["register"], regs[st["src"]], tracker)
                    elif op == "copy_in":
                        regs[st["register"]] = tiers.copy_in(st["register"], st["src"])
                    elif op == "wait":
                        tiers.wait(st["register"])
                    elif op == "drop":
                        tiers.drop(st["register"])
                    if self.trace is not None and tracker is not None:
                        self.trace(i_st, tracker.live, tracker.peak)
                regs.clear()
                tiers.clear()
                result = None
            # the parameters' gradient hooks, once each gradient is whole, as autograd runs
            # them; after the plan, outside the measurement: a hook that updates its
            # parameter (an optimizer step in backward) must not change what a later
            # recomputation reads
            for key in completed:
                _run_grad_hooks(key, cap.params[key])
        if tracker is not None:
            # resident storages as they are (parameters, p.grad, buffers, batch, tangent):
            # the graph file's fixed_memory without optimizer state, when all is as captured
            self.last_fixed = storage_bytes(resident)
            self.last_peak = self.last_fixed + tracker.peak
        if cuda:
            torch.cuda.synchronize()
            self.last_cuda_peak = torch.cuda.max_memory_allocated() - cuda_base
        if not loss_value:
            raise RematInputError(f"{self.path}: the plan never computes the loss")
        return loss_value[0]


class _Tiers:
    """The slow tier of a run: slow registers, and the copies not yet waited for.

    On CUDA a copy runs on a side stream (one per direction, as the device files'
    duplex engines) after the work issued so far on the compute stream, and
    ``wait`` makes the compute stream wait for it. On CPU the slow tier is
    ordinary memory and copies are synchronous; what the fast-tier measurement
    must not see is the slow copies, so they are made with the tracker paused.
    """

    def __init__(self, dev: torch.device):
        self.cuda = dev.type == "cuda"
        self.dev = dev
        self.slow: Dict[int, Any] = {}
        self.events: Dict[int, Any] = {}
        if self.cuda:
            self.streams = {"out": torch.cuda.Stream(dev), "in": torch.cuda.Stream(dev)}

    def _copy(self, value: Any, to_slow: bool) -> Any:
        def one(t):
            if not isinstance(t, torch.Tensor):
                return t
            if not self.cuda:
                return t.clone(memory_format=torch.preserve_format)
            side = self.streams["out" if to_slow else "in"]
            side.wait_stream(torch.cuda.current_stream(self.dev))
            if to_slow:
                buf = torch.empty_strided(t.size(), t.stride(), dtype=t.dtype, device="cpu",
                                          pin_memory=True)
            else:
                buf = torch.empty_strided(t.size(), t.stride(), dtype=t.dtype, device=self.dev)
            with torch.cuda.stream(side):
                buf.copy_(t, non_blocking=True)
            # neither buffer may be reused before the copy is done
            (t if to_slow else buf).record_stream(side)
            return buf
        # a register holds a tensor, a kernel's tuple, or a group member's {index: tensor}
        return tree_map(one, value)

    def _event(self, reg: int, to_slow: bool) -> None:
        if self.cuda:
            ev = torch.cuda.Event()
            ev.record(self.streams["out" if to_slow else "in"])
            self.events[reg] = ev

    def copy_out(self, reg: int, value: Any, tracker: Optional[StorageTracker]) -> None:
        if tracker is not None:
            with tracker.paused():
                self.slow[reg] = self._copy(value, True)
        else:
            self.slow[reg] = self._copy(value, True)
        self._event(reg, True)

    def copy_in(self, reg: int, src: int) -> Any:
        out = self._copy(self.slow[src], False)
        self._event(reg, False)
        return out

    def wait(self, reg: int) -> None:
        ev = self.events.pop(reg, None)
        if ev is not None:
            torch.cuda.current_stream(self.dev).wait_event(ev)

    def drop(self, reg: int) -> None:
        self.slow.pop(reg, None)

    def clear(self) -> None:
        if self.cuda:
            torch.cuda.synchronize(self.dev)
        self.slow.clear()
        self.events.clear()


def _is_tuple(val) -> bool:
    return isinstance(val, (tuple, list))


def _last_buffer_reads(cap: Capture, statements: List[Dict[str, Any]]) -> Dict[int, int]:
    """id(buffer) -> index of the last compute statement whose kernel reads that mutated
    buffer (directly or through views of it)."""
    mutated = {id(cap.buffers[k]) for k in cap.mutations}
    if not mutated:
        return {}
    reads: Dict[fx.Node, set] = {}

    def bufs(v: fx.Node) -> set:
        """The mutated buffers an FX value is (a view of), without crossing a kernel."""
        if v in reads:
            return reads[v]
        out: set = set()
        kind = cap.placeholders.get(v)
        if kind is not None and kind[0] == "buffer" and id(cap.buffers[kind[1]]) in mutated:
            out.add(id(cap.buffers[kind[1]]))
        elif v.op == "call_function" and v not in cap.members:
            for a in v.all_input_nodes:
                out |= bufs(a)
        reads[v] = out
        return out

    last: Dict[int, int] = {}
    for i, st in enumerate(statements):
        if st["op"] != "compute":
            continue
        for a in cap.by_name[st["node"]].fx_node.all_input_nodes:
            for b in bufs(a):
                last[b] = i
    return last


def _member_value(gn: GraphNode, out: Any, members: List[GraphNode]) -> Any:
    """What ``gn``'s register holds of its kernel's result ``out``: a plain node of a
    kernel returning one tensor holds it; otherwise ``{j: out[j]}`` over the tuple
    outputs it owns (the first member also carries the outputs no member owns: None,
    or a view of an input), so that dropping the register frees its storages only."""
    if not _is_tuple(out):
        return out
    keep = set(gn.outputs)
    if gn.member == 0:
        owned = {j for m in members for j in m.outputs}
        keep |= {j for j in range(len(out)) if j not in owned}
    return {j: out[j] for j in sorted(keep)}


def _whole(v: fx.Node, ms: List[GraphNode], live: Dict[str, Any]) -> tuple:
    """A multi-member kernel's tuple value, from whichever members' registers are live."""
    n_out = len(v.meta["val"])
    vals: List[Any] = [None] * n_out
    for m in ms:
        if m.name in live:
            for j, t in live[m.name].items():
                vals[j] = t
    return tuple(vals)


def _fresh_storage_bytes(out, resident) -> int:
    """Bytes of the distinct storages of a kernel's outputs (resident ones excluded)."""
    from .capture import _tensor_leaves, storage_key

    if isinstance(out, dict):  # a member's register: {tuple index: output}
        out = list(out.values())
    seen: Dict[int, int] = {}
    for t in _tensor_leaves(out):
        k = storage_key(t)
        if k not in resident:
            seen[k] = t.untyped_storage().nbytes()
    return sum(seen.values())


def _interrupted(path: str, pending: tuple, what: str) -> str:
    """The one-line refusal of a plan that leaves a group's members half computed."""
    ms, k = pending
    return (f"{path}: node '{ms[k].name}': the plan {what} after computing "
            f"'{ms[k - 1].name}' and before '{ms[k].name}': the members of group "
            f"'{ms[0].group}' ({', '.join(m.name for m in ms)}) must be computed together, "
            "consecutively and in order (only their allocations in between)")


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def _get_rng(cuda: bool):
    return (torch.get_rng_state(), torch.cuda.get_rng_state() if cuda else None)


def _set_rng(state, cuda: bool) -> None:
    torch.set_rng_state(state[0])
    if cuda and state[1] is not None:
        torch.cuda.set_rng_state(state[1])


def no_remat_statements(cap: Capture) -> List[Dict[str, Any]]:
    """Every node once in graph order, each freed right after its last reader (a node
    nothing reads: right after its computation). A group's members are allocated and
    computed consecutively, and nothing is freed before the group's last member (the
    kernel allocates all its outputs at once), as remat's plans do."""
    # position of the last member of each node's group: reads and frees happen there
    end: Dict[str, int] = {}
    for g in cap.nodes:
        end[g.name] = g.index + len(cap.kernel_members(g)) - 1 - g.member
    last: Dict[str, int] = {}
    for g in cap.nodes:
        last.setdefault(g.name, end[g.name])
        for d in g.deps:
            last[d] = end[g.name]
    regs = {g.name: i for i, g in enumerate(cap.nodes)}
    frees: Dict[int, List[str]] = {}
    for name, i in last.items():
        frees.setdefault(i, []).append(name)
    out: List[Dict[str, Any]] = []
    for i, g in enumerate(cap.nodes):
        out.append({"op": "allocate", "register": i, "node": g.name, "bytes": g.memory})
        out.append({"op": "compute", "node": g.name, "register": i,
                    "args": [regs[d] for d in g.deps]})
        for name in frees.get(i, []):
            out.append({"op": "deallocate", "register": regs[name]})
    return out


def _autocast_state() -> tuple:
    """torch.autocast around the call, per device type: (type, enabled, dtype)."""
    return tuple((d, torch.is_autocast_enabled(d),
                  str(torch.get_autocast_dtype(d)).replace("torch.", ""))
                 for d in ("cpu", "cuda"))


_SETTING_TYPES = (bool, int, float, str, type(None))


def _setting(v) -> bool:
    return isinstance(v, _SETTING_TYPES) or (
        isinstance(v, tuple) and all(isinstance(x, _SETTING_TYPES) for x in v))


def _settings(m: torch.nn.Module) -> tuple:
    """A module's plain settings (Dropout.p, BatchNorm's momentum and eps, a stochastic
    depth rate): the trace bakes them into the graph as constants, so a step after one
    changed ran the old value without a word."""
    # NaN is kept as its name: it never equals itself, and the state would differ
    # from itself at every step
    return tuple((a, "nan" if isinstance(v, float) and v != v else v)
                 for a, v in vars(m).items()
                 if not a.startswith("_") and a != "training" and _setting(v))


def _identity(t: torch.Tensor) -> tuple:
    """Which tensor, and what it is: ``model.half()`` or ``.to(device)`` keep the
    objects but not the dtype or device the graph was captured with."""
    return (id(t), str(t.dtype).replace("torch.", ""), str(t.device), tuple(t.shape))


def _describe(ident: tuple) -> str:
    _, dtype, device, shape = ident
    return f"{dtype} on {device}, shape {list(shape)}"


def model_state(model: torch.nn.Module) -> tuple:
    """What a capture depends on besides the batch and the loss function: which
    parameters require grad (the joint graph computes their gradients only), which
    tensor objects the parameters and buffers are (the capture holds the ones it saw:
    after ``load_state_dict(assign=True)`` or a replaced layer it trained the old ones,
    and the new ones kept ``grad None``), each module's training mode and plain
    settings (dropout, BatchNorm), and the torch.autocast state around the call (the
    capture traces its casts into the graph)."""
    return (tuple((k, p.requires_grad) for k, p in model.named_parameters(remove_duplicate=False)),
            tuple((k, m.training) for k, m in model.named_modules()),
            _autocast_state(),
            tuple((k, _identity(t)) for k, t in model.named_parameters(remove_duplicate=False)),
            tuple((k, _identity(t)) for k, t in model.named_buffers(remove_duplicate=False)),
            tuple((k, _settings(m)) for k, m in model.named_modules()))


@contextlib.contextmanager
def _autocast_off():
    """The executor runs the captured kernels as they are: their casts are in the graph
    already, and an autocast around the step would cast them again."""
    with contextlib.ExitStack() as stack:
        stack.enter_context(torch.autocast("cpu", enabled=False))
        if torch.cuda.is_available():
            stack.enter_context(torch.autocast("cuda", enabled=False))
        yield


def _state_change(was: tuple, now: tuple) -> str:
    """The first difference between two ``model_state``s, in words ('' if none)."""
    if was == now:
        return ""
    for (k, a), (k2, b) in zip(was[0], now[0]):
        if k == k2 and a != b:
            return f"parameter '{k}' has requires_grad={b} (it was {a})"
    for (k, a), (k2, b) in zip(was[1], now[1]):
        if k == k2 and a != b:
            what = f"module '{k}' is" if k else "the model is"
            return (f"{what} in {'training' if b else 'eval'} mode (it was in "
                    f"{'training' if a else 'eval'} mode)")
    for (d, on, dtype), (_, on2, dtype2) in zip(was[2], now[2]):
        if (on, dtype) != (on2, dtype2):
            def say(o, t):
                return f"on ({t})" if o else "off"
            return (f"torch.autocast('{d}') is {say(on2, dtype2)} (it was {say(on, dtype)} "
                    "when the model was captured)")
    for what, i in (("parameter", 3), ("buffer", 4)):
        if [k for k, _ in was[i]] != [k for k, _ in now[i]]:
            continue
        for (k, a), (_, b) in zip(was[i], now[i]):
            if a[0] != b[0]:
                return f"{what} '{k}' is another tensor than the one captured"
            if a != b:
                return f"{what} '{k}' is {_describe(b)} (it was {_describe(a)})"
    for (k, a), (k2, b) in zip(was[5], now[5]):
        if k == k2 and a != b:
            old, new = dict(a), dict(b)
            for attr in sorted(set(old) | set(new), key=str):
                if old.get(attr) != new.get(attr):
                    what = f"module '{k}'" if k else "the model"
                    return (f"{what} has {attr}={new.get(attr)!r} (it was "
                            f"{old.get(attr)!r})")
    return "the model's parameters or modules changed"


def _partials(cap: Capture) -> Dict[int, int]:
    """id(parameter) -> how many partial gradients of it the joint graph computes."""
    out: Dict[int, int] = {}
    for k in cap.grads:
        out[id(cap.params[k])] = out.get(id(cap.params[k]), 0) + 1
    return out


def _run_grad_hooks(name: str, p: torch.Tensor) -> None:
    """What autograd does with a parameter's gradient on one backward pass, past the
    sum: its tensor hooks (``register_hook``), in registration order, each on the
    previous one's result (None: unchanged), then its post-accumulate-grad hooks
    (``register_post_accumulate_grad_hook``), with the parameter once ``p.grad`` holds
    the result. The joint graph never sees them: AOTAutograd traces with other
    tensors in the parameters' place."""
    hooks = getattr(p, "_backward_hooks", None) or {}
    post = getattr(p, "_post_accumulate_grad_hooks", None) or {}
    if not hooks and not post:
        return
    g = p.grad
    for hook in list(hooks.values()):
        try:
            out = hook(g)
        except Exception as e:  # noqa: BLE001 - user code: say whose hook, in one line
            raise RematInputError(f"the gradient hook of parameter '{name}' failed: "
                                  f"{quote_error(e)}") from e
        if out is None:
            continue
        if not isinstance(out, torch.Tensor) or out.shape != g.shape or out.dtype != g.dtype:
            got = (f"a {str(out.dtype).replace('torch.', '')} {list(out.shape)} tensor"
                   if isinstance(out, torch.Tensor) else type(out).__name__)
            raise RematInputError(
                f"the gradient hook of parameter '{name}' returned {got}, where its gradient "
                f"is {str(g.dtype).replace('torch.', '')} {list(g.shape)}")
        g = out
    if g is not p.grad and g.untyped_storage().data_ptr() == p.grad.untyped_storage().data_ptr():
        g = g.clone()  # a view of p.grad (g.t() of a square one): not copied onto itself
    if g is not p.grad:
        p.grad.copy_(g)
    for hook in list(post.values()):
        try:
            hook(p)
        except Exception as e:  # noqa: BLE001
            raise RematInputError(f"the post-accumulate-grad hook of parameter '{name}' "
                                  f"failed: {quote_error(e)}") from e


# how many executors train_step keeps per model: a loss function made anew every step
# (functools.partial(...) in the loop) is a new key each time, so the cache is bounded,
# least recently used first out
CACHE_SIZE = 4

# model -> {key: Executor}, least recently used first; not on the module itself, so that
# deepcopy and state_dict of the model are unaffected
_EXECUTORS: weakref.WeakKeyDictionary[torch.nn.Module, OrderedDict[tuple, Executor]] = (
    weakref.WeakKeyDictionary())


def _plan_key(plan: Any) -> tuple:
    """(cache key, the plan to run). A plan is keyed by its contents: a plan file
    rewritten on disk (a timestamp may not tell, at its granularity), or a dict edited
    in place, is another plan; the executor of a dict gets its own copy, which later
    edits cannot reach."""
    path = _plan_path(plan)
    if path is not None:
        plan = path
        try:
            with open(plan, "rb") as f:
                blob = f.read()
        except FileNotFoundError as e:
            raise RematInputError(f"{plan}: no such file") from e
        except OSError as e:
            raise RematInputError(f"{plan}: cannot be read ({e.strerror or e})") from e
        return ("file", os.path.abspath(plan), hashlib.sha256(blob).hexdigest()), plan
    try:
        text = json.dumps(plan, sort_keys=True)
    except (TypeError, ValueError):  # not JSON: the Executor says what is wrong with it
        return ("object", id(plan)), plan
    return ("dict", hashlib.sha256(text.encode()).hexdigest()), json.loads(text)


def train_step(model: torch.nn.Module, plan: Dict[str, Any] | str | os.PathLike,
               batch: Sequence[torch.Tensor], loss_fn: Callable[..., Any]) -> torch.Tensor:
    """One training step of ``model`` on ``batch`` with a remat plan: fills ``p.grad``,
    updates buffers once, returns the loss. The executor (the capture and the checked
    plan) is cached per model, for the plan (its file's or dict's contents), the loss
    function, which parameters require grad and each module's mode: a change of any
    of these captures the model again. At most ``CACHE_SIZE`` executors are kept per
    model (the least recently used goes). A ``DistributedDataParallel`` model runs the
    plan of its ``module`` and averages the gradients over its process group, as DDP
    does (``remat_torch.ddp``)."""
    # before the model is a cache key (None cannot be weakly referenced: a TypeError),
    # and a single tensor becomes a 1-tuple before it is unpacked into the step
    batch = normalize_inputs(model, batch, loss_fn)
    cache = _EXECUTORS.setdefault(model, OrderedDict())
    plan_key, plan = _plan_key(plan)
    # the executor holds loss_fn, so its id is not reused while the entry lives; a DDP
    # model's state is its module's (no_sync() toggles the wrapper's flags, not the graph)
    key = (plan_key, id(loss_fn), model_state(_ddp.split(model)[0]))
    ex = cache.get(key)
    if ex is None:
        ex = Executor(model, loss_fn, batch, plan)
        ex._keep = None
        cache[key] = ex
        while len(cache) > CACHE_SIZE:
            cache.popitem(last=False)
    cache.move_to_end(key)
    return ex(*batch)
