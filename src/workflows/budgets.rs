//! Budget files (`budgets/<model>.yaml`): the memory budgets a sweep
//! visits. A file says them in the user's terms (sizes, percentages of the
//! checkpoint-all peak, ranges) so that one file stays right when a model's
//! numbers change; [`BudgetList::resolve`] turns them into bytes for one
//! graph.
//!
//! ```yaml
//! model: vgg16                 # informational
//! budgets:
//!   - 90%                      # of the checkpoint-all peak, rounded up
//!   - 12GB                     # anything BudgetSpec::parse accepts
//!   - 13000000000              # plain bytes
//!   - {from: min, to: 100%, steps: 20}   # inclusive, evenly spaced
//! ```

use crate::graph::{analysis, Graph};
use crate::units::{BudgetSpec, Bytes};
use std::path::{Path, PathBuf};

/// One end of a range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// The smallest budget any plan can run in
    /// ([`analysis::min_feasible_budget`]).
    Min,
    Spec(BudgetSpec),
}

/// One entry of the `budgets:` list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BudgetItem {
    Single(BudgetSpec),
    /// `steps` budgets evenly spaced from `from` to `to`, both included
    /// (a single step is `to` alone).
    Range {
        from: Endpoint,
        to: Endpoint,
        steps: u32,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BudgetList {
    /// The `model:` key, if the file has one (informational).
    pub model: Option<String>,
    pub items: Vec<BudgetItem>,
    /// The single budgets written as a bare number (`90`, `0.9`): bytes,
    /// though each may be a percentage meant ([`BudgetList::slips`]).
    pub bare: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
#[error("{source_name}: {msg}")]
pub struct BudgetError {
    pub source_name: String,
    pub msg: String,
}

/// Ranges above this many points are almost certainly a typo, and would
/// schedule an unbounded number of solves.
const MAX_STEPS: u64 = 10_000;

impl BudgetList {
    /// What a sweep uses when the model has no budget file: twenty budgets
    /// from the smallest feasible one up to the checkpoint-all peak.
    pub fn default_range() -> BudgetList {
        BudgetList {
            model: None,
            items: vec![BudgetItem::Range {
                from: Endpoint::Min,
                to: Endpoint::Spec(BudgetSpec::Percent { num: 1, den: 1 }),
                steps: 20,
            }],
            bare: Vec::new(),
        }
    }

    /// Parses YAML text; `source_name` names the file in errors.
    pub fn parse(text: &str, source_name: &str) -> Result<BudgetList, BudgetError> {
        let err = |msg: String| BudgetError {
            source_name: source_name.to_string(),
            msg,
        };
        // Before the parser, which takes a minute on a few thousand
        // nested brackets.
        crate::input::check_nesting(text).map_err(|e| err(format!("not a budget file: {e}")))?;
        let value: serde_yaml::Value = serde_yaml::from_str(text)
            .map_err(|e| err(format!("not YAML: {}", e.to_string().replace('\n', " "))))?;
        let serde_yaml::Value::Mapping(mut map) = value else {
            return Err(err(
                "the top level must be a mapping with a 'budgets' list".into()
            ));
        };
        let model = match map.remove("model") {
            None | Some(serde_yaml::Value::Null) => None,
            Some(v) => {
                Some(scalar_string(&v).ok_or_else(|| err("'model' must be a name".to_string()))?)
            }
        };
        let list = match map.remove("budgets") {
            Some(serde_yaml::Value::Sequence(s)) => s,
            Some(_) => return Err(err("'budgets' must be a list".into())),
            None => return Err(err("missing key 'budgets'".into())),
        };
        if let Some((k, _)) = map.iter().next() {
            return Err(err(format!(
                "unknown key '{}' (expected model, budgets)",
                scalar_string(k).unwrap_or_else(|| "?".into())
            )));
        }
        if list.is_empty() {
            return Err(err("'budgets' is empty".into()));
        }
        let items = list
            .iter()
            .enumerate()
            .map(|(i, v)| parse_item(v).map_err(|m| err(format!("budgets entry {}: {m}", i + 1))))
            .collect::<Result<Vec<_>, _>>()?;
        let bare = list
            .iter()
            .filter_map(|v| match v {
                serde_yaml::Value::Number(_) | serde_yaml::Value::String(_) => scalar_string(v),
                _ => None,
            })
            .collect();
        Ok(BudgetList { model, items, bare })
    }

    pub fn load(path: &Path) -> Result<BudgetList, BudgetError> {
        let name = path.display().to_string();
        let text = crate::input::read_text(path, crate::input::MAX_SMALL_BYTES).map_err(|e| {
            BudgetError {
                source_name: name.clone(),
                msg: format!("cannot read: {e}"),
            }
        })?;
        BudgetList::parse(&text, &name)
    }

    /// `--budgets`: an existing file, else an inline comma-separated list
    /// (`90%,80%,12GB`). Returns the list and how to name its source.
    pub fn from_arg(arg: &str) -> Result<(BudgetList, String), BudgetError> {
        let path = Path::new(arg);
        if path.is_file() {
            return BudgetList::load(path).map(|l| (l, arg.to_string()));
        }
        let err = |msg: String| BudgetError {
            source_name: "--budgets".into(),
            msg,
        };
        let items = arg
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| BudgetSpec::parse(s).map(BudgetItem::Single))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| {
                // A path that names no file reads as a mistyped file name
                // first ("invalid size 'nonexist.yaml'" never said that no
                // such file exists).
                let looks_like_a_file = [".yaml", ".yml", ".json", "/"]
                    .iter()
                    .any(|s| arg.to_ascii_lowercase().contains(s));
                if path.exists() {
                    err(format!("{arg}: not a regular file"))
                } else if looks_like_a_file {
                    err(format!(
                        "{arg}: no such budget file (nor is it a list of budgets like 90%,80%)"
                    ))
                } else {
                    err(format!(
                        "'{arg}' is neither a budget file nor a list of budgets like 90%,80%: {e}"
                    ))
                }
            })?;
        if items.is_empty() {
            return Err(err("no budgets given".into()));
        }
        let bare = arg
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect();
        Ok((
            BudgetList {
                model: None,
                items,
                bare,
            },
            format!("--budgets {arg}"),
        ))
    }

    /// A note for each bare number that is below the smallest budget and
    /// looks like a percentage (`90` for 90%): every row there would say
    /// infeasible. `source` names where the list came from, as in errors.
    pub fn slips(&self, g: &Graph, source: &str) -> Vec<String> {
        let peak = analysis::checkpoint_all_peak(g);
        let min = analysis::min_feasible_budget(g);
        self.bare
            .iter()
            .filter_map(|item| {
                let bytes = BudgetSpec::parse(item).ok()?.resolve(peak);
                let hint = crate::units::percent_meant(item, peak, min).filter(|_| bytes < min)?;
                Some(format!(
                    "{source}: {} is {} ({bytes} bytes), below the smallest budget; {hint}",
                    item.trim(),
                    bytes.human()
                ))
            })
            .collect()
    }

    /// A budget of 0 bytes is refused: no plan fits it, and it is a slip
    /// (`0.9` is bytes, rounded down), not a point of a trade-off curve.
    pub fn check_nonzero(&self, g: &Graph, source: &str) -> Result<(), BudgetError> {
        // A graph whose values all take no memory fits 0 bytes.
        if self.resolve(g).first() != Some(&Bytes::ZERO)
            || analysis::min_feasible_budget(g) == Bytes::ZERO
        {
            return Ok(());
        }
        let peak = analysis::checkpoint_all_peak(g);
        let item = self
            .bare
            .iter()
            .find(|i| BudgetSpec::parse(i).is_ok_and(|b| b.resolve(peak) == Bytes::ZERO));
        let msg = match item {
            Some(i) => format!(
                "{} is 0 bytes, which no plan fits{}",
                i.trim(),
                crate::units::percent_meant(i, peak, analysis::min_feasible_budget(g))
                    .map_or(String::new(), |h| format!("; {h}"))
            ),
            None => "a budget of 0 bytes fits no plan".to_string(),
        };
        Err(BudgetError {
            source_name: source.to_string(),
            msg,
        })
    }

    /// A budget file names the model it was written for; applying it to
    /// another model is almost surely the wrong file.
    pub fn check_model(&self, g: &Graph, source: &str) -> Result<(), BudgetError> {
        match &self.model {
            Some(m) if *m != g.name => Err(BudgetError {
                source_name: source.to_string(),
                msg: format!(
                    "written for model '{m}', not '{}'; pass the right file with --budgets",
                    g.name
                ),
            }),
            _ => Ok(()),
        }
    }

    /// The budgets in bytes for this graph, ascending and without
    /// duplicates. Percentages and range points round up to whole bytes.
    pub fn resolve(&self, g: &Graph) -> Vec<Bytes> {
        let peak = analysis::checkpoint_all_peak(g);
        let min = analysis::min_feasible_budget(g);
        let end = |e: Endpoint| match e {
            Endpoint::Min => min,
            Endpoint::Spec(s) => s.resolve(peak),
        };
        let mut out = Vec::new();
        for item in &self.items {
            match *item {
                BudgetItem::Single(s) => out.push(s.resolve(peak)),
                BudgetItem::Range { from, to, steps } => {
                    let (a, b) = (end(from), end(to));
                    if steps <= 1 {
                        out.push(b);
                        continue;
                    }
                    let (lo, hi) = (a.min(b), a.max(b));
                    let span = (hi.get() - lo.get()) as u128;
                    let last = (steps - 1) as u128;
                    for i in 0..steps as u128 {
                        out.push(Bytes(lo.get() + (span * i).div_ceil(last) as u64));
                    }
                }
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    }
}

/// The budget file a sweep uses for `model` when none is given: the
/// `budgets/` folder beside the model's folder (`models/x.yaml` finds
/// `budgets/x.yaml` from anywhere). Never the working directory's: a model
/// elsewhere that shares a file name would silently get the repository's
/// budgets. `None` when there is no such file.
pub fn default_file(model: &Path) -> Option<PathBuf> {
    let stem = model.file_stem()?.to_string_lossy().into_owned();
    let dir = model.parent()?;
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let beside = dir.join("..").join("budgets").join(format!("{stem}.yaml"));
    beside.is_file().then_some(beside)
}

fn scalar_string(v: &serde_yaml::Value) -> Option<String> {
    match v {
        serde_yaml::Value::String(s) => Some(s.clone()),
        serde_yaml::Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

fn parse_spec(v: &serde_yaml::Value) -> Result<BudgetSpec, String> {
    let s =
        scalar_string(v).ok_or_else(|| "expected a size like 12GB, 90% or 1000000".to_string())?;
    BudgetSpec::parse(&s).map_err(|e| e.to_string())
}

fn parse_endpoint(v: Option<&serde_yaml::Value>, default: Endpoint) -> Result<Endpoint, String> {
    match v {
        None | Some(serde_yaml::Value::Null) => Ok(default),
        Some(serde_yaml::Value::String(s)) if s.trim() == "min" => Ok(Endpoint::Min),
        Some(v) => parse_spec(v).map(Endpoint::Spec),
    }
}

fn parse_item(v: &serde_yaml::Value) -> Result<BudgetItem, String> {
    let serde_yaml::Value::Mapping(m) = v else {
        return parse_spec(v).map(BudgetItem::Single);
    };
    for (k, _) in m {
        let k = scalar_string(k).unwrap_or_default();
        if !matches!(k.as_str(), "from" | "to" | "steps") {
            return Err(format!(
                "unknown range key '{k}' (expected from, to, steps)"
            ));
        }
    }
    let from = parse_endpoint(m.get("from"), Endpoint::Min).map_err(|e| format!("from: {e}"))?;
    let to = parse_endpoint(
        m.get("to"),
        Endpoint::Spec(BudgetSpec::Percent { num: 1, den: 1 }),
    )
    .map_err(|e| format!("to: {e}"))?;
    let steps = m
        .get("steps")
        .ok_or("a range needs 'steps' (how many budgets)")?
        .as_u64()
        .filter(|&s| (1..=MAX_STEPS).contains(&s))
        .ok_or(format!(
            "steps must be a whole number from 1 to {MAX_STEPS}"
        ))?;
    Ok(BudgetItem::Range {
        from,
        to,
        steps: steps as u32,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zoo::synthetic::linear;

    #[test]
    fn parses_every_form() {
        let text = "model: lin\nbudgets:\n  - 90%\n  - 12GB\n  - 13000000000\n  - {from: min, to: 100%, steps: 5}\n  - {steps: 2}\n";
        let l = BudgetList::parse(text, "b.yaml").unwrap();
        assert_eq!(l.model.as_deref(), Some("lin"));
        assert_eq!(l.items.len(), 5);
        assert_eq!(
            l.items[1],
            BudgetItem::Single(BudgetSpec::Absolute(Bytes(12_000_000_000)))
        );
        assert_eq!(
            l.items[2],
            BudgetItem::Single(BudgetSpec::Absolute(Bytes(13_000_000_000)))
        );
        assert_eq!(
            l.items[4],
            BudgetItem::Range {
                from: Endpoint::Min,
                to: Endpoint::Spec(BudgetSpec::Percent { num: 1, den: 1 }),
                steps: 2
            }
        );
    }

    #[test]
    fn resolves_sorted_and_deduplicated() {
        // linear(4): unit memories; checkpoint-all peak 6, min budget 3.
        let g = linear(4);
        assert_eq!(analysis::checkpoint_all_peak(&g), Bytes(6));
        assert_eq!(analysis::min_feasible_budget(&g), Bytes(3));
        let l = BudgetList::parse(
            "budgets: [50%, 100%, 4, {from: min, to: 100%, steps: 4}]",
            "x",
        )
        .unwrap();
        // 50% of 6 = 3; range 3..6 in 4 points = 3,4,5,6.
        assert_eq!(l.resolve(&g), vec![Bytes(3), Bytes(4), Bytes(5), Bytes(6)]);
        // Range points round up: 3..6 in 3 points = 3, 4.5→5, 6.
        let l = BudgetList::parse("budgets: [{steps: 3}]", "x").unwrap();
        assert_eq!(l.resolve(&g), vec![Bytes(3), Bytes(5), Bytes(6)]);
        assert_eq!(
            BudgetList::default_range().resolve(&g),
            vec![Bytes(3), Bytes(4), Bytes(5), Bytes(6)]
        );
    }

    #[test]
    fn errors_name_the_file_and_entry() {
        let e = BudgetList::parse("budgets: [90%, 12XB]", "b.yaml").unwrap_err();
        assert!(e.to_string().starts_with("b.yaml: budgets entry 2:"), "{e}");
        let e = BudgetList::parse("budgets: [{from: min, step: 3}]", "b.yaml").unwrap_err();
        assert!(e.to_string().contains("unknown range key 'step'"), "{e}");
        let e = BudgetList::parse("budget: [1]", "b.yaml").unwrap_err();
        assert!(
            e.to_string().contains("unknown key 'budget'")
                || e.to_string().contains("missing key 'budgets'"),
            "{e}"
        );
        let e = BudgetList::parse("budgets: [{steps: 0}]", "b.yaml").unwrap_err();
        assert!(e.to_string().contains("steps must be"), "{e}");
        assert!(BudgetList::parse("budgets: []", "b.yaml").is_err());
    }
}
