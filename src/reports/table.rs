//! `remat report`: the paper's Table 2 from sweep CSVs. For each strategy,
//! how much more it costs than the optimal ILP at the budgets where both
//! have a plan (geometric mean of cost ratios, since ratios compose
//! multiplicatively), and the smallest budget at which it has a plan at all.

use crate::strategies;
use crate::units::Bytes;
use crate::workflows::sweep::Row;
use std::collections::{BTreeMap, HashMap};

/// The strategy every ratio is taken against.
pub const ILP: &str = "checkmate-ilp";

/// The reference when a sweep has no ILP rows: the same MILP with a tighter
/// linearisation, so the same optimum (large models are swept with it
/// alone, since the paper's form spends minutes in setup there).
pub const EXACT: &str = "remat-exact";

#[derive(Debug, Clone, PartialEq)]
pub struct Ratio {
    /// Geometric mean of cost / ILP cost.
    pub geomean: f64,
    pub max: f64,
    /// Budgets where both have a plan.
    pub budgets: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub struct StrategySummary {
    pub strategy: String,
    /// Budgets this strategy was run at.
    pub budgets: usize,
    /// Budgets at which it has a plan.
    pub feasible: usize,
    pub min_feasible_budget: Option<Bytes>,
    /// `None` when no budget has plans from both it and the ILP.
    pub vs_ilp: Option<Ratio>,
    /// No plan, and `not-applicable` at some budget.
    pub not_applicable: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ModelReport {
    pub model: String,
    /// [`ILP`], or [`EXACT`] when the sweep has no ILP plan.
    pub reference: &'static str,
    /// Distinct budgets across all strategies.
    pub budgets: usize,
    /// The reference's rows with a plan, and how many of those are proven
    /// optimal.
    pub ilp_plans: usize,
    pub ilp_optimal: usize,
    pub strategies: Vec<StrategySummary>,
    /// The ratios are of step times on a device, not of costs.
    pub timed: bool,
}

/// Who holds the rows that clash: two files, or one that mixes them.
fn holders(first: &str, second: &str) -> String {
    if first == second {
        format!("{first} holds")
    } else {
        format!("{first} and {second} hold")
    }
}

/// Why rows of several sweep CSVs cannot be reported together.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    /// One model name, two graphs (costs edited, a new batch size): its
    /// ratios would compare plans of different problems, a strategy even
    /// with itself.
    #[error("{files} rows of '{model}' solved on different graphs (fingerprints {a} and {b}); report each graph on its own")]
    GraphDiffers {
        model: String,
        /// "A and B hold", or "A holds" when one CSV mixes them.
        files: String,
        a: String,
        b: String,
    },
    /// Step times and plans on one device say nothing about another.
    #[error("{files} rows of '{model}' {a} and {b}; report each device on its own")]
    DeviceDiffers {
        model: String,
        files: String,
        a: String,
        b: String,
    },
    /// Two runs of one pair with different answers: which one the report
    /// should count is the user's call.
    #[error("{first} and {second} both hold a row of '{model}', {strategy} at {budget} bytes, with different results; report one of them")]
    Conflict {
        model: String,
        strategy: String,
        budget: Bytes,
        first: String,
        second: String,
    },
}

/// Rows of several sweep CSVs, ready for [`summarize`] and the plot.
#[derive(Debug, Clone, PartialEq)]
pub struct Merged {
    pub rows: Vec<Row>,
    /// Rows dropped because an identical one (same pair, same result) was
    /// read before: the same file given twice, or overlapping CSVs as
    /// `results/*.csv` may be.
    pub duplicates: usize,
}

/// Merges the rows of several CSVs (each with the name it is reported
/// by). Grouping by model name alone used to pair rows of different
/// graphs or devices, and to count a pair given twice twice; a repeated
/// pair with the same result is dropped, one with another result refused.
pub fn merge(sources: &[(String, Vec<Row>)]) -> Result<Merged, MergeError> {
    let fp = |f: Option<crate::graph::Fingerprint>| f.map_or("none".to_string(), |f| f.to_string());
    let on = |r: &Row| match (&r.device, r.device_fingerprint) {
        (_, None) => "without a device".to_string(),
        (Some(n), Some(f)) => format!("timed on device '{n}' (fingerprint {f})"),
        (None, Some(f)) => format!("timed on a device (fingerprint {f})"),
    };
    // Per model: the first row's graph and device, and the file it is in.
    let mut first: HashMap<&str, (&str, &Row)> = HashMap::new();
    // Per pair: the row kept, and the file it is in.
    let mut kept: HashMap<(&str, &str, Bytes), (&str, &Row)> = HashMap::new();
    let mut rows = Vec::new();
    let mut duplicates = 0;
    for (name, file_rows) in sources {
        for r in file_rows {
            let (f0, r0) = *first.entry(r.model.as_str()).or_insert((name.as_str(), r));
            if r.graph != r0.graph {
                return Err(MergeError::GraphDiffers {
                    model: r.model.clone(),
                    files: holders(f0, name),
                    a: fp(r0.graph),
                    b: fp(r.graph),
                });
            }
            if r.device_fingerprint != r0.device_fingerprint {
                return Err(MergeError::DeviceDiffers {
                    model: r.model.clone(),
                    files: holders(f0, name),
                    a: on(r0),
                    b: on(r),
                });
            }
            let key = (r.model.as_str(), r.strategy.as_str(), r.budget);
            match kept.get(&key) {
                None => {
                    kept.insert(key, (name.as_str(), r));
                    rows.push(r.clone());
                }
                // Solve times differ between two runs of the same pair; the
                // plan's figures, its step time on the device included, do
                // not (rows of one step time and another were merged as
                // one, and the report counted whichever came first).
                Some((_, k)) if same_result(k, r) => {
                    duplicates += 1;
                }
                Some((f, _)) => {
                    return Err(MergeError::Conflict {
                        model: r.model.clone(),
                        strategy: r.strategy.clone(),
                        budget: r.budget,
                        first: f.to_string(),
                        second: name.clone(),
                    })
                }
            }
        }
    }
    Ok(Merged { rows, duplicates })
}

/// Two rows of one pair that answer alike: same status, cost, peak and
/// time columns. The solve time, the LP bound and the gap are not the
/// plan's own (a run with `--no-lp-bound` leaves the bound empty).
fn same_result(a: &Row, b: &Row) -> bool {
    (&a.status, a.cost, a.peak, &a.timing) == (&b.status, b.cost, b.peak, &b.timing)
}

/// Summaries per model (models by name; strategies in registry order).
pub fn summarize(rows: &[Row]) -> Vec<ModelReport> {
    let order: HashMap<&str, usize> = strategies::names()
        .into_iter()
        .enumerate()
        .map(|(i, n)| (n, i))
        .collect();
    let mut by_model: BTreeMap<&str, Vec<&Row>> = BTreeMap::new();
    for r in rows {
        by_model.entry(r.model.as_str()).or_default().push(r);
    }
    by_model
        .into_iter()
        .map(|(model, rows)| {
            // Rows timed on a device compare step times: a plan that
            // offloads computes no more than checkpoint-all, and its cost
            // ratio (0.998 for offload-all at 3.25x the step) said nothing
            // of its stalls.
            let timed = rows.iter().any(|r| r.timing.is_some());
            let metric = |r: &Row| r.compared(timed).0;
            let plans_of = |name: &str| -> HashMap<Bytes, f64> {
                rows.iter()
                    .filter(|r| r.strategy == name)
                    .filter_map(|r| Some((r.budget, metric(r)?)))
                    .collect()
            };
            let (reference, ilp) = match plans_of(ILP) {
                p if p.is_empty() => (EXACT, plans_of(EXACT)),
                p => (ILP, p),
            };
            let mut names: Vec<&str> = rows.iter().map(|r| r.strategy.as_str()).collect();
            names.sort_by_key(|n| (order.get(n).copied().unwrap_or(usize::MAX), *n));
            names.dedup();
            let strategies = names
                .into_iter()
                .map(|name| {
                    let mine: Vec<&&Row> = rows.iter().filter(|r| r.strategy == name).collect();
                    let feasible: Vec<&&Row> =
                        mine.iter().copied().filter(|r| r.feasible()).collect();
                    let ratios: Vec<f64> = feasible
                        .iter()
                        .filter_map(|r| {
                            let base = *ilp.get(&r.budget)?;
                            let c = metric(r)?;
                            if base > 0.0 {
                                // 1e300 over 5e-324 is no ratio to print
                                // ("inf" in the table).
                                Some(c / base).filter(|r| r.is_finite())
                            } else if c == 0.0 {
                                Some(1.0)
                            } else {
                                None
                            }
                        })
                        .collect();
                    let vs_ilp = (!ratios.is_empty()).then(|| Ratio {
                        geomean: (ratios.iter().map(|r| r.ln()).sum::<f64>() / ratios.len() as f64)
                            .exp(),
                        max: ratios.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                        budgets: ratios.len(),
                    });
                    StrategySummary {
                        strategy: name.to_string(),
                        budgets: mine.len(),
                        feasible: feasible.len(),
                        min_feasible_budget: feasible.iter().map(|r| r.budget).min(),
                        vs_ilp,
                        not_applicable: feasible.is_empty()
                            && mine
                                .iter()
                                .any(|r| r.status == crate::workflows::sweep::NOT_APPLICABLE),
                    }
                })
                .collect();
            let mut budgets: Vec<Bytes> = rows.iter().map(|r| r.budget).collect();
            budgets.sort_unstable();
            budgets.dedup();
            ModelReport {
                model: model.to_string(),
                reference,
                budgets: budgets.len(),
                ilp_plans: ilp.len(),
                ilp_optimal: rows
                    .iter()
                    .filter(|r| r.strategy == reference && r.status == "optimal")
                    .count(),
                strategies,
                timed,
            }
        })
        .collect()
}

/// Markdown tables, one per model, readable in a terminal and pasteable
/// into a README.
pub fn render(reports: &[ModelReport]) -> String {
    let mut s = String::new();
    for m in reports {
        s.push_str(&format!("## {} ({} budgets)\n\n", m.model, m.budgets));
        let reference = m.reference;
        if m.ilp_plans == 0 {
            s.push_str(&format!(
                "No {ILP} or {EXACT} plans for this model: cost ratios need one of them (run `remat sweep` with --strategies {EXACT}).\n\n"
            ));
        } else {
            if reference != ILP {
                s.push_str(&format!(
                    "No {ILP} rows: the ratios are against {reference}, which solves the same MILP.\n\n"
                ));
            }
            if m.ilp_optimal < m.ilp_plans {
                s.push_str(&format!(
                    "{reference} is proven optimal at {} of its {} budgets with a plan; elsewhere it is the best plan the time limit allowed, so ratios below 1 can occur.\n\n",
                    m.ilp_optimal, m.ilp_plans
                ));
            }
        }
        if m.timed && m.ilp_plans > 0 {
            s.push_str(&format!(
                "Timed on a device: the ratios are of step times, against {reference}'s recompute-only plans, so plans that move values to the slow tier can be below 1.\n\n"
            ));
        }
        let what = if m.timed {
            "step / ILP step"
        } else {
            "cost / ILP cost"
        };
        s.push_str(&format!("| strategy | plans | smallest feasible budget | {what} (geomean) | worst | budgets compared |\n"));
        s.push_str("|---|---:|---:|---:|---:|---:|\n");
        for st in &m.strategies {
            let (geo, worst, n) = match &st.vs_ilp {
                Some(r) => (
                    format!("{:.3}", r.geomean),
                    format!("{:.3}", r.max),
                    r.budgets.to_string(),
                ),
                None => ("–".into(), "–".into(), "0".into()),
            };
            let min = match (st.not_applicable, st.min_feasible_budget) {
                (true, _) => "not applicable".to_string(),
                (false, Some(b)) => b.human(),
                (false, None) => "none".to_string(),
            };
            s.push_str(&format!(
                "| {} | {}/{} | {} | {} | {} | {} |\n",
                st.strategy, st.feasible, st.budgets, min, geo, worst, n
            ));
        }
        s.push('\n');
    }
    s
}

/// The summary lines of a timed plan, shared by `solve` and `simulate`:
/// step time with its overhead against computing every node once from fast
/// memory, and what the copies cost.
pub fn timing_lines(t: &crate::schedule::Timing, all_fast: crate::units::Seconds) -> String {
    let overhead = if all_fast.get() > 0.0 {
        let pct = (t.step.get() / all_fast.get() - 1.0) * 100.0;
        // A million percent and up in full is a line of digits.
        if pct.abs() >= 1e6 {
            format!("{pct:+.3e}%")
        } else {
            format!("{pct:+.2}%")
        }
    } else {
        "n/a".into()
    };
    format!(
        "device           {}\n\
         step time        {} ({overhead} vs all-fast {})\n\
         compute / stall  {} / {}\n\
         bytes moved      {} to slow, {} to fast ({} copies)\n\
         slow-tier peak   {} ({} bytes)\n",
        t.device,
        t.step,
        all_fast,
        t.compute,
        t.stall,
        t.bytes_to_slow.human(),
        t.bytes_to_fast.human(),
        t.copies,
        t.slow_peak.human(),
        t.slow_peak
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(strategy: &str, budget: u64, cost: Option<f64>) -> Row {
        Row {
            model: "m".into(),
            strategy: strategy.into(),
            budget: Bytes(budget),
            status: if cost.is_some() {
                "optimal"
            } else {
                "infeasible"
            }
            .into(),
            cost,
            overhead: cost.map(|c| c / 10.0),
            peak: cost.map(|_| Bytes(budget)),
            lp_bound: None,
            gap: None,
            solve_seconds: Some(0.0),
            graph: None,
            device: None,
            device_fingerprint: None,
            timing: None,
        }
    }

    /// On a device the ratios are of step times: offload-all's cost is
    /// checkpoint-all's (0.998 of the ILP's here) while its step is 3.25x.
    #[test]
    fn timed_rows_compare_step_times() {
        let timed = |strategy: &str, cost: f64, step: f64| Row {
            timing: Some(crate::workflows::sweep::RowTiming {
                step_seconds: step,
                step_overhead: step,
                stall_seconds: 0.0,
                bytes_to_slow: Bytes(0),
                bytes_to_fast: Bytes(0),
                slow_peak: Bytes(0),
            }),
            ..row(strategy, 10, Some(cost))
        };
        let rows = [timed(ILP, 20.04, 1.002), timed("offload-all", 20.0, 3.25)];
        let m = &summarize(&rows)[0];
        assert!(m.timed);
        let off = m
            .strategies
            .iter()
            .find(|s| s.strategy == "offload-all")
            .unwrap();
        let r = off.vs_ilp.as_ref().unwrap();
        assert!((r.geomean - 3.25 / 1.002).abs() < 1e-12, "{}", r.geomean);
        assert!(render(std::slice::from_ref(m)).contains("step / ILP step"));
    }

    #[test]
    fn merge_counts_a_repeated_pair_once_and_refuses_other_graphs() {
        let a = vec![row(ILP, 10, Some(20.0)), row("remat-fast", 10, Some(21.0))];
        let m = merge(&[("a".into(), a.clone()), ("b".into(), a.clone())]).unwrap();
        assert_eq!((m.rows.len(), m.duplicates), (2, 2));
        let mut other = a.clone();
        other[1].cost = Some(22.0);
        let e = merge(&[("a".into(), a.clone()), ("c".into(), other)]).unwrap_err();
        assert!(matches!(e, MergeError::Conflict { .. }), "{e}");
        let mut edited = a.clone();
        for r in &mut edited {
            r.graph = Some(crate::graph::Fingerprint(7));
        }
        let e = merge(&[("a".into(), a.clone()), ("e".into(), edited)]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "a and e hold rows of 'm' solved on different graphs (fingerprints none and 0000000000000007); report each graph on its own"
        );
        // One CSV that mixes two graphs is named once.
        let mut mixed = a.clone();
        mixed[1].graph = Some(crate::graph::Fingerprint(7));
        let e = merge(&[("a".into(), mixed)]).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("a holds rows of 'm' solved on different graphs"),
            "{e}"
        );
    }

    /// Two runs of a pair with one cost and peak but another step time
    /// (an edited device, a changed simulator) are two results: merged as
    /// one, the report counted whichever file came first.
    #[test]
    fn merge_refuses_a_pair_with_another_step_time() {
        let timed = |step: f64| {
            let mut r = row("offload-all", 10, Some(20.0));
            r.timing = Some(crate::workflows::sweep::RowTiming {
                step_seconds: step,
                step_overhead: step / 0.1,
                stall_seconds: 0.0,
                bytes_to_slow: Bytes(5),
                bytes_to_fast: Bytes(5),
                slow_peak: Bytes(5),
            });
            r
        };
        let (a, b) = (vec![timed(0.13)], vec![timed(0.26)]);
        for (x, y) in [(&a, &b), (&b, &a)] {
            let e = merge(&[("x".into(), x.clone()), ("y".into(), y.clone())]).unwrap_err();
            assert!(matches!(e, MergeError::Conflict { .. }), "{e}");
        }
        // The same step time, another solve time: one result.
        let mut again = a.clone();
        again[0].solve_seconds = Some(9.0);
        let m = merge(&[("x".into(), a.clone()), ("z".into(), again)]).unwrap();
        assert_eq!((m.rows.len(), m.duplicates), (1, 1));
        assert_eq!(m.rows[0].timing.as_ref().unwrap().step_seconds, 0.13);
    }

    #[test]
    fn geomean_over_budgets_where_both_have_plans() {
        let rows = vec![
            row(ILP, 100, Some(10.0)),
            row(ILP, 80, Some(12.0)),
            row(ILP, 60, Some(15.0)),
            row("chen", 100, Some(20.0)), // 2.0
            row("chen", 80, Some(15.0)),  // 1.25... geomean with 2 is sqrt(2.5)
            row("chen", 60, None),
            row("only-heuristic", 50, Some(30.0)),
        ];
        let r = summarize(&rows);
        assert_eq!(r.len(), 1);
        let m = &r[0];
        assert_eq!((m.budgets, m.ilp_plans, m.ilp_optimal), (4, 3, 3));
        let chen = m.strategies.iter().find(|s| s.strategy == "chen").unwrap();
        let v = chen.vs_ilp.as_ref().unwrap();
        assert!((v.geomean - 2.5f64.sqrt()).abs() < 1e-12);
        assert_eq!((v.max, v.budgets), (2.0, 2));
        assert_eq!(chen.min_feasible_budget, Some(Bytes(80)));
        assert_eq!((chen.feasible, chen.budgets), (2, 3));
        let h = m
            .strategies
            .iter()
            .find(|s| s.strategy == "only-heuristic")
            .unwrap();
        assert!(h.vs_ilp.is_none());
        let ilp = m.strategies.iter().find(|s| s.strategy == ILP).unwrap();
        assert_eq!(ilp.vs_ilp.as_ref().unwrap().geomean, 1.0);
        let text = render(&r);
        assert!(
            text.contains("| chen | 2/3 | 80 B | 1.581 | 2.000 | 2 |"),
            "{text}"
        );
    }

    #[test]
    fn missing_ilp_is_explained_not_fatal() {
        let rows = vec![row("chen", 100, Some(20.0))];
        let text = render(&summarize(&rows));
        assert!(
            text.contains("No checkmate-ilp or remat-exact plans"),
            "{text}"
        );
        assert!(
            text.contains("| chen | 1/1 | 100 B | – | – | 0 |"),
            "{text}"
        );
    }

    #[test]
    fn remat_exact_stands_in_for_a_missing_ilp() {
        let rows = vec![
            row(EXACT, 100, Some(10.0)),
            row(EXACT, 80, Some(16.0)),
            row("chen", 100, Some(20.0)),
            row("chen", 80, Some(20.0)),
        ];
        let r = summarize(&rows);
        assert_eq!(r[0].reference, EXACT);
        let text = render(&r);
        assert!(
            text.contains("the ratios are against remat-exact"),
            "{text}"
        );
        // (2.0 × 1.25) ^ ½
        assert!(
            text.contains("| chen | 2/2 | 80 B | 1.581 | 2.000 | 2 |"),
            "{text}"
        );
        // With ILP rows too, the ILP is the reference.
        let mut rows = rows;
        rows.push(row(ILP, 100, Some(10.0)));
        assert_eq!(summarize(&rows)[0].reference, ILP);
    }
}
