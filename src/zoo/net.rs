//! A network described layer by layer, and its translation into a
//! `graph: forward` file: one node per layer, FLOPs as cost, fp32 output
//! bytes as memory, and per-layer `saves` / `grad_cost` / `grad_memory` so
//! that the generated backward pass reads and produces what a framework's
//! would (rules in docs/zoo.md).

use super::layers::{Layer, LayerInfo, Shape};
use super::ZooError;
use crate::graph::{GraphFile, GraphKind, NodeSpec};
use std::collections::HashSet;

/// fp32 everywhere.
pub const BYTES_PER_ELEM: u64 = 4;

/// A value flowing between layers: either the network's input (data, not a
/// graph node) or the output of a layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tensor(usize);

#[derive(Debug, Clone)]
struct Value {
    shape: Shape,
    node: Option<usize>,
}

#[derive(Debug, Clone)]
pub struct NetNode {
    pub name: String,
    pub layer: Layer,
    /// Indices of the layers this one reads (the network input excluded).
    pub deps: Vec<usize>,
    pub info: LayerInfo,
}

#[derive(Debug, Clone)]
pub struct Net {
    pub name: String,
    /// One line naming the exact variant, written to the file header.
    pub description: String,
    values: Vec<Value>,
    nodes: Vec<NetNode>,
    names: HashSet<String>,
}

impl Net {
    pub fn new(name: impl Into<String>, description: impl Into<String>) -> Net {
        Net {
            name: name.into(),
            description: description.into(),
            values: Vec::new(),
            nodes: Vec::new(),
            names: HashSet::new(),
        }
    }

    /// The network's input: data that is resident anyway, so not a node
    /// (as in the Checkmate paper's Keras graphs).
    pub fn input(&mut self, dims: Vec<u64>) -> Tensor {
        self.values.push(Value {
            shape: Shape(dims),
            node: None,
        });
        Tensor(self.values.len() - 1)
    }

    pub fn layer(
        &mut self,
        name: impl Into<String>,
        layer: Layer,
        inputs: &[Tensor],
    ) -> Result<Tensor, ZooError> {
        let name = name.into();
        let err = |msg: String| ZooError::Layer {
            net: self.name.clone(),
            layer: name.clone(),
            msg,
        };
        if self.names.contains(&name) {
            return Err(err("defined twice".into()));
        }
        let shapes: Vec<&Shape> = inputs.iter().map(|t| &self.values[t.0].shape).collect();
        let info = layer.infer(&shapes).map_err(&err)?;
        if info.out.elems() == 0 {
            return Err(err(format!("empty output {}", info.out)));
        }
        let mut deps = Vec::new();
        for t in inputs {
            if let Some(n) = self.values[t.0].node {
                if !deps.contains(&n) {
                    deps.push(n);
                }
            }
        }
        self.names.insert(name.clone());
        self.nodes.push(NetNode {
            name,
            layer,
            deps,
            info: info.clone(),
        });
        self.values.push(Value {
            shape: info.out,
            node: Some(self.nodes.len() - 1),
        });
        Ok(Tensor(self.values.len() - 1))
    }

    pub fn shape(&self, t: Tensor) -> &Shape {
        &self.values[t.0].shape
    }

    pub fn nodes(&self) -> &[NetNode] {
        &self.nodes
    }

    /// Parameters, counted as Keras' "total params".
    pub fn params(&self) -> u64 {
        self.nodes.iter().map(|n| n.info.params).sum()
    }

    /// Forward multiply-accumulates per example.
    pub fn macs(&self) -> u64 {
        self.nodes.iter().map(|n| n.info.macs).sum()
    }

    /// Forward FLOPs per example (the graph's cost at batch 1).
    pub fn flops(&self) -> u64 {
        self.nodes.iter().map(|n| n.info.flops()).sum()
    }

    /// Whether a layer's backward has anything to do: it has weights, or
    /// some layer before it does. Layers in front of the first weights
    /// (padding the input image) get no gradient node.
    fn needs_grad(&self) -> Vec<bool> {
        let mut needs = vec![false; self.nodes.len()];
        for (i, n) in self.nodes.iter().enumerate() {
            needs[i] = has_weights(&n.layer) || n.deps.iter().any(|&d| needs[d]);
        }
        needs
    }

