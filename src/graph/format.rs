//! The on-disk graph format (YAML, or JSON): see `docs/format.md`.
//!
//! Parsing is done in two steps: the file is first read as a generic value so
//! that a malformed node can be reported by its name, then each node is
//! deserialized strictly (`deny_unknown_fields`) to catch typos such as
//! `dep:` for `deps:`.

use serde::{Deserialize, Serialize};

/// Whether the file lists only the forward pass (the backward pass is then
/// generated) or the whole training graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GraphKind {
    Forward,
    Training,
}

fn default_batch() -> u32 {
    1
}

fn default_true() -> bool {
    true
}

fn is_true(b: &bool) -> bool {
    *b
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn is_zero(v: &f64) -> bool {
    *v == 0.0
}

/// Top level of a graph file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GraphFile {
    pub name: String,
    pub graph: GraphKind,
    #[serde(default = "default_batch")]
    pub batch_size: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_unit: Option<String>,
    /// Bytes resident for the whole step. Read as a float so that a
    /// non-integer value gets a clear message instead of a type error.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub fixed_memory: f64,
    /// Free-form provenance (an importer's version, its own fingerprint of
    /// the source model). The solver ignores it; tools that wrote it check
    /// it when they read a plan back.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub meta: std::collections::BTreeMap<String, String>,
    pub nodes: Vec<NodeSpec>,
}

/// One node as written in a file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeSpec {
    pub name: String,
    pub cost: f64,
    /// Output size in bytes; must be a whole number (checked in validation).
    pub memory: f64,
    #[serde(default)]
    pub deps: Vec<String>,
    #[serde(default, skip_serializing_if = "is_false")]
    pub backward: bool,
    /// Layer kind, informational only (the zoo writes it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub op: Option<String>,
    /// Forward graphs only: what the gradient of this node reads besides the
    /// incoming gradients. `self` means the node's own output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub saves: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grad_cost: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grad_memory: Option<f64>,
    #[serde(default = "default_true", skip_serializing_if = "is_true")]
    pub requires_grad: bool,
    /// Training graphs only: nodes sharing a group are the outputs of one
    /// kernel. They are computed together (the kernel runs once) but freed
    /// one by one, so a small saved statistic does not pin a large output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
}

impl NodeSpec {
    /// A plain node with no gradient overrides.
    pub fn new(name: impl Into<String>, cost: f64, memory: u64, deps: Vec<String>) -> NodeSpec {
        NodeSpec {
            name: name.into(),
            cost,
            memory: memory as f64,
            deps,
            backward: false,
            op: None,
            saves: None,
            grad_cost: None,
            grad_memory: None,
            requires_grad: true,
            group: None,
        }
    }
}

/// Why a file could not be read as a graph file at all (before validation).
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    #[error("cannot read: {0}")]
    Io(#[from] std::io::Error),
    #[error("not a YAML or JSON graph file: {0}")]
    Syntax(String),
    #[error("{0}")]
    Field(String),
    #[error("node '{}': {msg}", .node.escape_debug())]
    Node { node: String, msg: String },
    #[error("node #{index}: {msg}")]
    NodeIndex { index: usize, msg: String },
}

fn yaml_err(e: serde_yaml::Error) -> String {
    // serde_yaml's messages already carry line/column; keep them on one line.
    e.to_string().replace('\n', " ")
}

