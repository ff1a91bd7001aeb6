//! Plan files as users hold them: JSON (the stable interface) or text (to
//! read, and to write by hand). Both carry the same header (model, graph
//! fingerprint, strategy, budget, figures), so either can be checked
//! against the graph it is replayed on.

use super::input_err;
use crate::graph::{Fingerprint, Graph};
use crate::schedule::plan::{statements_text, FileStatement};
use crate::schedule::{Plan, PlanFile};
use std::fmt::Write as _;
use std::path::Path;

/// The text form: a `# key: value` header, then one statement per line
/// (`%3 = allocate conv1_1`, `compute conv1_1, %3 <- %1`, `deallocate %3`).
pub fn plan_text(pf: &PlanFile) -> String {
    let mut s = String::from("# remat plan\n");
    let mut field = |k: &str, v: &dyn std::fmt::Display| {
        let _ = writeln!(s, "# {k}: {v}");
    };
    field("model", &pf.model);
    if let Some(fp) = &pf.graph_fingerprint {
        field("graph_fingerprint", fp);
    }
    field("strategy", &pf.strategy);
    if let Some(b) = pf.budget {
        field("budget", &b);
    }
    field("fixed_memory", &pf.fixed_memory);
    field("cost", &pf.cost);
    field("peak_memory", &pf.peak_memory);
    s.push_str(&statements_text(&pf.statements));
    s
}

/// Parses the text form. Allocation sizes come from the graph (the text
/// does not repeat them), so a node the graph lacks is an error here.
/// A text plan's `# model:` and `# graph_fingerprint:` lines (the first of
/// each), read before the statements, which need the graph's names.
fn text_header(text: &str) -> (Option<&str>, Option<&str>) {
    let (mut model, mut fingerprint) = (None, None);
    for l in text.lines() {
        let Some((k, v)) = l.trim().strip_prefix('#').and_then(|c| c.split_once(':')) else {
            continue;
        };
        match k.trim() {
            "model" => model = model.or(Some(v.trim())),
            "graph_fingerprint" => fingerprint = fingerprint.or(Some(v.trim())),
            _ => {}
        }
    }
    (model, fingerprint)
}

