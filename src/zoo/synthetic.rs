//! Synthetic graph families for tests and benchmarks. All are seeded and
//! use a portable RNG (ChaCha8), so a seed names the same graph everywhere.

use crate::graph::{Graph, GraphFile, GraphKind, NodeSpec};
use rand::{Rng, RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::fmt;

/// Checkmate's `gen_linear_graph(n)`: n forward layers, a loss, and n
/// gradients, every node of unit cost and unit memory; edges i→i+1 along
/// the chain and i→2n−i from each layer to its gradient. 2n+1 nodes.
pub fn linear_file(n: usize) -> GraphFile {
    let mut nodes = Vec::with_capacity(2 * n + 1);
    for i in 0..n {
        let deps = if i == 0 {
            vec![]
        } else {
            vec![format!("f{}", i - 1)]
        };
        nodes.push(NodeSpec {
            saves: Some(vec!["self".into()]),
            grad_cost: Some(1.0),
            ..NodeSpec::new(format!("f{i}"), 1.0, 1, deps)
        });
    }
    let last = if n == 0 {
        vec![]
    } else {
        vec![format!("f{}", n - 1)]
    };
    nodes.push(NodeSpec::new("loss", 1.0, 1, last));
    GraphFile {
        meta: Default::default(),
        name: format!("linear{n}"),
        graph: GraphKind::Forward,
        batch_size: 1,
        cost_unit: Some("unit".into()),
        fixed_memory: 0.0,
        nodes,
    }
}

pub fn linear(n: usize) -> Graph {
    Graph::from_file(&linear_file(n), "<linear>").expect("the linear family is valid")
}

/// A distribution of whole numbers for node costs or sizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dist {
    Const(u64),
    /// Uniform on `lo..=hi`.
    Uniform(u64, u64),
    /// `exp` of a uniform on `ln lo..ln hi`, rounded: spreads values over
    /// orders of magnitude, as activation sizes in real networks are.
    LogUniform(u64, u64),
}

impl Dist {
    /// Accepts `7`, `1..10` (uniform, inclusive) and `log:10..100000`.
    pub fn parse(s: &str) -> Result<Dist, String> {
        let s = s.trim();
        let err = || format!("invalid distribution '{s}': use N, LO..HI or log:LO..HI");
        let num = |t: &str| t.trim().parse::<u64>().map_err(|_| err());
        let (log, body) = match s.strip_prefix("log:") {
            Some(b) => (true, b),
            None => (false, s),
        };
        let d = match body.split_once("..") {
            None if !log => Dist::Const(num(body)?),
            None => return Err(err()),
            Some((a, b)) => {
                let (lo, hi) = (num(a)?, num(b.trim_start_matches('='))?);
                if lo > hi {
                    return Err(format!("invalid distribution '{s}': {lo} > {hi}"));
                }
                if log && lo == 0 {
                    return Err(format!(
                        "invalid distribution '{s}': a log-uniform range must start above 0"
                    ));
                }
                if log {
                    Dist::LogUniform(lo, hi)
                } else {
                    Dist::Uniform(lo, hi)
                }
            }
        };
        Ok(d)
    }

    pub fn sample<R: Rng>(&self, rng: &mut R) -> u64 {
        match *self {
            Dist::Const(v) => v,
            Dist::Uniform(lo, hi) => rng.random_range(lo..=hi),
            Dist::LogUniform(lo, hi) => {
                let (a, b) = ((lo as f64).ln(), (hi as f64).ln());
                let v = if a < b { rng.random_range(a..=b) } else { a };
                (v.exp().round() as u64).clamp(lo, hi)
            }
        }
    }

    /// Like [`Dist::sample`], but a uniform draw that fits in 32 bits uses
    /// 32-bit sampling: costs were drawn that way by the first version of
    /// this generator, and seeds must keep naming the same graphs.
    fn sample_narrow<R: Rng>(&self, rng: &mut R) -> u64 {
        match *self {
            Dist::Uniform(lo, hi) if hi <= u32::MAX as u64 => {
                rng.random_range(lo as u32..=hi as u32) as u64
            }
            _ => self.sample(rng),
        }
    }
}

