"""``compare-pytorch``: PyTorch's memory-budget partitioner and remat on the same joint graph.

For a model factory, this:

1. captures the joint forward+backward graph (``capture``) and exports it as a
   remat graph file (``graphfile.export``): both sides work on these nodes, with
   these costs;
2. runs ``torch._functorch.partitioners.min_cut_rematerialization_partition`` on
   (a copy of) the same joint graph at each ``activation_memory_budget``, with a
   ``CustomRuntimeEstimator`` that returns the graph file's node costs, so the
   partitioner's knapsack minimises the same objective as remat;
3. turns each partition (forward module, backward module) into a remat plan:
   the forward module's kernels in order, then the backward module's; every
   value is allocated when it is computed and freed after its last reader; a
   forward kernel that the backward module computes again is a second compute
   of the same graph node (a recomputation); a multi-output kernel is all its
   group's members, computed consecutively, each freed after its own last
   reader (not before the group's last member is computed);
4. has ``remat simulate`` measure that plan (PyTorch's cost and peak), then
   gives ``remat solve -s remat-exact`` that peak as the budget;
5. sweeps remat below PyTorch's smallest peak, down to the smallest feasible
   budget (``remat inspect``), where no setting of PyTorch's budget reaches.

Python talks to remat only through files and its command line.

Choices written down (see docs/compare-pytorch.md):

* ``functorch.config.cse`` is off during partitioning: CSE would merge
  identical nodes of the joint graph, and then PyTorch would partition a
  different graph than remat solves.
* Parameters and buffers are static-lifetime inputs (as under
  ``torch.compile``), the batch is not; either way they are ``fixed_memory``
  in the graph file, so the plan's peak does not depend on it.
* The partitioner's other knobs keep their defaults (its recompute
  heuristics and ban lists are part of what is being compared).
"""

from __future__ import annotations

import copy
import csv
import json
import os
import re
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch.fx as fx

from . import binary
from .capture import Capture
from .errors import RematInputError
from .files import write_text

DEFAULT_FRACTIONS = [round(0.1 * i, 1) for i in range(11)]  # 0.0 .. 1.0 (1.0: no budget)

CSV_FIELDS = [
    "series",  # "pytorch" (a partitioner point) or "remat-below" (a budget PyTorch does not reach)
    "torch_budget",  # activation_memory_budget (a fraction of saved activations)
    "budget_bytes",  # the budget remat was given (PyTorch's simulated peak on "pytorch" rows)
    "torch_peak",
    "torch_cost",
    "torch_overhead",  # torch_cost / every-node-once cost
    "torch_recomputes",
    "torch_saved_bytes",  # bytes of the forward values the backward module reads (saved)
    "remat_cost",
    "remat_peak",
    "remat_overhead",
    "remat_recomputes",
    "ratio",  # remat_cost / torch_cost
    "remat_status",
    "remat_gap",  # remat-exact's proven gap to its lower bound, percent
    "remat_time_s",
    "verified",  # with --verify: both plans run by the executor (torch / remat: ok or FAIL)
]


# --------------------------------------------------------------------------- partitioning


def num_fwd_outputs(cap: Capture) -> int:
    """The joint graph's forward outputs (buffer mutations, then the loss) come first."""
    out = next(n for n in cap.gm.graph.nodes if n.op == "output")
    flat = list(out.args[0])
    n = len(cap.mutations) + 1
    if cap.loss not in flat[:n] or any(v in flat[:n] for v in cap.grads.values()):
        raise RematInputError("the joint graph's outputs are not (mutations, loss, gradients): "
                              "cannot tell the partitioner its forward outputs")
    return n


def static_input_indices(cap: Capture) -> List[int]:
    """Positions, among the primal placeholders, of parameters and buffers."""
    primals = [n for n in cap.gm.graph.nodes
               if n.op == "placeholder" and cap.placeholders[n][0] != "tangent"]
    return [i for i, n in enumerate(primals) if cap.placeholders[n][0] in ("param", "buffer")]