fn parse_text(g: &Graph, text: &str) -> Result<PlanFile, String> {
    let mut pf = PlanFile {
        model: String::new(),
        graph_fingerprint: None,
        strategy: String::new(),
        budget: None,
        fixed_memory: g.fixed_memory.get(),
        cost: f64::NAN,
        peak_memory: 0,
        statements: Vec::new(),
    };
    let reg = |s: &str, line: usize| -> Result<u32, String> {
        // Digits only, as plans write them: `%+0` and `%00` are not %0.
        s.trim()
            .strip_prefix('%')
            .filter(|r| {
                r.bytes().all(|b| b.is_ascii_digit()) && (r.len() == 1 || !r.starts_with('0'))
            })
            .and_then(|r| r.parse().ok())
            .ok_or_else(|| {
                format!(
                    "line {line}: expected a register like %3, got '{}'",
                    s.trim()
                )
            })
    };
    // The line each header key was first given on: a key given twice is
    // refused, as the JSON form refuses a duplicate field (which of the
    // two was meant cannot be told; a second `# budget:` after the
    // statements used to win silently).
    let mut seen: Vec<(&str, usize)> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let l = raw.trim();
        if l.is_empty() {
            continue;
        }
        // Keep in step with `statement_lines`.
        if let Some(c) = l.strip_prefix('#') {
            // Other `#` lines are comments, free text.
            if let Some((k, v)) = c.split_once(':') {
                let v = v.trim();
                let num = |what: &str| {
                    // "-5" and "1.5" are numbers, but not byte counts.
                    if v.parse::<f64>().is_ok() {
                        format!("line {line}: {what} must be a whole number of bytes, got '{v}'")
                    } else {
                        format!("line {line}: {what} must be a number, got '{v}'")
                    }
                };
                let key = k.trim();
                let known = [
                    "model",
                    "graph_fingerprint",
                    "strategy",
                    "budget",
                    "fixed_memory",
                    "cost",
                    "peak_memory",
                ];
                if let Some(key) = known.into_iter().find(|&n| n == key) {
                    if let Some((_, first)) = seen.iter().find(|(k, _)| *k == key) {
                        return Err(format!(
                            "line {line}: '# {key}:' is given twice (first on line {first})"
                        ));
                    }
                    seen.push((key, line));
                }
                match key {
                    "model" => pf.model = v.to_string(),
                    "graph_fingerprint" => pf.graph_fingerprint = Some(v.to_string()),
                    "strategy" => pf.strategy = v.to_string(),
                    "budget" => pf.budget = Some(v.parse().map_err(|_| num("budget"))?),
                    "fixed_memory" => {
                        pf.fixed_memory = v.parse().map_err(|_| num("fixed_memory"))?
                    }
                    // NaN and infinities parse as floats, and JSON cannot
                    // hold them: the JSON form never has them.
                    "cost" => {
                        pf.cost =
                            v.parse()
                                .ok()
                                .filter(|c: &f64| c.is_finite())
                                .ok_or_else(|| {
                                    format!("line {line}: cost must be a finite number, got '{v}'")
                                })?
                    }
                    "peak_memory" => pf.peak_memory = v.parse().map_err(|_| num("peak_memory"))?,
                    _ => {}
                }
            }
            continue;
        }
        // Dispatched on the line's first word, so that a node name holding
        // " = copy_out " or " <- " (names are free text) cannot make one
        // statement read as another.
        let unknown = || {
            format!(
                "line {line}: expected allocate, compute, deallocate, copy_out, copy_in, wait or drop, got '{}'",
                l.escape_debug()
            )
        };
        let st = if let Some(rest) = l.strip_prefix("deallocate ") {
            FileStatement::Deallocate {
                register: reg(rest, line)?,
            }
        } else if let Some(rest) = l.strip_prefix("wait ") {
            FileStatement::Wait {
                register: reg(rest, line)?,
            }
        } else if let Some(rest) = l.strip_prefix("drop ") {
            FileStatement::Drop {
                register: reg(rest, line)?,
            }
        } else if let Some(rest) = l.strip_prefix("compute ") {
            let parse = |text: &str| -> Result<(String, u32), String> {
                let (node, r) = text
                    .rsplit_once(", ")
                    .ok_or_else(|| format!("line {line}: expected 'compute NODE, %R'"))?;
                Ok((node.trim().to_string(), reg(r, line)?))
            };
            let plain = || parse(rest).map(|(n, r)| (n, r, Vec::new()));
            // Arguments are the registers after the last " <- ", unless the
            // node has no deps and " <- " is part of its name.
            let with_args = rest.rsplit_once(" <- ").map(|(h, a)| {
                a.split(',')
                    .map(|r| reg(r, line))
                    .collect::<Result<Vec<_>, _>>()
                    .and_then(|args| parse(h).map(|(n, r)| (n, r, args)))
            });
            let (node, register, args) = match with_args {
                None => plain()?,
                Some(Ok(t)) if g.find(&t.0).is_some() => t,
                Some(other) => match plain() {
                    Ok(t) if g.find(&t.0).is_some() => t,
                    _ => other?,
                },
            };
            // Checked here, where the line is known: later it could only
            // be named by its statement's index.
            if g.find(&node).is_none() {
                return Err(format!(
                    "line {line}: unknown node '{}'",
                    node.escape_debug()
                ));
            }
            FileStatement::Compute {
                node,
                register,
                args,
            }
        } else if l.starts_with('%') {
            let (r, rhs) = l.split_once(" = ").ok_or_else(unknown)?;
            if let Some(node) = rhs.strip_prefix("allocate ") {
                // Names never start or end in spaces (graph files refuse
                // them), so padding around one is layout.
                let node = node.trim();
                let id = g.find(node).ok_or_else(|| {
                    format!("line {line}: unknown node '{}'", node.escape_debug())
                })?;
                FileStatement::Allocate {
                    register: reg(r, line)?,
                    node: node.to_string(),
                    bytes: g.memory(id).get(),
                }
            } else if let Some(src) = rhs.strip_prefix("copy_out ") {
                FileStatement::CopyOut {
                    register: reg(r, line)?,
                    src: reg(src, line)?,
                }
            } else if let Some(src) = rhs.strip_prefix("copy_in ") {
                FileStatement::CopyIn {
                    register: reg(r, line)?,
                    src: reg(src, line)?,
                }
            } else {
                return Err(unknown());
            }
        } else {
            return Err(unknown());
        };
        pf.statements.push(st);
    }
    if pf.statements.is_empty() {
        return Err("no statements: not a plan file".into());
    }
    Ok(pf)
}

/// The line of each statement of a text plan, in order: every line that
/// is neither blank nor a `#` line, as `parse_text` reads them.
fn statement_lines(text: &str) -> Vec<usize> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| {
            let l = l.trim();
            !l.is_empty() && !l.starts_with('#')
        })
        .map(|(i, _)| i + 1)
        .collect()
}

/// Where a replay error lies in the file the user edits: a text plan's
/// line beside the statement's index (the index alone, counted from 0,
/// sent a reader of a hand-edited plan to the wrong line).
fn locate(plan: &Path, e: &crate::schedule::simulator::SimError) -> String {
    format!("{}: {}", statement_at(plan, e.index), e.msg)
}