impl fmt::Display for Dist {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Dist::Const(v) => write!(f, "{v}"),
            Dist::Uniform(lo, hi) => write!(f, "{lo}..{hi}"),
            Dist::LogUniform(lo, hi) => write!(f, "log:{lo}..{hi}"),
        }
    }
}

/// Parameters of a random layered DAG (in the style of the Neural
/// Topological Ordering generator used by MOCCASIN's benchmarks): a single
/// source, then layers of random width; each node reads one random node
/// of the layer before (so every layer hangs together) plus, with
/// probability `skip_prob` each, any node of the `skip_span` layers before.
#[derive(Debug, Clone)]
pub struct RandomDag {
    /// Total node count (exact; a `forward` graph adds a loss node).
    pub nodes: usize,
    /// Nodes per layer, at most.
    pub width: usize,
    /// Number of layers including the source layer; `None` draws each
    /// layer's width in `1..=width` until `nodes` are placed.
    pub depth: Option<usize>,
    /// Probability of each extra edge from the layers within `skip_span`.
    pub skip_prob: f64,
    /// How many layers back an edge may reach (1 = previous layer only).
    pub skip_span: usize,
    pub cost: Dist,
    /// Output bytes per node.
    pub memory: Dist,
    pub seed: u64,
    /// Emit `graph: forward` with a `loss` node reading every sink, so the
    /// tool generates a backward pass; otherwise a plain DAG.
    pub forward: bool,
}

impl Default for RandomDag {
    fn default() -> Self {
        RandomDag {
            nodes: 20,
            width: 3,
            depth: None,
            skip_prob: 0.2,
            skip_span: 3,
            cost: Dist::Uniform(1, 10),
            memory: Dist::Uniform(1, 10),
            seed: 0,
            forward: false,
        }
    }
}

impl RandomDag {
    /// Why these parameters cannot make a graph, if they cannot.
    pub fn check(&self) -> Result<(), String> {
        if self.nodes == 0 {
            return Err("a random DAG needs at least one node".into());
        }
        if self.width == 0 {
            return Err("the width must be at least 1".into());
        }
        if !(0.0..=1.0).contains(&self.skip_prob) {
            return Err(format!(
                "the skip probability must be in [0, 1], got {}",
                self.skip_prob
            ));
        }
        if self.skip_span == 0 {
            return Err("the skip span must be at least 1 layer".into());
        }
        if self.depth == Some(0) {
            return Err("the depth must be at least 1 (the source's layer)".into());
        }
        if let Some(d) = self.depth {
            let rest = self.nodes - 1;
            if (d == 1 && rest > 0)
                || (d > 1 && (rest < d - 1 || rest > (d - 1).saturating_mul(self.width)))
            {
                // The depth counts the source's layer: "2 layers after a
                // source" said room for 7 nodes where there was room for 4.
                return Err(format!(
                    "{} nodes do not fit a depth of {d}: a single source, then {} of width 1..={} ({}..={} nodes in all)",
                    self.nodes,
                    crate::cli::plural(d.saturating_sub(1), "layer", "layers"),
                    self.width,
                    d,
                    1 + d.saturating_sub(1).saturating_mul(self.width)
                ));
            }
        }
        // Each node draws a skip edge from every node of the `skip_span`
        // layers before it: all-to-all spans on 200,000 nodes drew 4×10¹⁰
        // times and ran out of memory on their edges after minutes.
        let candidates = (self.nodes as f64)
            * (self.skip_span as f64 * self.width as f64).min(self.nodes as f64);
        let edges = candidates * self.skip_prob;
        if candidates > MAX_SKIP_CANDIDATES || edges > MAX_SYNTHETIC_EDGES {
            return Err(format!(
                "{} nodes with skips over {} layers of width up to {} at probability {} make up to {candidates:.1e} candidate edges ({edges:.1e} expected), more than the zoo generates ({MAX_SKIP_CANDIDATES:.0e} candidates, {MAX_SYNTHETIC_EDGES:.0e} edges); lower --skip-span or --skip-prob",
                self.nodes, self.skip_span, self.width, self.skip_prob
            ));
        }
        Ok(())
    }