def _estimator_class():
    try:
        from torch._inductor.custom_graph_pass import CustomRuntimeEstimator
    except ImportError:  # older torch: only the named estimators
        return None

    class RematCosts(CustomRuntimeEstimator):
        """remat's own node costs (from the graph file) for the partitioner's knapsack.

        An FX node that is a graph-file node costs what the file says; an alias
        (a view, a ``getitem``) costs 0, as in the graph file. A multi-output
        kernel's FX name is its first member's, which carries the kernel's whole
        cost (the other members cost 0), so the kernel is priced once."""

        def __init__(self, costs: Dict[str, float]):
            self.costs = costs
            self.calls: List[str] = []

        def __call__(self, node: fx.Node) -> float:
            self.calls.append(node.name)
            return float(self.costs.get(node.name, 0.0))

        def uuid(self) -> Optional[Any]:
            return None

    return RematCosts


def partition(cap: Capture, fraction: float, costs: Dict[str, float]):
    """PyTorch's min-cut partition of (a copy of) the joint graph at a budget fraction.

    Returns ``(forward GraphModule, backward GraphModule, estimator calls)``."""
    from torch._functorch import config as fconfig
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    if not 0.0 <= fraction <= 1.0:
        raise RematInputError(f"activation_memory_budget {fraction}: must be in [0, 1]")
    cls = _estimator_class()
    est = cls(costs) if cls is not None else None
    patch: Dict[str, Any] = {"activation_memory_budget": float(fraction), "cse": False}
    if est is not None:
        patch["activation_memory_budget_runtime_estimator"] = est
    gm = copy.deepcopy(cap.gm)  # the partitioner edits the joint module in place
    with fconfig.patch(**patch):
        fw, bw = min_cut_rematerialization_partition(
            gm, None, num_fwd_outputs=num_fwd_outputs(cap),
            static_lifetime_input_indices=static_input_indices(cap))
    return fw, bw, (est.calls if est is not None else [])


# --------------------------------------------------------------------------- partition -> plan


@dataclass
class PartitionPlan:
    statements: List[Dict[str, Any]]
    computes: List[str]  # graph-node names in compute order
    saved: List[str]  # graph nodes whose forward value the backward module reads (saved)
    recomputed: List[str] = field(default_factory=list)


def partition_statements(cap: Capture, fw: fx.GraphModule, bw: fx.GraphModule) -> PartitionPlan:
    """The plan that runs ``fw`` then ``bw``: each kernel allocated when computed and freed
    after its last reader. Partition nodes are matched to the joint graph by FX name (the
    partitioner keeps names); a name that is not in the joint graph, or a kernel whose
    inputs do not resolve to its graph-file deps, is an error."""
    joint = {n.name: n for n in cap.gm.graph.nodes}
    tangents = {n.name for n, (kind, _) in cap.placeholders.items() if kind == "tangent"}

    computes: List[Tuple[str, int, List[int]]] = []  # (node, register, args)
    reg_node: List[str] = []  # register -> graph node
    fw_regs: Dict[str, Dict[str, int]] = {}  # fw value name -> {graph node: register}

    def run(gm: fx.GraphModule, which: str) -> Dict[str, Dict[str, int]]:
        env: Dict[fx.Node, Dict[str, int]] = {}
        for n in gm.graph.nodes:
            if n.op == "output":
                continue
            if n.op == "get_attr":  # a tensor constant: fixed memory, as a parameter
                env[n] = {}
                continue
            if n.op == "placeholder":
                if n.name in joint and joint[n.name].op == "placeholder":
                    env[n] = {}  # parameter, buffer, batch or tangent: fixed memory
                elif which == "backward" and n.name in fw_regs:
                    env[n] = fw_regs[n.name]  # a saved value: the forward's registers
                else:
                    raise RematInputError(f"{which} partition input {n.name}: not a joint-graph "
                                          "placeholder nor a saved forward value")
                continue
            if n.op != "call_function":
                raise RematInputError(f"{which} partition node {n.name}: unsupported op {n.op}")
            orig = joint.get(n.name)
            if orig is None or orig.target is not n.target:
                raise RematInputError(f"{which} partition node {n.name} ({n.target}) is not in "
                                      "the joint graph under that name: cannot map it")
            ins: Dict[str, int] = {}
            for a in n.all_input_nodes:
                ins.update(env[a])
            ms = cap.members.get(orig)
            if ms is None:
                # an alias: lives in its bases' registers (getitem(kernel, j): only the
                # member owning output j, not the whole group)
                keep = {b.name for b in cap.bases.get(orig, [])}
                env[n] = {k: r for k, r in ins.items() if k in keep}
                continue
            g = ms[0]
            missing = [d for d in g.deps if d not in ins]
            extra = sorted(set(ins) - set(g.deps))
            if missing or extra:
                raise RematInputError(f"{which} partition node {n.name}: its inputs live in "
                                      f"{sorted(ins)}, the graph file says deps {g.deps}")
            # a multi-output kernel: all its members, consecutively, each its own register
            env[n] = {}
            for m in ms:
                r = len(reg_node)
                reg_node.append(m.name)
                computes.append((m.name, r, [ins[d] for d in m.deps]))
                env[n][m.name] = r
        return {n.name: env[n] for n in env}

    fw_env = run(fw, "forward")
    fw_regs.update({k: v for k, v in fw_env.items() if k not in tangents})
    n_fw = len(computes)
    saved = sorted({gn for n in bw.graph.nodes if n.op == "placeholder" and n.name in fw_regs
                    for gn in fw_regs[n.name]})
    run(bw, "backward")

    # free each register after its last reader (right after its compute if none reads it);
    # within a group nothing is freed before its last member is computed (the kernel
    # allocates all members at once), so reads and frees count at the group's end
    ends = []
    for i, (name, _, _) in enumerate(computes):
        g = cap.by_name[name]
        ends.append(i + len(cap.kernel_members(g)) - 1 - g.member)
    last: Dict[int, int] = {}
    for i, (_, r, args) in enumerate(computes):
        last.setdefault(r, ends[i])
        for a in args:
            last[a] = ends[i]
    frees: Dict[int, List[int]] = {}
    for r, i in last.items():
        frees.setdefault(i, []).append(r)
    g_mem = {g.name: g.memory for g in cap.nodes}
    stmts: List[Dict[str, Any]] = []
    for i, (name, r, args) in enumerate(computes):
        stmts.append({"op": "allocate", "register": r, "node": name, "bytes": g_mem[name]})
        stmts.append({"op": "compute", "node": name, "register": r, "args": args})
        for fr in sorted(frees.get(i, [])):
            stmts.append({"op": "deallocate", "register": fr})
    names = [c[0] for c in computes]
    fw_names = set(names[:n_fw])
    recomputed = [nm for nm in names[n_fw:] if nm in fw_names]
    computed = set(names)
    absent = [g.name for g in cap.nodes if g.name not in computed]
    if absent:
        raise RematInputError(f"the partition never computes {len(absent)} graph node(s) "
                              f"({', '.join(absent[:5])}): it is not the same graph")
    return PartitionPlan(statements=stmts, computes=names, saved=saved, recomputed=recomputed)


