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

/// serde_yaml cannot hold an integer past 64 bits, and says so as "not a
/// YAML file: nodes[0].memory: invalid type: integer `18446744073709551616`
/// as u128, expected any YAML value at line 4 column 32": the file is
/// YAML, its number is out of range.
fn out_of_range(msg: String) -> FormatError {
    let parsed = (|| {
        let (path, rest) = msg.split_once(": invalid type: integer `")?;
        let (number, rest) = rest.split_once('`')?;
        let rest = rest
            .strip_prefix(" as u128")
            .or_else(|| rest.strip_prefix(" as i128"))?;
        let at = rest.split_once(" at ").map_or("", |(_, at)| at);
        // A byte count past 2^53 is refused anyway; a cost or time may be
        // that large, written as a float.
        let hint = if path.ends_with("memory") {
            "a memory at most 2^53"
        } else {
            "write a larger number as a float, like 1e20"
        };
        Some(format!(
            "{path}: {number} is out of range (integers are at most 64 bits; {hint}){}",
            if at.is_empty() {
                String::new()
            } else {
                format!(", at {at}")
            }
        ))
    })();
    parsed.map_or(FormatError::Syntax(msg), FormatError::Field)
}

impl GraphFile {
    /// Parses YAML or JSON text (JSON is detected by a leading `{`).
    pub fn parse(text: &str) -> Result<GraphFile, FormatError> {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        crate::input::check_nesting(text).map_err(FormatError::Syntax)?;
        let json = text.trim_start().starts_with('{');
        // A well-formed YAML file is read straight into its types: the
        // generic value of the path below held 740 MB for a 21 MB file of
        // 200,000 nodes, and its memory is the peak of a whole solve of such
        // a graph; typed, 464 MB (serde_yaml's own events are the rest). A
        // file that fails, or holds sizes the float may have rounded, takes
        // the path below for its message or its exact check. JSON stays
        // there: its objects may repeat keys, which only that path refuses.
        if !json {
            if let Ok(file) = serde_yaml::from_str::<GraphFile>(text) {
                if file.sizes_exact() {
                    return Ok(file);
                }
            }
        }
        let value: serde_yaml::Value = if json {
            serde_json::from_str::<StrictJson>(text)
                .map_err(|e| FormatError::Syntax(e.to_string()))?
                .0
        } else {
            serde_yaml::from_str(text).map_err(|e| out_of_range(yaml_err(e)))?
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
        if let Some(msg) = key_not_a_name(&map) {
            return Err(FormatError::Field(msg));
        }
        let top = serde_yaml::Value::Mapping(map);
        let mut file = GraphFile::deserialize(&top).map_err(|e| {
            let key = top.as_mapping().and_then(|m| wrong_key(m, TOP_KEYS));
            FormatError::Field(key.unwrap_or_else(|| yaml_err(e)))
        })?;
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
            // The key at fault is found only on failure: no cost on the
            // way through large graphs.
            let spec = NodeSpec::deserialize(&v).map_err(|e| {
                // serde says "expected struct NodeSpec", or "expected field
                // identifier" for a key that is a list.
                let msg = match v.as_mapping() {
                    None => format!(
                        "expected a node (a mapping with name, cost, memory, deps, ...), got {}",
                        show_value(&v)
                    ),
                    Some(m) => key_not_a_name(m)
                        .or_else(|| wrong_key(m, NODE_KEYS))
                        .unwrap_or_else(|| yaml_err(e)),
                };
                match &name {
                    Some(node) => FormatError::Node {
                        node: node.clone(),
                        msg,
                    },
                    None => FormatError::NodeIndex { index, msg },
                }
            })?;
            file.nodes.push(spec);
        }
        Ok(file)
    }

