//! Synthetic graph families for tests and benchmarks. All are seeded and
//! use a portable RNG (ChaCha8), so a seed names the same graph everywhere.

use crate::graph::{Graph, GraphFile, GraphKind, NodeSpec};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

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

/// Parameters of a random layered DAG (in the style of the Neural
/// Topological Ordering generator used by MOCCASIN's benchmarks).
#[derive(Debug, Clone)]
pub struct RandomDag {
    pub nodes: usize,
    /// Nodes per layer, at most.
    pub width: usize,
    /// Probability of an extra edge from each node in the two layers before.
    pub skip_prob: f64,
    pub cost: (u32, u32),
    pub memory: (u64, u64),
    pub seed: u64,
}

impl Default for RandomDag {
    fn default() -> Self {
        RandomDag {
            nodes: 20,
            width: 3,
            skip_prob: 0.2,
            cost: (1, 10),
            memory: (1, 10),
            seed: 0,
        }
    }
}

/// A plain DAG (`graph: training`, no gradient nodes): every node after the
/// first layer reads one random node of the previous layer, plus skip
/// edges. One source, so the graph is connected.
pub fn random_layered_file(p: &RandomDag) -> GraphFile {
    let mut rng = ChaCha8Rng::seed_from_u64(p.seed);
    let mut layers: Vec<Vec<usize>> = vec![vec![0]];
    let mut count = 1;
    while count < p.nodes {
        let w = rng.random_range(1..=p.width.max(1)).min(p.nodes - count);
        layers.push((count..count + w).collect());
        count += w;
    }
    let mut nodes = Vec::with_capacity(p.nodes);
    for (li, layer) in layers.iter().enumerate() {
        for &v in layer {
            let mut deps: Vec<usize> = Vec::new();
            if li > 0 {
                let prev = &layers[li - 1];
                deps.push(prev[rng.random_range(0..prev.len())]);
                let lo = li.saturating_sub(3);
                for earlier in &layers[lo..li] {
                    for &u in earlier {
                        if !deps.contains(&u) && rng.random_bool(p.skip_prob) {
                            deps.push(u);
                        }
                    }
                }
                deps.sort_unstable();
            }
            let cost = rng.random_range(p.cost.0..=p.cost.1) as f64;
            let mem = rng.random_range(p.memory.0..=p.memory.1);
            nodes.push(NodeSpec::new(
                format!("v{v}"),
                cost,
                mem,
                deps.iter().map(|d| format!("v{d}")).collect(),
            ));
        }
    }
    GraphFile {
        name: format!("random-n{}-s{}", p.nodes, p.seed),
        graph: GraphKind::Training,
        batch_size: 1,
        cost_unit: Some("unit".into()),
        fixed_memory: 0.0,
        nodes,
    }
}

pub fn random_layered(p: &RandomDag) -> Graph {
    Graph::from_file(&random_layered_file(p), "<random>").expect("random DAGs are valid")
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
