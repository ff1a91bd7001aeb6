//! Operator-level graphs: every layer expanded into the kernels a training
//! framework actually runs (matmul, bias, norm statistics, norm apply,
//! activation, dropout mask, dropout, residual add, softmax), written as
//! `graph: forward` files whose `saves` are exactly what autograd keeps for
//! each kernel. The tool then generates the backward pass from those saves,
//! so the training graph has the shape of an imported joint graph without
//! depending on the PyTorch importer (issue #19, item 3).
//!
//! Why separate nodes for what a fused layer hides: the norm statistics
//! (mean, reciprocal std) and the dropout masks are small values that the
//! backward reads instead of the large activations around them. A
//! rematerialization plan can keep them and drop the big tensors; on a
//! layer-level graph that choice does not exist. Statistics and masks take
//! no gradient (`requires_grad: false`): the fused norm backward produces
//! the input's gradient directly, and a mask is random data.
//!
//! Generation is linear in the node count: each node is emitted once with
//! a constant number of names and dependencies.

use crate::graph::{Graph, GraphFile, GraphKind, NodeSpec};

/// fp32 bytes per element.
const F32: u64 = 4;

/// Emits forward nodes in order.
struct Builder {
    nodes: Vec<NodeSpec>,
}

/// One operator's description: what it computes, what its backward reads
/// and produces.
struct Op<'a> {
    name: String,
    op: &'a str,
    deps: Vec<String>,
    cost: f64,
    memory: u64,
    saves: Vec<&'a str>,
    grad_cost: f64,
    grad_memory: u64,
    requires_grad: bool,
}

impl Builder {
    fn push(&mut self, o: Op<'_>) -> String {
        let saves = o
            .saves
            .iter()
            .map(|s| {
                if *s == "self" {
                    "self".to_string()
                } else {
                    // An index into deps written as "0", "1", ...: the saved
                    // inputs are always among the operator's inputs.
                    o.deps[s.parse::<usize>().expect("save index")].clone()
                }
            })
            .collect();
        let name = o.name.clone();
        self.nodes.push(NodeSpec {
            op: Some(o.op.to_string()),
            saves: Some(saves),
            grad_cost: o.requires_grad.then_some(o.grad_cost),
            grad_memory: o.requires_grad.then_some(o.grad_memory as f64),
            requires_grad: o.requires_grad,
            ..NodeSpec::new(o.name, o.cost, o.memory, o.deps)
        });
        name
    }

    /// An elementwise kernel over `elems` elements of `bytes` output bytes.
    #[allow(clippy::too_many_arguments)]
    fn elementwise(
        &mut self,
        name: String,
        op: &str,
        deps: Vec<String>,
        elems: u64,
        flops_per_elem: f64,
        saves: Vec<&str>,
        grad_memory: u64,
    ) -> String {
        self.push(Op {
            name,
            op,
            deps,
            cost: flops_per_elem * elems as f64,
            memory: elems * F32,
            saves,
            grad_cost: flops_per_elem * elems as f64,
            grad_memory,
            requires_grad: true,
        })
    }

    /// Norm statistics (mean and reciprocal std per row: two fp32 numbers
    /// per row) and the norm apply that reads them. Returns the output.
    fn norm(&mut self, prefix: &str, x: &str, rows: u64, width: u64) -> String {
        let elems = rows * width;
        let stats = self.push(Op {
            name: format!("{prefix}_stats"),
            op: "norm_stats",
            deps: vec![x.into()],
            cost: 3.0 * elems as f64,
            memory: 2 * rows * F32,
            saves: vec![],
            grad_cost: 0.0,
            grad_memory: 0,
            requires_grad: false,
        });
        // The fused backward reads the input, mean and rstd (as PyTorch's
        // native_layer_norm saves them) and writes the input's gradient.
        self.push(Op {
            name: prefix.into(),
            op: "norm_apply",
            deps: vec![x.into(), stats],
            cost: 4.0 * elems as f64,
            memory: elems * F32,
            saves: vec!["0", "1"],
            grad_cost: 7.0 * elems as f64,
            grad_memory: elems * F32,
            requires_grad: true,
        })
    }

    /// A dense layer as matmul (saves its input for the weight gradient)
    /// and bias add (saves nothing).
    fn dense(&mut self, prefix: &str, x: &str, rows: u64, k: u64, n: u64) -> String {
        let mm = self.push(Op {
            name: format!("{prefix}_mm"),
            op: "matmul",
            deps: vec![x.into()],
            cost: 2.0 * (rows * k * n) as f64,
            memory: rows * n * F32,
            saves: vec!["0"],
            // Input gradient and weight gradient: one matmul each.
            grad_cost: 4.0 * (rows * k * n) as f64,
            grad_memory: rows * k * F32,
            requires_grad: true,
        });
        self.elementwise(
            format!("{prefix}_bias"),
            "bias",
            vec![mm],
            rows * n,
            1.0,
            vec![],
            rows * n * F32,
        )
    }