def write_plan(path: str, model: str, fixed_memory: int, strategy: str,
               statements: List[Dict[str, Any]], cost: float = 0.0, peak: int = 0,
               budget: Optional[int] = None) -> None:
    plan = {"model": model, "strategy": strategy, "budget": budget,
            "fixed_memory": fixed_memory, "cost": cost, "peak_memory": peak,
            "statements": statements}
    write_text(path, json.dumps(plan))


# --------------------------------------------------------------------------- remat's answers


def _field(text: str, key: str) -> str:
    m = re.search(rf"^{key}\s+(.*)$", text, re.M)
    return m.group(1).strip() if m else ""


def simulate(graph: str, plan: str) -> Tuple[float, int]:
    """``remat simulate``: (cost, peak bytes). Raises if the simulator rejects the plan."""
    out = binary.simulate(graph, plan)
    m_cost = re.search(r"^cost\s+(\S+)", out, re.M)
    m_peak = re.search(r"^peak memory.*\((\d+) bytes\)", out, re.M)
    if m_cost is None or m_peak is None:
        raise RematInputError(f"remat simulate {graph} {plan}: no cost/peak in its output")
    return float(m_cost.group(1)), int(m_peak.group(1))


def inspect(graph: str) -> Dict[str, float]:
    """``remat inspect --json``: smallest feasible budget, checkpoint-all peak, total cost."""
    out = binary.run(["inspect", "--json", graph]).stdout
    try:
        info = json.loads(out)
        return {"smallest": int(info["smallest_budget"]),
                "checkpoint_all_peak": int(info["checkpoint_all_peak"]),
                "total_cost": float(info["total_cost"])}
    except (ValueError, KeyError) as e:
        raise RematInputError(f"remat inspect {graph}: unexpected output ({e})") from None


@dataclass
class SolveResult:
    status: str
    cost: Optional[float]
    peak: Optional[int]
    gap: str
    seconds: float
    recomputes: Optional[int]
    plan: str = ""


