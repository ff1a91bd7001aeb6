//! Content fingerprints of training graphs.
//!
//! A plan or a sweep row is only meaningful for the graph it was computed
//! on, and file names and model names say nothing about content: a copy of
//! `vgg16.yaml` with one cost raised keeps both. So plans and sweep rows
//! carry a hash of the canonical training graph (after backward generation
//! and ordering), and readers compare it before trusting them.
//!
//! What is hashed is what the solver sees: per node, in order, its name,
//! cost, bytes, backward flag and dependency indices, then the batch size
//! and fixed memory. Not hashed: the model's name, `cost_unit`, `op` and
//! `meta` (labels and provenance; renaming a model or re-importing it with
//! another tool version changes no answer). The hash is FNV-1a over a
//! length-prefixed encoding, written as 16 hex digits: it guards against
//! accidents, not adversaries, and needs no dependency to stay stable.

use super::Graph;
use std::fmt;
use std::str::FromStr;

/// A graph's content hash; see the module documentation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fingerprint(pub u64);

struct Fnv(u64);

impl Fnv {
    fn bytes(&mut self, b: &[u8]) {
        for &x in b {
            self.0 ^= x as u64;
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    fn u64(&mut self, v: u64) {
        self.bytes(&v.to_le_bytes());
    }

    fn str(&mut self, s: &str) {
        self.u64(s.len() as u64);
        self.bytes(s.as_bytes());
    }
}

impl Fingerprint {
    pub fn of(g: &Graph) -> Fingerprint {
        let mut h = Fnv(0xcbf2_9ce4_8422_2325);
        h.u64(g.len() as u64);
        for n in g.nodes() {
            h.str(&n.name);
            // -0.0 and 0.0 are the same cost.
            h.u64((n.cost + 0.0).to_bits());
            h.u64(n.memory.get());
            h.bytes(&[n.backward as u8]);
            h.u64(n.deps.len() as u64);
            for d in &n.deps {
                h.u64(d.0 as u64);
            }
            // Hashed only when present, so that graphs without groups keep
            // the fingerprints their plans and sweep rows carry.
            if let Some(gr) = &n.group {
                h.bytes(&[0xff]);
                h.str(gr);
            }
        }
        h.u64(g.batch_size as u64);
        h.u64(g.fixed_memory.get());
        Fingerprint(h.0)
    }

    /// The same hash over a text: for inputs other than graphs whose
    /// canonical form is already a string (a device's parsed figures).
    pub fn of_text(text: &str) -> Fingerprint {
        let mut h = Fnv(0xcbf2_9ce4_8422_2325);
        h.str(text);
        Fingerprint(h.0)
    }
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

impl FromStr for Fingerprint {
    type Err = String;
    fn from_str(s: &str) -> Result<Fingerprint, String> {
        let s = s.trim();
        if s.len() != 16 {
            return Err(format!("'{s}' is not a graph fingerprint (16 hex digits)"));
        }
        u64::from_str_radix(s, 16)
            .map(Fingerprint)
            .map_err(|_| format!("'{s}' is not a graph fingerprint (16 hex digits)"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::{GraphFile, GraphKind, NodeSpec};

    fn file() -> GraphFile {
        GraphFile {
            name: "m".into(),
            graph: GraphKind::Forward,
            batch_size: 1,
            cost_unit: None,
            fixed_memory: 0.0,
            meta: Default::default(),
            nodes: vec![
                NodeSpec::new("a", 1.0, 4, vec![]),
                NodeSpec::new("loss", 1.0, 4, vec!["a".into()]),
            ],
        }
    }

    #[test]
    fn content_changes_it_and_labels_do_not() {
        let base = Fingerprint::of(&Graph::from_file(&file(), "t").unwrap());
        let mut labelled = file();
        labelled.name = "other".into();
        labelled.cost_unit = Some("ms".into());
        labelled.meta.insert("source".into(), "x".into());
        labelled.nodes[0].op = Some("conv".into());
        assert_eq!(
            Fingerprint::of(&Graph::from_file(&labelled, "t").unwrap()),
            base
        );
        let mut costlier = file();
        costlier.nodes[0].cost = 2.0;
        assert_ne!(
            Fingerprint::of(&Graph::from_file(&costlier, "t").unwrap()),
            base
        );
        assert_eq!(base.to_string().parse::<Fingerprint>().unwrap(), base);
    }
}