    /// Dropout as a mask (one byte per element, no gradient) and its
    /// application, whose backward reads only the mask.
    fn dropout(&mut self, prefix: &str, x: &str, elems: u64) -> String {
        let mask = self.push(Op {
            name: format!("{prefix}_mask"),
            op: "dropout_mask",
            deps: vec![],
            cost: elems as f64,
            memory: elems,
            saves: vec![],
            grad_cost: 0.0,
            grad_memory: 0,
            requires_grad: false,
        });
        self.elementwise(
            prefix.into(),
            "dropout",
            vec![x.into(), mask],
            elems,
            1.0,
            vec!["1"],
            elems * F32,
        )
    }

    /// A residual add: saves nothing; one gradient buffer serves both inputs.
    fn add(&mut self, name: String, a: &str, b: &str, elems: u64) -> String {
        self.elementwise(
            name,
            "add",
            vec![a.into(), b.into()],
            elems,
            1.0,
            vec![],
            elems * F32,
        )
    }
}

/// A pre-norm transformer (GPT-2 style) at operator level.
#[derive(Debug, Clone)]
pub struct OpsTransformer {
    pub layers: usize,
    pub batch: u64,
    pub seq_len: u64,
    pub width: u64,
    pub heads: u64,
    pub vocab: u64,
    /// Learned positions: the position table's rows, whatever length the
    /// graph runs at (sized by the length, the parameters changed with
    /// `--seq-len`, and lengths past GPT-2's 1024 were accepted).
    pub positions: u64,
}

impl Default for OpsTransformer {
    /// GPT-2 small's width, heads and vocabulary, at batch 8 and 1024
    /// tokens like the zoo's `gpt2`.
    fn default() -> Self {
        OpsTransformer {
            layers: 12,
            batch: 8,
            seq_len: 1024,
            width: 768,
            heads: 12,
            vocab: 50257,
            positions: 1024,
        }
    }
}

/// Forward operators per transformer layer.
pub const TRANSFORMER_FWD_PER_LAYER: usize = 24;
/// Gradient nodes per transformer layer (all but 2 norm statistics and
/// 3 dropout masks).
pub const TRANSFORMER_GRAD_PER_LAYER: usize = 19;

impl OpsTransformer {
    pub fn check(&self) -> Result<(), String> {
        if self.layers == 0 {
            return Err("a transformer needs at least one layer".into());
        }
        if self.batch == 0 || self.seq_len == 0 {
            return Err("batch and sequence length must be at least 1".into());
        }
        if self.seq_len > self.positions {
            return Err(format!(
                "sequence length {} exceeds the {} learned positions",
                self.seq_len, self.positions
            ));
        }
        if self.heads == 0 || !self.width.is_multiple_of(self.heads) {
            return Err(format!(
                "the width {} must be a multiple of the head count {}",
                self.width, self.heads
            ));
        }
        // `--layers 1000000` (24 million forward nodes) ran out of memory:
        // the same cap as the other synthetic families.
        let max = super::synthetic::MAX_SYNTHETIC_NODES;
        if self.layers > (max - 5) / TRANSFORMER_FWD_PER_LAYER {
            return Err(format!(
                "{} layers make more than {max} forward nodes, the most the zoo generates (at most {} layers)",
                self.layers,
                (max - 5) / TRANSFORMER_FWD_PER_LAYER
            ));
        }
        Ok(())
    }

    /// Closed form: `24 L + 5` forward nodes (embedding, 24 per layer,
    /// final norm statistics and apply, LM head, loss) and `19 L + 3`
    /// gradients (embedding, 19 per layer, final norm, LM head).
    pub fn node_count(&self) -> usize {
        let l = self.layers;
        (TRANSFORMER_FWD_PER_LAYER * l + 5) + (TRANSFORMER_GRAD_PER_LAYER * l + 3)
    }

    /// Closed form of the training graph's edges: `29 L + 5` forward and
    /// `38 L + 6` backward (each gradient reads its users' gradients and
    /// its operator's saves).
    pub fn edge_count(&self) -> usize {
        67 * self.layers + 11
    }