    /// The graph file at this batch size. Costs and activation bytes scale
    /// with the batch; `fixed_memory` is parameters plus their gradients.
    pub fn to_file(&self, batch: u32) -> GraphFile {
        // In floating point: a batch of 2^32 times a layer's figures passes
        // u64 and wrapped to a plausible graph; as a float the graph's
        // validation refuses what is past 2^53.
        let b = batch as f64;
        let needs = self.needs_grad();
        let bytes = |elems: u64| elems as f64 * BYTES_PER_ELEM as f64 * b;
        let nodes = self
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let cost = n.info.flops() as f64 * b;
                let memory = bytes(n.info.out.elems());
                let mut spec = NodeSpec::new(n.name.clone(), cost, 0, self.dep_names(n));
                spec.memory = memory;
                spec.op = Some(n.layer.op().to_string());
                if !needs[i] {
                    spec.requires_grad = false;
                    return spec;
                }
                let rule = n.layer.saves();
                let mut saves: Vec<String> = Vec::new();
                if rule.inputs {
                    saves.extend(self.dep_names(n));
                }
                if rule.output {
                    saves.push("self".into());
                }
                spec.saves = Some(saves);
                let needy: Vec<usize> = n.deps.iter().copied().filter(|&d| needs[d]).collect();
                // The backward produces the gradients of the inputs that
                // need one; an add hands one buffer to all its inputs.
                let grad_elems = match n.layer {
                    Layer::Add if !needy.is_empty() => n.info.out.elems(),
                    _ => needy.iter().map(|&d| self.nodes[d].info.out.elems()).sum(),
                };
                let grad_memory = bytes(grad_elems);
                if grad_memory != memory {
                    spec.grad_memory = Some(grad_memory);
                }
                // One matrix product per operand that needs a gradient
                // (weights included), plus the elementwise part once.
                let operands = has_weights(&n.layer) as u64
                    + needy.len() as u64
                        * match n.layer {
                            Layer::AttentionScores { .. } => 2,
                            _ => 1,
                        };
                let grad_cost = (2 * n.info.macs * operands + n.info.other_flops) as f64 * b;
                if grad_cost != 2.0 * cost {
                    spec.grad_cost = Some(grad_cost);
                }
                spec
            })
            .collect();
        GraphFile {
            meta: Default::default(),
            name: self.name.clone(),
            graph: GraphKind::Forward,
            batch_size: batch,
            cost_unit: Some("flop".into()),
            fixed_memory: (2 * self.params() * BYTES_PER_ELEM) as f64,
            nodes,
        }
    }

    fn dep_names(&self, n: &NetNode) -> Vec<String> {
        n.deps.iter().map(|&d| self.nodes[d].name.clone()).collect()
    }

    /// The comment block written at the top of a generated file.
    pub fn header(&self, batch: u32, command: &str) -> String {
        format!(
            "{}\n\
             Generated by `{command}`; do not edit.\n\
             Batch {batch}. Per example: {} parameters, {} forward MACs, {} forward FLOPs.\n\
             cost = forward FLOPs x batch; memory = fp32 output bytes x batch;\n\
             fixed_memory = 2 x 4 bytes x parameters (weights and their gradients).",
            self.description,
            group(self.params()),
            group(self.macs()),
            group(self.flops()),
        )
    }
}

fn has_weights(l: &Layer) -> bool {
    matches!(
        l,
        Layer::Conv2d { .. }
            | Layer::DepthwiseConv2d { .. }
            | Layer::ConvTranspose2d { .. }
            | Layer::Dense { .. }
            | Layer::BatchNorm
            | Layer::LayerNorm
            | Layer::Embedding { .. }
            | Layer::TiedLmHead { .. }
    )
}

/// `138357544` → `138,357,544`.
pub fn group(v: u64) -> String {
    let s = v.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}