impl GraphFile {
    /// Parses YAML or JSON text (JSON is detected by a leading `{`).
    pub fn parse(text: &str) -> Result<GraphFile, FormatError> {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        check_nesting(text)?;
        let value: serde_yaml::Value = if text.trim_start().starts_with('{') {
            let j: serde_json::Value =
                serde_json::from_str(text).map_err(|e| FormatError::Syntax(e.to_string()))?;
            serde_yaml::to_value(j).map_err(|e| FormatError::Syntax(yaml_err(e)))?
        } else {
            serde_yaml::from_str(text).map_err(|e| FormatError::Syntax(yaml_err(e)))?
        };
        let mut map = match value {
            serde_yaml::Value::Mapping(m) => m,
            serde_yaml::Value::Null => return Err(FormatError::Syntax("the file is empty".into())),
            _ => {
                return Err(FormatError::Syntax(
                    "the top level must be a mapping with keys name, graph, nodes".into(),
                ))
            }
        };
        let nodes = map
            .remove("nodes")
            .ok_or_else(|| FormatError::Field("missing key 'nodes'".into()))?;
        let nodes = match nodes {
            serde_yaml::Value::Sequence(s) => s,
            serde_yaml::Value::Null => Vec::new(),
            _ => return Err(FormatError::Field("'nodes' must be a list".into())),
        };
        if let Some(big) = map
            .get("fixed_memory")
            .and_then(|m| m.as_u64())
            .filter(|&m| m > MAX_EXACT_BYTES)
        {
            return Err(FormatError::Field(format!(
                "fixed_memory {big} is more than 2^53 bytes ({MAX_EXACT_BYTES}), the largest size remat counts exactly"
            )));
        }
        map.insert("nodes".into(), serde_yaml::Value::Sequence(Vec::new()));
        let mut file: GraphFile = serde_yaml::from_value(serde_yaml::Value::Mapping(map))
            .map_err(|e| FormatError::Field(yaml_err(e)))?;
        for (index, v) in nodes.into_iter().enumerate() {
            let name = v
                .get("name")
                .and_then(|n| n.as_str())
                .map(|s| s.to_string());
            // Read as floats, byte counts past 2^53 would round silently
            // (2^53 + 1 becomes 2^53): refuse them while the exact
            // integer is still at hand.
            for key in ["memory", "grad_memory"] {
                if let Some(big) = v
                    .get(key)
                    .and_then(|m| m.as_u64())
                    .filter(|&m| m > MAX_EXACT_BYTES)
                {
                    return Err(FormatError::Node {
                        node: name.clone().unwrap_or_else(|| format!("#{index}")),
                        msg: format!("{key} {big} is more than 2^53 bytes ({MAX_EXACT_BYTES}), the largest size remat counts exactly"),
                    });
                }
            }
            let spec: NodeSpec = serde_yaml::from_value(v).map_err(|e| match &name {
                Some(node) => FormatError::Node {
                    node: node.clone(),
                    msg: yaml_err(e),
                },
                None => FormatError::NodeIndex {
                    index,
                    msg: yaml_err(e),
                },
            })?;
            file.nodes.push(spec);
        }
        Ok(file)
    }