    /// The layer sizes, source layer first.
    fn layer_sizes(&self, rng: &mut ChaCha8Rng) -> Vec<usize> {
        let mut sizes = vec![1];
        match self.depth {
            None => {
                let mut count = 1;
                while count < self.nodes {
                    let w = rng.random_range(1..=self.width).min(self.nodes - count);
                    sizes.push(w);
                    count += w;
                }
            }
            Some(d) if d > 1 => {
                // One node per layer, then the rest one at a time into
                // random layers that still have room.
                let mut rest = vec![1usize; d - 1];
                for _ in 0..(self.nodes - d) {
                    let open: Vec<usize> =
                        (0..rest.len()).filter(|&i| rest[i] < self.width).collect();
                    let pick = open[rng.random_range(0..open.len())];
                    rest[pick] += 1;
                }
                sizes.extend(rest);
            }
            Some(_) => {}
        }
        sizes
    }
}

/// The graph file for these parameters. Panics if `p.check()` fails;
/// callers taking user input check first.
pub fn random_layered_file(p: &RandomDag) -> GraphFile {
    if let Err(e) = p.check() {
        panic!("invalid RandomDag: {e}");
    }
    let mut rng = ChaCha8Rng::seed_from_u64(p.seed);
    let mut layers: Vec<Vec<usize>> = Vec::new();
    let mut next = 0;
    for w in p.layer_sizes(&mut rng) {
        layers.push((next..next + w).collect());
        next += w;
    }
    let mut nodes = Vec::with_capacity(p.nodes + 1);
    let mut used = vec![false; p.nodes];
    for (li, layer) in layers.iter().enumerate() {
        for &v in layer {
            let mut deps: Vec<usize> = Vec::new();
            if li > 0 {
                let prev = &layers[li - 1];
                deps.push(prev[rng.random_range(0..prev.len())]);
                let lo = li.saturating_sub(p.skip_span);
                for earlier in &layers[lo..li] {
                    for &u in earlier {
                        if !deps.contains(&u) && rng.random_bool(p.skip_prob) {
                            deps.push(u);
                        }
                    }
                }
                deps.sort_unstable();
            }
            for &d in &deps {
                used[d] = true;
            }
            let cost = p.cost.sample_narrow(&mut rng) as f64;
            let mem = p.memory.sample(&mut rng);
            nodes.push(NodeSpec::new(
                format!("v{v}"),
                cost,
                mem,
                deps.iter().map(|d| format!("v{d}")).collect(),
            ));
        }
    }
    let graph = if p.forward {
        let sinks = (0..p.nodes)
            .filter(|&v| !used[v])
            .map(|v| format!("v{v}"))
            .collect();
        let cost = p.cost.sample_narrow(&mut rng) as f64;
        let mem = p.memory.sample(&mut rng);
        nodes.push(NodeSpec::new("loss", cost, mem, sinks));
        GraphKind::Forward
    } else {
        GraphKind::Training
    };
    GraphFile {
        meta: Default::default(),
        name: format!("random-n{}-s{}", p.nodes, p.seed),
        graph,
        batch_size: 1,
        cost_unit: Some("unit".into()),
        fixed_memory: 0.0,
        nodes,
    }
}

pub fn random_layered(p: &RandomDag) -> Graph {
    Graph::from_file(&random_layered_file(p), "<random>").expect("random DAGs are valid")
}

/// The most forward nodes a synthetic family generates (`random --nodes`
/// stops at the same 10^7).
pub const MAX_SYNTHETIC_NODES: usize = 10_000_000;

/// The most (node, earlier node) pairs a random DAG draws a skip edge for.
const MAX_SKIP_CANDIDATES: f64 = 1e9;