    /// Weights and biases: token and position embeddings, `12 d² + 13 d`
    /// per layer (two norms, qkv, projection, two MLP matmuls, with
    /// biases), the final norm; the LM head is tied to the embedding. At
    /// the defaults this is GPT-2 small's 124,439,808.
    pub fn params(&self) -> u64 {
        let d = self.width;
        self.vocab * d + self.positions * d + self.layers as u64 * (12 * d * d + 13 * d) + 2 * d
    }
}

/// The operator-level transformer's forward file (the tool adds the
/// backward from each operator's `saves`).
pub fn transformer_file(p: &OpsTransformer) -> GraphFile {
    let (b, t, d, h, v) = (p.batch, p.seq_len, p.width, p.heads, p.vocab);
    let rows = b * t;
    let act = rows * d;
    let scores = b * h * t * t;
    let mut g = Builder {
        nodes: Vec::with_capacity(TRANSFORMER_FWD_PER_LAYER * p.layers + 5),
    };
    // Token plus position embedding: a lookup; weight gradients only.
    let mut x = g.push(Op {
        name: "embed".into(),
        op: "embedding",
        deps: vec![],
        cost: act as f64,
        memory: act * F32,
        saves: vec![],
        grad_cost: act as f64,
        grad_memory: 0,
        requires_grad: true,
    });
    for l in 0..p.layers {
        let pre = format!("h{l}");
        let ln1 = g.norm(&format!("{pre}_ln1"), &x, rows, d);
        let qkv = g.dense(&format!("{pre}_qkv"), &ln1, rows, d, 3 * d);
        // Q Kᵀ with the 1/√d scale and causal mask fused: reads q and k
        // (slices of qkv), both need gradients.
        let s = g.push(Op {
            name: format!("{pre}_attn_scores"),
            op: "attn_scores",
            deps: vec![qkv.clone()],
            cost: (2 * scores * (d / h) + 2 * scores) as f64,
            memory: scores * F32,
            saves: vec!["0"],
            grad_cost: (4 * scores * (d / h) + 2 * scores) as f64,
            grad_memory: 2 * act * F32,
            requires_grad: true,
        });
        let sm = g.elementwise(
            format!("{pre}_attn_softmax"),
            "softmax",
            vec![s],
            scores,
            5.0,
            vec!["self"],
            scores * F32,
        );
        let pd = g.dropout(&format!("{pre}_attn_drop"), &sm, scores);
        // P V: reads the dropped probabilities and v (a slice of qkv).
        let ctx = g.push(Op {
            name: format!("{pre}_attn_ctx"),
            op: "attn_context",
            deps: vec![pd, qkv],
            cost: (2 * scores * (d / h)) as f64,
            memory: act * F32,
            saves: vec!["0", "1"],
            grad_cost: (4 * scores * (d / h)) as f64,
            grad_memory: (scores + act) * F32,
            requires_grad: true,
        });
        let proj = g.dense(&format!("{pre}_proj"), &ctx, rows, d, d);
        let pdrop = g.dropout(&format!("{pre}_proj_drop"), &proj, act);
        let r1 = g.add(format!("{pre}_res1"), &x, &pdrop, act);
        let ln2 = g.norm(&format!("{pre}_ln2"), &r1, rows, d);
        let fc1 = g.dense(&format!("{pre}_fc1"), &ln2, rows, d, 4 * d);
        let gelu = g.elementwise(
            format!("{pre}_gelu"),
            "gelu",
            vec![fc1],
            4 * act,
            8.0,
            vec!["0"],
            4 * act * F32,
        );
        let fc2 = g.dense(&format!("{pre}_fc2"), &gelu, rows, 4 * d, d);
        let mdrop = g.dropout(&format!("{pre}_mlp_drop"), &fc2, act);
        x = g.add(format!("{pre}_res2"), &r1, &mdrop, act);
    }
    let lnf = g.norm("ln_f", &x, rows, d);
    // The LM head: a matmul against the (tied) embedding, no bias.
    let logits = g.push(Op {
        name: "lm_head".into(),
        op: "matmul",
        deps: vec![lnf],
        cost: 2.0 * (rows * d * v) as f64,
        memory: rows * v * F32,
        saves: vec!["0"],
        grad_cost: 4.0 * (rows * d * v) as f64,
        grad_memory: act * F32,
        requires_grad: true,
    });
    g.push(Op {
        name: "loss".into(),
        op: "cross_entropy",
        deps: vec![logits],
        cost: 8.0 * (rows * v) as f64,
        memory: b * F32,
        saves: vec![],
        grad_cost: 0.0,
        grad_memory: 0,
        requires_grad: true,
    });
    GraphFile {
        meta: Default::default(),
        name: format!("ops-transformer{}", p.layers),
        graph: GraphKind::Forward,
        batch_size: b as u32,
        cost_unit: Some("flop".into()),
        // Weights and their gradients, as the zoo's networks count them.
        fixed_memory: (2 * F32 * p.params()) as f64,
        nodes: g.nodes,
    }
}