    /// YAML text with one node per line (flow style), which keeps large
    /// graphs diffable and byte-for-byte reproducible.
    pub fn to_yaml(&self, header_comment: Option<&str>) -> String {
        let mut out = String::new();
        if let Some(c) = header_comment {
            for line in c.lines() {
                out.push_str("# ");
                out.push_str(line);
                out.push('\n');
            }
        }
        out.push_str(&format!("name: {}\n", yaml_scalar(&self.name)));
        out.push_str(match self.graph {
            GraphKind::Forward => "graph: forward\n",
            GraphKind::Training => "graph: training\n",
        });
        out.push_str(&format!("batch_size: {}\n", self.batch_size));
        if let Some(u) = &self.cost_unit {
            out.push_str(&format!("cost_unit: {}\n", yaml_scalar(u)));
        }
        out.push_str(&format!("fixed_memory: {}\n", fmt_num(self.fixed_memory)));
        if !self.meta.is_empty() {
            out.push_str("meta:\n");
            for (k, v) in &self.meta {
                out.push_str(&format!("  {}: {}\n", yaml_scalar(k), yaml_scalar(v)));
            }
        }
        out.push_str("nodes:\n");
        for n in &self.nodes {
            out.push_str("  - {");
            out.push_str(&format!(
                "name: {}, cost: {}, memory: {}, deps: [{}]",
                yaml_scalar(&n.name),
                fmt_num(n.cost),
                fmt_num(n.memory),
                n.deps
                    .iter()
                    .map(|d| yaml_scalar(d))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
            if n.backward {
                out.push_str(", backward: true");
            }
            if let Some(op) = &n.op {
                out.push_str(&format!(", op: {}", yaml_scalar(op)));
            }
            if let Some(s) = &n.saves {
                out.push_str(&format!(
                    ", saves: [{}]",
                    s.iter()
                        .map(|d| yaml_scalar(d))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
            if let Some(c) = n.grad_cost {
                out.push_str(&format!(", grad_cost: {}", fmt_num(c)));
            }
            if let Some(m) = n.grad_memory {
                out.push_str(&format!(", grad_memory: {}", fmt_num(m)));
            }
            if !n.requires_grad {
                out.push_str(", requires_grad: false");
            }
            if let Some(gr) = &n.group {
                out.push_str(&format!(", group: {}", yaml_scalar(gr)));
            }
            out.push_str("}\n");
        }
        out
    }
}

/// The largest byte count a float holds exactly.
const MAX_EXACT_BYTES: u64 = 1 << 53;

/// Far deeper than any graph file (which nests four levels), and shallow
/// enough that the YAML parser's recursion stays instant: it takes minutes
/// on a file of 200,000 nested brackets.
const MAX_NESTING: usize = 64;

/// Refuses deeply nested flow collections before the YAML parser sees
/// them. Brackets inside quoted strings and comments do not count.
fn check_nesting(text: &str) -> Result<(), FormatError> {
    let (mut depth, mut quote, mut comment) = (0usize, None::<char>, false);
    let mut prev = ' ';
    for c in text.chars() {
        match (quote, c) {
            _ if comment => comment = c != '\n',
            (Some(q), _) if c == q && prev != '\\' => quote = None,
            (Some(_), _) => {}
            // A quote opens a scalar only at the start of a token: `it's`
            // in a plain scalar is an apostrophe.
            (None, '"' | '\'') if matches!(prev, ' ' | '\t' | '\n' | '[' | '{' | ',' | ':') => {
                quote = Some(c)
            }
            (None, '#') if prev.is_whitespace() => comment = true,
            (None, '[' | '{') => {
                depth += 1;
                if depth > MAX_NESTING {
                    return Err(FormatError::Syntax(format!(
                        "nested more than {MAX_NESTING} levels deep"
                    )));
                }
            }
            (None, ']' | '}') => depth = depth.saturating_sub(1),
            _ => {}
        }
        prev = c;
    }
    Ok(())
}

/// Prints integers without a fractional part and other floats in shortest
/// round-trip form.
pub fn fmt_num(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 9.007_199_254_740_992e15 {
        format!("{}", v as i64)
    } else {
        format!("{v:?}")
    }
}

/// Quotes a string only when YAML would otherwise misread it.
fn yaml_scalar(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '/' | '.'))
        && !s.starts_with(|c: char| c.is_ascii_digit() || c == '-' || c == '.')
        && !matches!(
            s.to_ascii_lowercase().as_str(),
            "true" | "false" | "null" | "yes" | "no" | "on" | "off" | "y" | "n" | "~"
        );
    if plain {
        s.to_string()
    } else {
        serde_json::to_string(s).unwrap_or_else(|_| format!("\"{s}\""))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_round_trip() {
        let f = GraphFile {
            meta: Default::default(),
            name: "t".into(),
            graph: GraphKind::Forward,
            batch_size: 4,
            cost_unit: Some("flop".into()),
            fixed_memory: 8.0,
            nodes: vec![
                NodeSpec::new("a", 1.5, 4, vec![]),
                NodeSpec::new("b:c", 2.0, 8, vec!["a".into()]),
                NodeSpec::new("true", 0.0, 0, vec!["b:c".into()]),
            ],
        };
        let text = f.to_yaml(Some("made by a test"));
        assert_eq!(GraphFile::parse(&text).unwrap(), f);
    }

    #[test]
    fn unknown_key_names_node() {
        let e = GraphFile::parse(
            "name: x\ngraph: forward\nnodes:\n  - {name: a, cost: 1, memory: 1, dep: []}\n",
        )
        .unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("node 'a'") && msg.contains("dep"), "{msg}");
    }
}