    /// Every byte count below 2^53, where the float it is read as is the
    /// integer written (2^53 + 1 reads as 2^53).
    fn sizes_exact(&self) -> bool {
        let ok = |m: f64| m < MAX_EXACT_BYTES as f64;
        ok(self.fixed_memory)
            && self
                .nodes
                .iter()
                .all(|n| ok(n.memory) && n.grad_memory.is_none_or(ok))
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

/// What a key's value must be, to name the key at fault when a mapping
/// does not deserialize (serde_yaml's `from_value` says only "invalid
/// type: string \"abc\", expected f64", not whose).
#[derive(Clone, Copy)]
enum Expect {
    Text,
    /// Text or null (an optional label).
    OptText,
    Number,
    /// A number or null.
    OptNumber,
    Flag,
    Names,
    /// Names or null.
    OptNames,
    Batch,
    Kind,
    Labels,
}

const TOP_KEYS: &[(&str, Expect)] = &[
    ("name", Expect::Text),
    ("graph", Expect::Kind),
    ("batch_size", Expect::Batch),
    ("cost_unit", Expect::OptText),
    ("fixed_memory", Expect::Number),
    ("meta", Expect::Labels),
];

const NODE_KEYS: &[(&str, Expect)] = &[
    ("name", Expect::Text),
    ("cost", Expect::Number),
    ("memory", Expect::Number),
    ("deps", Expect::Names),
    ("backward", Expect::Flag),
    ("op", Expect::OptText),
    ("saves", Expect::OptNames),
    ("grad_cost", Expect::OptNumber),
    ("grad_memory", Expect::OptNumber),
    ("requires_grad", Expect::Flag),
    ("group", Expect::OptText),
];

impl Expect {
    fn describe(self) -> &'static str {
        match self {
            Expect::Text | Expect::OptText => "a string",
            Expect::Number | Expect::OptNumber => "a number",
            Expect::Flag => "true or false",
            Expect::Names | Expect::OptNames => "a list of names",
            Expect::Batch => "a whole number from 1 to 4294967295",
            Expect::Kind => "forward or training",
            Expect::Labels => "a mapping of names to strings",
        }
    }

    fn accepts(self, v: &serde_yaml::Value) -> bool {
        match self {
            Expect::Text => String::deserialize(v).is_ok(),
            Expect::OptText => Option::<String>::deserialize(v).is_ok(),
            Expect::Number => f64::deserialize(v).is_ok(),
            Expect::OptNumber => Option::<f64>::deserialize(v).is_ok(),
            Expect::Flag => bool::deserialize(v).is_ok(),
            Expect::Names => Vec::<String>::deserialize(v).is_ok(),
            Expect::OptNames => Option::<Vec<String>>::deserialize(v).is_ok(),
            Expect::Batch => u32::deserialize(v).is_ok(),
            Expect::Kind => GraphKind::deserialize(v).is_ok(),
            Expect::Labels => std::collections::BTreeMap::<String, String>::deserialize(v).is_ok(),
        }
    }
}

/// The first key of `m` that is not a name, said as such: serde's words
/// for it ("invalid type: sequence, expected field identifier") named
/// neither the key nor what keys are.
fn key_not_a_name(m: &serde_yaml::Mapping) -> Option<String> {
    m.iter()
        .find(|(k, _)| !k.is_string())
        .map(|(k, _)| format!("a key must be a name, got {}", show_value(k)))
}

/// The first known key whose value has the wrong type, as "key: expected
/// ..., got ...", or `None` when the fault is elsewhere (a missing or
/// unknown key, which serde's own message names).
fn wrong_key(map: &serde_yaml::Mapping, keys: &[(&str, Expect)]) -> Option<String> {
    keys.iter().find_map(|&(key, expect)| {
        let v = map.get(key)?;
        (!expect.accepts(v)).then(|| {
            format!(
                "{key}: expected {}, got {}",
                expect.describe(),
                show_wrong(expect, v)
            )
        })
    })
}

/// A value of the right kind with a wrong part names the part: "got a
/// list" for `deps: [1]` contradicted "expected a list of names".
fn show_wrong(expect: Expect, v: &serde_yaml::Value) -> String {
    use serde_yaml::Value;
    let not_text = |x: &&Value| String::deserialize(*x).is_err();
    match (expect, v) {
        (Expect::Names | Expect::OptNames, Value::Sequence(items)) => {
            if let Some((i, bad)) = items.iter().enumerate().find(|(_, x)| not_text(x)) {
                let hint = if bad.is_number() {
                    " (quote a name that looks like a number)"
                } else {
                    ""
                };
                return format!(
                    "a list whose item {} is {}, not a name{hint}",
                    i + 1,
                    show_value(bad)
                );
            }
        }
        (Expect::Labels, Value::Mapping(m)) => {
            for (k, x) in m {
                if not_text(&k) {
                    return format!("a mapping with the key {}, not a name", show_value(k));
                }
                if not_text(&x) {
                    return format!(
                        "a mapping whose '{}' is {}, not a string (quote it)",
                        k.as_str().unwrap_or_default(),
                        show_value(x)
                    );
                }
            }
        }
        _ => {}
    }
    show_value(v)
}

/// A value as a message quotes it: scalars in full (up to a point),
/// collections by their kind.
fn show_value(v: &serde_yaml::Value) -> String {
    use serde_yaml::Value;
    match v {
        Value::Null => "nothing (null)".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => {
            let short: String = s.chars().take(40).collect();
            let more = if short.len() < s.len() { "..." } else { "" };
            format!("the string '{}{more}'", short.escape_debug())
        }
        Value::Sequence(_) => "a list".into(),
        Value::Mapping(_) => "a mapping".into(),
        Value::Tagged(t) => format!("a value tagged {}", t.tag),
    }
}

/// A JSON document read straight into a YAML value, refusing a key given
/// twice in one object: `serde_json::Value` keeps the last silently, so a
/// second `"nodes"` list dropped the first one's nodes without a word
/// (YAML files already get serde_yaml's "duplicate entry" error).
struct StrictJson(serde_yaml::Value);

impl<'de> Deserialize<'de> for StrictJson {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(StrictJsonVisitor).map(StrictJson)
    }
}

struct StrictJsonVisitor;

impl<'de> serde::de::Visitor<'de> for StrictJsonVisitor {
    type Value = serde_yaml::Value;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Self::Value, E> {
        Ok(serde_yaml::Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
        Ok(serde_yaml::Value::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
        Ok(serde_yaml::Value::Number(v.into()))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Self::Value, E> {
        Ok(serde_yaml::Value::Number(v.into()))
    }

    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(serde_yaml::Value::String(v.to_string()))
    }

    fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
        Ok(serde_yaml::Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(serde_yaml::Value::Null)
    }

    fn visit_none<E>(self) -> Result<Self::Value, E> {
        Ok(serde_yaml::Value::Null)
    }

    fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        StrictJson::deserialize(d).map(|v| v.0)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::new();
        while let Some(StrictJson(v)) = a.next_element()? {
            out.push(v);
        }
        Ok(serde_yaml::Value::Sequence(out))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
        let mut out = serde_yaml::Mapping::new();
        while let Some(key) = a.next_key::<String>()? {
            let StrictJson(v) = a.next_value()?;
            if out.contains_key(key.as_str()) {
                return Err(serde::de::Error::custom(format!(
                    "key \"{}\" is given twice in one object",
                    key.escape_debug()
                )));
            }
            out.insert(serde_yaml::Value::String(key), v);
        }
        Ok(serde_yaml::Value::Mapping(out))
    }
}

/// The largest byte count a float holds exactly.
const MAX_EXACT_BYTES: u64 = 1 << 53;

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