def solve_exact(graph: str, budget: int, plan: str, time_limit: float,
                strategy: str = "remat-exact") -> SolveResult:
    """``remat solve -s remat-exact`` at ``budget`` bytes; status, cost, peak and gap."""
    t0 = time.perf_counter()
    proc = binary.run(["solve", graph, "-b", str(budget), "-s", strategy,
                       "--time-limit", str(time_limit), "--plan", plan], check=False)
    dt = time.perf_counter() - t0
    out = proc.stdout
    status = _field(out, "status") or "error"
    if proc.returncode != 0 and status == "error":
        msg = (proc.stderr.strip() or out.strip()).splitlines()
        raise RematInputError(f"remat solve {graph} -b {budget}: {msg[-1] if msg else 'failed'}")
    m_gap = re.search(r"gap ([0-9.]+)%", _field(out, "lower bound"))
    gap = m_gap.group(1) if m_gap else ""
    cost = peak = recs = None
    if os.path.exists(plan) and status in ("optimal", "feasible"):
        with open(plan) as f:
            data = json.load(f)
        cost, peak = float(data["cost"]), int(data["peak_memory"])
        comps = [s["node"] for s in data["statements"] if s["op"] == "compute"]
        recs = len(comps) - len(set(comps))
    return SolveResult(status.split()[0], cost, peak, gap, dt, recs, plan)


# --------------------------------------------------------------------------- the comparison


def _fmt(x: Any) -> str:
    if x is None:
        return ""
    if isinstance(x, float):
        return f"{x:.10g}"
    return str(x)


def below_budgets(floor: int, torch_min_peak: int, points: int) -> List[int]:
    """``points`` budgets from ``floor`` up to (not including) PyTorch's smallest peak,
    evenly spaced."""
    if points <= 0 or torch_min_peak <= floor:
        return []
    step = (torch_min_peak - floor) / points
    out = sorted({floor + int(step * i) for i in range(points)})
    return [b for b in out if b < torch_min_peak]