pub fn transformer(p: &OpsTransformer) -> Graph {
    Graph::from_file(&transformer_file(p), "<ops-transformer>")
        .expect("the operator-level transformer is valid")
}

/// A long operator-level training chain: an input, then `layers` pre-norm
/// residual MLP blocks (norm statistics, norm apply, matmul, bias, ReLU,
/// dropout mask, dropout, residual add), then a loss. The shape of a very
/// deep network at operator level, for scale benchmarks.
#[derive(Debug, Clone)]
pub struct OpsChain {
    pub layers: usize,
    /// Rows (batch × tokens) and width of every activation.
    pub rows: u64,
    pub width: u64,
}

impl Default for OpsChain {
    fn default() -> Self {
        OpsChain {
            layers: 8,
            rows: 64,
            width: 256,
        }
    }
}

/// Forward operators per chain block.
pub const CHAIN_FWD_PER_LAYER: usize = 8;
/// Gradient nodes per chain block (all but the statistics and the mask).
pub const CHAIN_GRAD_PER_LAYER: usize = 6;

impl OpsChain {
    pub fn check(&self) -> Result<(), String> {
        if self.rows == 0 || self.width == 0 {
            return Err("rows and width must be at least 1".into());
        }
        Ok(())
    }

    /// `14 L + 3`: input, 8 forward per block, loss; input gradient and 6
    /// gradients per block. `--layers 14285` gives 199,993 nodes.
    pub fn node_count(&self) -> usize {
        (CHAIN_FWD_PER_LAYER + CHAIN_GRAD_PER_LAYER) * self.layers + 3
    }

    /// `22 L + 2`: `10 L + 1` forward edges (the loss reads the last
    /// block) and `12 L + 1` backward (the last block's add reads the loss
    /// instead of the next block's two gradients; the input's gradient
    /// reads the first block's two).
    pub fn edge_count(&self) -> usize {
        22 * self.layers + 2
    }

    /// The block count whose chain has at least `nodes` nodes, and at
    /// least one block, as `--layers` asks (`--nodes 3` made a chain
    /// without blocks, whose header's `--layers 0` did not run).
    pub fn layers_for(nodes: usize) -> usize {
        nodes
            .saturating_sub(3)
            .div_ceil(CHAIN_FWD_PER_LAYER + CHAIN_GRAD_PER_LAYER)
            .max(1)
    }
}

pub fn chain_file(p: &OpsChain) -> GraphFile {
    let (rows, d) = (p.rows, p.width);
    let act = rows * d;
    let mut g = Builder {
        nodes: Vec::with_capacity(CHAIN_FWD_PER_LAYER * p.layers + 2),
    };
    let mut x = g.push(Op {
        name: "input".into(),
        op: "input_proj",
        deps: vec![],
        cost: act as f64,
        memory: act * F32,
        saves: vec![],
        grad_cost: act as f64,
        grad_memory: 0,
        requires_grad: true,
    });
    for l in 0..p.layers {
        let pre = format!("b{l}");
        let ln = g.norm(&format!("{pre}_ln"), &x, rows, d);
        let fc = g.dense(&format!("{pre}_fc"), &ln, rows, d, d);
        let relu = g.elementwise(
            format!("{pre}_relu"),
            "relu",
            vec![fc],
            act,
            1.0,
            vec!["self"],
            act * F32,
        );
        let drop = g.dropout(&format!("{pre}_drop"), &relu, act);
        x = g.add(format!("{pre}_res"), &x, &drop, act);
    }
    g.push(Op {
        name: "loss".into(),
        op: "mse",
        deps: vec![x],
        cost: 3.0 * act as f64,
        memory: F32,
        saves: vec![],
        grad_cost: 0.0,
        grad_memory: 0,
        requires_grad: true,
    });
    GraphFile {
        meta: Default::default(),
        name: format!("ops-chain{}", p.layers),
        graph: GraphKind::Forward,
        batch_size: 1,
        cost_unit: Some("flop".into()),
        fixed_memory: 0.0,
        nodes: g.nodes,
    }
}

pub fn chain(p: &OpsChain) -> Graph {
    Graph::from_file(&chain_file(p), "<ops-chain>").expect("the operator-level chain is valid")
}