/// The most edges a random DAG is expected to have.
const MAX_SYNTHETIC_EDGES: f64 = 5e7;

/// A chain of residual blocks: a stem, then `blocks` times a branch of
/// `branch` layers whose output is added to the block's input, then a
/// loss. Every layer has the same cost and size, so the structure alone
/// decides what is worth keeping. Branch layers save their input (like a
/// convolution); the adds save nothing.
#[derive(Debug, Clone)]
pub struct ResidualChain {
    pub blocks: usize,
    /// Layers per residual branch (ResNet's bottleneck has 3 convs).
    pub branch: usize,
    pub cost: u64,
    pub memory: u64,
}

impl Default for ResidualChain {
    fn default() -> Self {
        ResidualChain {
            blocks: 8,
            branch: 2,
            cost: 1,
            memory: 1,
        }
    }
}

impl ResidualChain {
    pub fn check(&self) -> Result<(), String> {
        if self.branch == 0 {
            return Err("a residual branch needs at least one layer".into());
        }
        // As `random --nodes`: `--branch 100000000` was killed for memory.
        let nodes = self
            .branch
            .checked_add(1)
            .and_then(|b| b.checked_mul(self.blocks))
            .and_then(|n| n.checked_add(2));
        if nodes.is_none_or(|n| n > MAX_SYNTHETIC_NODES) {
            return Err(format!(
                "{} blocks of {} layers make more than {MAX_SYNTHETIC_NODES} forward nodes, the most the zoo generates",
                self.blocks, self.branch
            ));
        }
        Ok(())
    }
}

/// `graph: forward`: 2 + blocks × (branch + 1) forward nodes. Panics if
/// `p.check()` fails.
pub fn residual_file(p: &ResidualChain) -> GraphFile {
    if let Err(e) = p.check() {
        panic!("invalid ResidualChain: {e}");
    }
    let (cost, mem) = (p.cost as f64, p.memory);
    let layer = |name: String, dep: &str| NodeSpec {
        op: Some("layer".into()),
        saves: Some(vec![dep.to_string()]),
        ..NodeSpec::new(name, cost, mem, vec![dep.to_string()])
    };
    let mut nodes = vec![NodeSpec {
        op: Some("layer".into()),
        saves: Some(vec![]),
        ..NodeSpec::new("stem", cost, mem, vec![])
    }];
    let mut x = "stem".to_string();
    for b in 1..=p.blocks {
        let mut y = x.clone();
        for l in 1..=p.branch {
            let name = format!("b{b}_f{l}");
            nodes.push(layer(name.clone(), &y));
            y = name;
        }
        let add = format!("b{b}_add");
        nodes.push(NodeSpec {
            op: Some("add".into()),
            saves: Some(vec![]),
            ..NodeSpec::new(add.clone(), cost, mem, vec![x.clone(), y])
        });
        x = add;
    }
    nodes.push(NodeSpec {
        op: Some("loss".into()),
        ..NodeSpec::new("loss", cost, mem, vec![x])
    });
    GraphFile {
        meta: Default::default(),
        name: format!("residual{}x{}", p.blocks, p.branch),
        graph: GraphKind::Forward,
        batch_size: 1,
        cost_unit: Some("unit".into()),
        fixed_memory: 0.0,
        nodes,
    }
}

pub fn residual(p: &ResidualChain) -> Graph {
    Graph::from_file(&residual_file(p), "<residual>").expect("residual chains are valid")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linear_matches_checkmate() {
        let g = linear(8);
        assert_eq!(g.len(), 17);
        assert_eq!(g.num_edges(), 24);
        assert_eq!(g.total_cost(), 17.0);
    }

    #[test]
    fn random_is_seeded_and_sized() {
        let p = RandomDag {
            nodes: 30,
            seed: 7,
            ..RandomDag::default()
        };
        let a = random_layered_file(&p);
        assert_eq!(a, random_layered_file(&p));
        assert_eq!(random_layered(&p).len(), 30);
    }
}