/// A statement's place: its line in a text plan beside its index (counted
/// from 0, as in a JSON plan's list), or the index alone.
fn statement_at(plan: &Path, index: usize) -> String {
    let line = crate::input::read_text(plan, crate::input::MAX_GRAPH_BYTES)
        .ok()
        .filter(|t| !t.trim_start().starts_with('{'))
        .and_then(|t| statement_lines(&t).get(index).copied());
    match line {
        Some(l) => format!("line {l} (plan statement {index})"),
        None => format!("plan statement {index}"),
    }
}

/// Reads a plan file (JSON or text) for the graph read from `model`, and
/// refuses one made for another graph, naming both files.
pub fn load_plan(g: &Graph, model: &Path, path: &Path) -> anyhow::Result<(PlanFile, Plan)> {
    let name = path.display().to_string();
    let text = crate::input::read_text(path, crate::input::MAX_GRAPH_BYTES)
        .map_err(|e| input_err(format!("{name}: cannot read: {e}")))?;
    let text = text.as_str();
    let ours = g.fingerprint();
    let check_graph = |plan_model: &str, fingerprint: Option<&str>| -> anyhow::Result<()> {
        let other_graph = match fingerprint {
            Some(fp) => {
                fp.parse::<Fingerprint>()
                    .map_err(|e| input_err(format!("{name}: {e}")))?
                    != ours
            }
            // Plans from before fingerprints: the model name is all there is.
            None => !plan_model.is_empty() && plan_model != g.name,
        };
        if other_graph {
            return Err(input_err(format!(
                "{name} was made for another graph than {} (plan: model '{}', fingerprint {}; graph: model '{}', fingerprint {ours}); pass the graph it was made for, or solve again",
                model.display(),
                plan_model.escape_debug(),
                fingerprint.unwrap_or("none"),
                g.name.escape_debug(),
            )));
        }
        Ok(())
    };
    let file: PlanFile = if text.trim_start().starts_with('{') {
        serde_json::from_str(text).map_err(|e| {
            input_err(format!(
                "{name}: not a plan JSON file: {}",
                crate::input::plain_serde_message(&e.to_string())
            ))
        })?
    } else {
        // A text plan names nodes, so one made for another graph failed on
        // its first unknown name ("line 9: unknown node 'input'") before
        // its header could say which graph it is for: the header first.
        let (plan_model, fingerprint) = text_header(text);
        check_graph(plan_model.unwrap_or(""), fingerprint)?;
        parse_text(g, text).map_err(|e| input_err(format!("{name}: {e}")))?
    };
    check_graph(&file.model, file.graph_fingerprint.as_deref())?;
    let plan = Plan::from_file_statements(g, &file.statements)
        .map_err(|e| input_err(format!("{name}: {e}")))?;
    Ok((file, plan))
}

/// Replays a loaded plan and checks its peak against `budget`, else the
/// budget the plan records: what `simulate` checks, shared with `hints`
/// so that a plan one refuses the other does too (hints used to be
/// written for plans that read a value before computing it, or that
/// overflow their budget). Returns the report and the limit it fits.
pub fn check_plan(
    g: &Graph,
    plan: &Path,
    file: &PlanFile,
    p: &Plan,
    device: Option<&crate::device::Device>,
    budget: Option<crate::units::Bytes>,
) -> anyhow::Result<(crate::schedule::SimReport, Option<crate::units::Bytes>)> {
    let rep = crate::schedule::simulate_on(g, p, device)
        .map_err(|e| input_err(format!("{}: {}", plan.display(), locate(plan, &e))))?;
    // A plan is made for a budget: the one asked for, else its own.
    let (limit, whose) = match budget {
        Some(b) => (Some(b), "the budget"),
        None => (
            file.budget.map(crate::units::Bytes),
            "the budget the plan records",
        ),
    };
    // Where the peak is reached, so that an edited plan says which of its
    // statements to look at, as every other rejection does.
    if let Some(b) = limit.filter(|&b| rep.peak > b) {
        // Then every statement is over it: where the peak is says nothing.
        if g.fixed_memory > b {
            return Err(input_err(format!(
                "{}: {whose} {} ({}) is less than the graph's fixed memory alone ({}), before any statement",
                plan.display(),
                b,
                b.human(),
                g.fixed_memory.human()
            )));
        }
        return Err(input_err(format!(
            "{}: peak {} exceeds {whose} {} ({}); the peak is first reached at {}",
            plan.display(),
            rep.peak,
            b,
            b.human(),
            statement_at(plan, rep.peak_statement)
        )));
    }
    Ok((rep, limit))
}