def find_floor(graph: str, smallest: int, feasible: int, workdir: str,
               time_limit: float = 5.0, steps: int = 10) -> int:
    """The smallest budget at which ``remat-fast`` finds a plan, by bisection between
    ``remat inspect``'s smallest budget (a bound: often nothing fits there) and a budget
    known to be feasible. remat-fast answers within seconds on these graphs, and an
    infeasible budget is refused by the cover program in a fraction of a second."""
    plan = os.path.join(workdir, "floor.json")

    def ok(b: int) -> bool:
        return solve_exact(graph, b, plan, time_limit, "remat-fast").cost is not None

    if ok(smallest):
        return smallest
    lo, hi = smallest, feasible  # lo fails, hi fits
    for _ in range(steps):
        if hi - lo <= max(1, (feasible - smallest) // 1000):
            break
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return hi


def compare(cap: Capture, graph: str, out_csv: str, workdir: str,
            fractions: Sequence[float] = DEFAULT_FRACTIONS, time_limit: float = 60.0,
            below_points: int = 4, strategy: str = "remat-exact",
            log=print, verify_spec: Optional[str] = None) -> List[Dict[str, str]]:
    """Run the comparison on an exported graph file; write the CSV row by row.

    With ``verify_spec`` (the factory, ``MODULE.py:FACTORY``), every plan (PyTorch's and
    remat's) is also run by the executor (``verify``: gradients equal to the no-remat run,
    buffers updated once, measured peak = simulated peak); the ``verified`` column says
    ``ok`` or ``FAIL`` for each."""
    data = _read_graph(graph)
    model = str(data["name"])
    fixed = int(data.get("fixed_memory", 0))
    costs = {str(n["name"]): float(n["cost"]) for n in data["nodes"]}
    mem = {str(n["name"]): int(n["memory"]) for n in data["nodes"]}
    info = inspect(graph)
    total = info["total_cost"]
    os.makedirs(workdir, exist_ok=True)
    rows: List[Dict[str, str]] = []
    tmp = out_csv + ".tmp"
    f = open(tmp, "w", newline="")
    w = csv.DictWriter(f, fieldnames=CSV_FIELDS)
    w.writeheader()
    f.flush()

    def emit(row: Dict[str, Any]) -> None:
        r = {k: _fmt(row.get(k)) for k in CSV_FIELDS}
        w.writerow(r)
        f.flush()
        rows.append(r)

    solved: Dict[int, SolveResult] = {}  # budget -> remat's answer (partitions often repeat)
    checked: Dict[str, str] = {}

    def check(path: str) -> str:
        if not verify_spec or not path or not os.path.exists(path):
            return ""
        if path not in checked:
            from .verify import verify

            rep = verify(verify_spec, path, graph_path=graph)
            checked[path] = "ok" if rep.ok else "FAIL"
            if not rep.ok:
                log("\n".join(rep.lines))
        return checked[path]

    def remat_at(budget: int, tag: str) -> SolveResult:
        if budget not in solved:
            path = os.path.join(workdir, f"remat-{tag}.json")
            res = solve_exact(graph, budget, path, time_limit, strategy)
            if res.cost is None and res.status != "infeasible" and strategy != "remat-fast":
                # no plan of its own within the time limit: say so, and show remat-fast's
                fast = solve_exact(graph, budget, path, time_limit, "remat-fast")
                if fast.cost is not None:
                    fast.status = f"{res.status}; remat-fast {fast.status}"
                    fast.seconds += res.seconds
                    res = fast
            solved[budget] = res
        return solved[budget]

    try:
        torch_peaks: List[int] = []
        for frac in fractions:
            fw, bw, calls = partition(cap, frac, costs)
            pp = partition_statements(cap, fw, bw)
            path = os.path.join(workdir, f"pytorch-{frac:.2f}.json")
            strat = f"pytorch-min-cut@{frac:g}"
            write_plan(path, model, fixed, strat, pp.statements)
            t_cost, t_peak = simulate(graph, path)
            write_plan(path, model, fixed, strat, pp.statements, t_cost, t_peak)
            torch_peaks.append(t_peak)
            res = remat_at(t_peak, f"{t_peak}")
            ratio = res.cost / t_cost if res.cost is not None and t_cost > 0 else None
            emit({"series": "pytorch", "torch_budget": frac, "budget_bytes": t_peak,
                  "torch_peak": t_peak, "torch_cost": t_cost, "torch_overhead": t_cost / total,
                  "torch_recomputes": len(pp.recomputed),
                  "torch_saved_bytes": sum(mem[x] for x in pp.saved), "remat_cost": res.cost,
                  "remat_peak": res.peak,
                  "remat_overhead": res.cost / total if res.cost is not None else None,
                  "remat_recomputes": res.recomputes, "ratio": ratio,
                  "remat_status": res.status, "remat_gap": res.gap,
                  "remat_time_s": round(res.seconds, 2),
                  "verified": _both(check(path), check(res.plan if res.cost is not None else ""))})
            log(f"budget {frac:g}: PyTorch peak {t_peak} cost {t_cost:.6g} "
                f"({len(pp.recomputed)} recomputes); remat-exact {res.status} cost "
                f"{_fmt(res.cost)} ratio {_fmt(ratio)} gap {res.gap}% ({res.seconds:.1f} s)")
        lowest = int(min(torch_peaks) if torch_peaks else info["checkpoint_all_peak"])
        floor = lowest
        if below_points > 0:
            floor = find_floor(graph, int(info["smallest"]), lowest, workdir)
            log(f"smallest budget remat-fast fits (bisection): {floor} bytes "
                f"(remat inspect's bound: {int(info['smallest'])})")
        for b in below_budgets(floor, lowest, below_points):
            res = remat_at(b, f"below-{b}")
            emit({"series": "remat-below", "budget_bytes": b, "remat_cost": res.cost,
                  "remat_peak": res.peak,
                  "remat_overhead": res.cost / total if res.cost is not None else None,
                  "remat_recomputes": res.recomputes, "remat_status": res.status,
                  "remat_gap": res.gap, "remat_time_s": round(res.seconds, 2),
                  "verified": _both("", check(res.plan if res.cost is not None else ""))})
            log(f"below PyTorch: budget {b}: remat-exact {res.status} cost {_fmt(res.cost)} "
                f"peak {_fmt(res.peak)} ({res.seconds:.1f} s)")
    finally:
        f.close()
        os.replace(tmp, out_csv)
    return rows


def _both(torch_v: str, remat_v: str) -> str:
    return f"{torch_v or '-'}/{remat_v or '-'}" if (torch_v or remat_v) else ""


def _read_graph(path: str) -> Dict[str, Any]:
    from .graphfile import read_graph

    return read_graph(path)


# --------------------------------------------------------------------------- plot


def plot(rows: List[Dict[str, str]], out_png: str, title: str, total_cost: float,
         smallest: Optional[int] = None, checkpoint_all_peak: Optional[int] = None) -> bool:
    """Cost (as a multiple of every-node-once) against peak memory, both curves.
    Returns False (and draws nothing) when matplotlib is not installed."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    mb = 1e6
    tp = [(int(r["torch_peak"]), float(r["torch_cost"]) / total_cost)
          for r in rows if r["series"] == "pytorch"]
    rp = sorted({(int(r["remat_peak"]), float(r["remat_cost"]) / total_cost)
                 for r in rows if r["remat_cost"]})
    fig, ax = plt.subplots(figsize=(7, 4.5))
    if rp:
        ax.plot([p / mb for p, _ in rp], [c for _, c in rp], "o-", color="tab:blue",
                label="remat-exact (budget = PyTorch's peak, and below)", zorder=3)
    if tp:
        ax.scatter([p / mb for p, _ in tp], [c for _, c in tp], marker="x", s=60,
                   color="tab:red", label="PyTorch min-cut, activation_memory_budget", zorder=4)
        seen = set()
        for p, c in tp:
            if (p, c) in seen:
                continue
            seen.add((p, c))
            lab = ",".join(r["torch_budget"] for r in rows
                           if r["series"] == "pytorch" and int(r["torch_peak"]) == p
                           and float(r["torch_cost"]) / total_cost == c)
            ax.annotate(lab, (p / mb, c), textcoords="offset points", xytext=(4, 6),
                        fontsize=7, color="tab:red")
    if smallest is not None:
        ax.axvline(smallest / mb, color="grey", ls=":", lw=1,
                   label="smallest budget (remat inspect's bound)")
    if checkpoint_all_peak is not None:
        ax.axvline(checkpoint_all_peak / mb, color="grey", ls="--", lw=1,
                   label="checkpoint-all peak")
    ax.set_xlabel("peak memory (MB, including fixed memory)")
    ax.set_ylabel("cost / every-node-once cost")
    ax.set_title(title, fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out_png, dpi=120)
    plt.close(fig)
    return True


# --------------------------------------------------------------------------- command line


def parse_fractions(text: str) -> List[float]:
    try:
        out = [float(x) for x in text.split(",") if x.strip()]
    except ValueError as e:
        raise RematInputError(f"--fractions {text!r}: not a comma-separated list of numbers") from e
    bad = [x for x in out if not 0.0 <= x <= 1.0]
    if not out or bad:
        raise RematInputError(f"--fractions {text!r}: each must be in [0, 1]")
    return out


def run_compare(a) -> int:
    """``python -m remat_torch compare-pytorch`` (arguments: see ``__main__``)."""
    import torch

    from .capture import capture
    from .costs import DEVICES
    from .executor import graph_name
    from .factory import call_factory
    from .graphfile import export

    fractions = parse_fractions(a.fractions)
    base = a.name or a.factory.rpartition(":")[2]
    stem = os.path.join(a.out_dir, f"pytorch_compare_{base}")
    if a.plot_only:  # redraw from the CSV and graph file a previous run wrote
        if not (os.path.exists(stem + ".csv") and os.path.exists(stem + ".yaml")):
            raise RematInputError(f"{stem}.csv/.yaml: not found: run without --plot-only first")
        with open(stem + ".csv", newline="") as f:
            rows = list(csv.DictReader(f))
        return _finish(a, base, stem, rows)
    if a.device not in DEVICES:
        raise RematInputError(f"unknown --device '{a.device}' ({', '.join(DEVICES)})")
    if a.batch < 1:  # as export: --batch 0 captured, and overwrote the graph file first
        raise RematInputError(f"--batch must be at least 1 (got {a.batch})")
    binary.find_remat()  # fail early, before capturing
    model, batch, loss_fn = call_factory(a.factory, a.batch)
    if torch.cuda.is_available() and not a.cpu:
        model = model.cuda()
        batch = tuple(t.cuda() for t in batch)
    cap = capture(model, batch, loss_fn)
    os.makedirs(a.out_dir, exist_ok=True)
    graph = stem + ".yaml"
    text = export(cap, batch, graph_name(base, a.batch, cap.fingerprint), a.batch, cost=a.cost,
                  device=a.device, factory=a.factory)
    write_text(graph, text)
    if _estimator_class() is None:
        print(f"warning: torch {torch.__version__} has no CustomRuntimeEstimator: PyTorch's "
              "knapsack uses its own FLOP estimate, not the graph file's costs")
    print(f"{graph}: {len(cap.nodes)} nodes ({a.cost} costs); PyTorch's partitioner at "
          f"activation_memory_budget {', '.join(f'{x:g}' for x in fractions)}; "
          f"{a.strategy} with --time-limit {a.time_limit:g}")
    with PlanDir(a.plans) as workdir:
        rows = compare(cap, graph, stem + ".csv", workdir, fractions, a.time_limit, a.below,
                       a.strategy, verify_spec=a.factory if a.verify else None)
    print(f"{stem}.csv: {len(rows)} rows")
    return _finish(a, base, stem, rows)


def _finish(a, base: str, stem: str, rows: List[Dict[str, str]]) -> int:
    info = inspect(stem + ".yaml")
    g = _read_graph(stem + ".yaml")
    if not a.no_plot:
        cost = (g.get("meta") or {}).get("cost", a.cost)
        title = (f"{base} (batch {g.get('batch_size', a.batch)}): PyTorch min-cut partitioner "
                 f"vs {a.strategy}, {cost} costs")
        if plot(rows, stem + ".png", title, info["total_cost"], int(info["smallest"]),
                int(info["checkpoint_all_peak"])):
            print(f"{stem}.png: cost against peak")
        else:
            print("matplotlib is not installed: no plot (pip install matplotlib)")
    print(markdown_table(rows))
    summary(rows, int(info["smallest"]), print)
    return 0


class PlanDir:
    """A directory for plans: the given one (kept), or a temporary one (removed)."""

    def __init__(self, path: Optional[str]):
        self.path = path
        self._tmp = None

    def __enter__(self) -> str:
        if self.path:
            os.makedirs(self.path, exist_ok=True)
            return self.path
        import tempfile

        self._tmp = tempfile.TemporaryDirectory(prefix="remat-compare-")
        return self._tmp.name

    def __exit__(self, *exc) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()


def markdown_table(rows: List[Dict[str, str]]) -> str:
    """The rows as the Markdown table of docs/compare-pytorch.md (bytes in kB = 10^3)."""

    def kb(x: str) -> str:
        return f"{int(x) / 1e3:,.1f}" if x else ""

    def num(x: str, fmt: str) -> str:
        return format(float(x), fmt) if x else ""

    ver = any(r.get("verified") for r in rows)
    out = ["| series | PyTorch budget | PyTorch saved (kB) | budget (kB) | PyTorch peak (kB) "
           "| PyTorch cost (× once) | remat cost (× once) | remat peak (kB) | remat / PyTorch "
           "| remat status (gap) |" + (" verified (PyTorch/remat) |" if ver else ""),
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|" + ("---|" if ver else "")]
    for r in rows:
        gap = f" ({r['remat_gap']}%)" if r["remat_gap"] else ""
        out.append(f"| {r['series']} | {r['torch_budget']} | "
                   f"{kb(r.get('torch_saved_bytes', ''))} | {kb(r['budget_bytes'])} | "
                   f"{kb(r['torch_peak'])} | {num(r['torch_overhead'], '.4f')} | "
                   f"{num(r['remat_overhead'], '.4f')} | {kb(r['remat_peak'])} | "
                   f"{num(r['ratio'], '.4f')} | {r['remat_status']}{gap} |"
                   + (f" {r.get('verified', '')} |" if ver else ""))
    return "\n".join(out)


def summary(rows: List[Dict[str, str]], smallest: int, log=print) -> None:
    """The issue's two targets, stated from the rows."""
    pts = [r for r in rows if r["series"] == "pytorch"]
    worse = [r for r in pts if r["ratio"] and float(r["ratio"]) > 1 + 1e-9]
    if pts:
        ratios = [float(r["ratio"]) for r in pts if r["ratio"]]
        log(f"remat cost / PyTorch cost at PyTorch's peaks: min {min(ratios):.4f}, "
            f"max {max(ratios):.4f}; remat costlier at {len(worse)} of {len(pts)} points")
        lowest = min(int(r["torch_peak"]) for r in pts)
        below = [r for r in rows if r["series"] == "remat-below" and r["remat_cost"]]
        reach = min([int(r["remat_peak"]) for r in below] + [lowest])
        log(f"smallest peak: PyTorch {lowest} bytes, remat {reach} bytes "
            f"(smallest feasible budget {smallest})")
