//! The `remat` command line: a thin clap layer over the library.

use anyhow::Result;
use clap::{Parser, Subcommand};
use remat::budgets::BudgetList;
use remat::cli::{
    exit_code, input_err, load_device, load_graph, load_plan, parse_budget, write_atomic,
};
use remat::graph::analysis;
use remat::maxbatch::{self, CostRule, MaxBatchConfig};
use remat::schedule::simulate_on;
use remat::solve;
use remat::solver::Backend;
use remat::strategies::{self, SolveOptions};
use remat::sweep::{self, select_strategies, SweepConfig};
use remat::units::{BudgetSpec, Bytes};
use remat::{plot, report};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Parser)]
#[command(
    name = "remat",
    version,
    about = "Find the execution plan with the least extra compute that trains a network within a memory budget"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Args, Clone)]
struct SolverArgs {
    /// Stop the solver after this many seconds and return the best plan so far.
    #[arg(long, default_value_t = 600.0)]
    time_limit: f64,
    /// Relative MIP gap at which the solver may stop and call the plan optimal.
    #[arg(long, default_value_t = 1e-4)]
    gap: f64,
    /// Solver threads.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// MILP backend: highs or cbc.
    #[arg(long, default_value_t = Backend::default())]
    solver: Backend,
}

impl SolverArgs {
    fn options(&self) -> SolveOptions {
        SolveOptions {
            time_limit: Duration::from_secs_f64(self.time_limit.max(0.0)),
            gap: self.gap,
            threads: self.threads.max(1),
            backend: self.solver,
            ..SolveOptions::default()
        }
    }
}

#[derive(Subcommand)]
enum Command {
    /// Print node and edge counts, costs, the checkpoint-all peak and the smallest feasible budget.
    Inspect {
        /// Graph file (YAML or JSON).
        model: PathBuf,
    },
    /// Write the explicit training graph (after backward generation and ordering).
    Graph {
        /// Graph file (YAML or JSON).
        model: PathBuf,
        /// Output file (YAML).
        #[arg(short, long)]
        output: PathBuf,
    },
    /// Find a plan within a memory budget and print a summary.
    Solve {
        /// Graph file (YAML or JSON).
        model: PathBuf,
        /// Memory budget: bytes, KB/MB/GB, KiB/MiB/GiB, or NN% of the checkpoint-all peak.
        #[arg(short, long)]
        budget: String,
        /// Strategy name (see `remat strategies`). The default proves its
        /// answer optimal when it can; `remat-fast` answers within a minute.
        #[arg(short, long, default_value = "remat-exact")]
        strategy: String,
        /// Write the plan: JSON if the name ends in .json, text otherwise.
        #[arg(long)]
        plan: Option<PathBuf>,
        /// Device file (devices/*.yaml): time the plan on it and report its step time.
        #[arg(long)]
        device: Option<PathBuf>,
        #[command(flatten)]
        solver: SolverArgs,
    },
    /// Check a plan file against a graph and report its cost and peak.
    Simulate {
        /// Graph file the plan was made for.
        model: PathBuf,
        /// Plan JSON file.
        plan: PathBuf,
        /// Also check the peak against this budget.
        #[arg(short, long)]
        budget: Option<String>,
        /// Device file (devices/*.yaml): replay the plan timed on it (needed for transfers).
        #[arg(long)]
        device: Option<PathBuf>,
    },
    /// Write a plan's CachedArrays-style hint stream (will_read, will_write, archive, retire) as JSON.
    Hints {
        /// Plan JSON file.
        plan: PathBuf,
        /// Output JSON file.
        #[arg(short, long)]
        output: PathBuf,
    },
    /// List the available strategies.
    Strategies,
    /// Solve every (strategy, budget) pair and write one CSV row per pair as it finishes;
    /// re-running resumes.
    Sweep {
        /// Graph file (YAML or JSON).
        model: PathBuf,
        /// Budget file (YAML); default budgets/<model file stem>.yaml if it exists, else
        /// 20 budgets from the smallest feasible one to the checkpoint-all peak.
        #[arg(long)]
        budgets: Option<PathBuf>,
        /// Comma-separated strategy names, or `all`.
        #[arg(long, default_value = "all")]
        strategies: String,
        /// Output CSV (appended to; rows already there are skipped).
        #[arg(short, long)]
        output: PathBuf,
        /// Also plot overhead vs budget (.svg or .png).
        #[arg(long)]
        plot: Option<PathBuf>,
        /// Pairs solved in parallel (default: all cores).
        #[arg(long)]
        jobs: Option<usize>,
        /// No progress bar or notes.
        #[arg(long)]
        quiet: bool,
        /// Write every plan as DIR/<strategy>-<budget_bytes>.json.
        #[arg(long)]
        plans: Option<PathBuf>,
        /// Write 0 for solve_seconds, so that the CSV is reproducible byte for byte.
        #[arg(long, hide = true)]
        zero_timings: bool,
        /// Leave the lp_bound and gap columns empty instead of solving the
        /// LP relaxation once per budget (it is slow on very large graphs).
        #[arg(long)]
        no_lp_bound: bool,
        #[command(flatten)]
        solver: SolverArgs,
    },
    /// Plot overhead vs budget from a sweep CSV (.svg or .png).
    Plot {
        /// Sweep CSV.
        csv: PathBuf,
        /// Output image (.svg or .png).
        #[arg(short, long)]
        output: PathBuf,
        /// Model to plot, if the CSV has several.
        #[arg(long)]
        model: Option<String>,
    },
    /// Plot the memory in use over a plan's statements against the budget, recomputations marked.
    PlotPlan {
        /// Graph file the plan was made for.
        model: PathBuf,
        /// Plan JSON file.
        plan: PathBuf,
        /// Output image (.svg or .png).
        #[arg(short, long)]
        output: PathBuf,
        /// Budget line (default: the budget recorded in the plan file).
        #[arg(short, long)]
        budget: Option<String>,
    },
    /// Summarize sweep CSVs: cost relative to the ILP per strategy, and the smallest feasible budget.
    Report {
        /// Sweep CSV files.
        #[arg(required = true)]
        csv: Vec<PathBuf>,
        /// Also write the report (Markdown) to this file.
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// Find the largest batch each strategy trains within a memory size at bounded overhead.
    MaxBatch {
        /// Graph file (YAML or JSON); costs and activation memory scale from its batch_size.
        model: PathBuf,
        /// Device memory, e.g. 16GB or 16GiB.
        #[arg(long)]
        memory: String,
        /// Comma-separated strategy names, or `all` (checkpoint-all is always included).
        #[arg(long, default_value = "all")]
        strategies: String,
        /// Allow cost up to F x checkpoint-all cost, instead of one extra forward pass.
        #[arg(long)]
        max_overhead: Option<f64>,
        /// Largest batch tried.
        #[arg(long, default_value_t = 1 << 24)]
        max_batch: u32,
        /// Write the results as CSV (rows are kept; re-running skips them).
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// Strategies searched in parallel (default: all cores).
        #[arg(long)]
        jobs: Option<usize>,
        /// No progress bar.
        #[arg(long)]
        quiet: bool,
        #[command(flatten)]
        solver: SolverArgs,
    },
    /// Generate model graphs: the paper's networks, GPT-2, synthetic families; --all regenerates models/ and budgets/.
    Zoo(remat::zoo::command::ZooArgs),
    /// Every prior-work heuristic at every knob setting: simulated cost and peak (trade-off curves).
    Baselines {
        /// Graph file (YAML or JSON).
        model: PathBuf,
        /// Also write every setting as CSV.
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// List every setting, not only each strategy's trade-off (Pareto) points.
        #[arg(long)]
        all: bool,
    },
}

fn main() -> ExitCode {
    // `remat inspect m.yaml | head` closes our stdout early: die quietly of
    // SIGPIPE like any Unix filter, instead of panicking in `println!`.
    #[cfg(unix)]
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(exit_code(&e))
        }
    }
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Inspect { model } => {
            let g = load_graph(&model)?;
            let s = analysis::summarize(&g);
            println!("model            {}", g.name);
            println!(
                "nodes            {} ({} forward, {} backward), {} edges",
                s.nodes, s.forward, s.backward, s.edges
            );
            println!("batch size       {}", g.batch_size);
            let unit = g.cost_unit.as_deref().unwrap_or("units");
            println!(
                "total cost       {} {unit} (forward {})",
                s.total_cost, s.forward_cost
            );
            println!(
                "fixed memory     {} ({} bytes)",
                s.fixed_memory.human(),
                s.fixed_memory
            );
            println!(
                "checkpoint-all   peak {} ({} bytes)",
                s.checkpoint_all_peak.human(),
                s.checkpoint_all_peak
            );
            println!(
                "smallest budget  {} ({} bytes): no plan fits below this",
                s.min_budget.human(),
                s.min_budget
            );
        }
        Command::Graph { model, output } => {
            let g = load_graph(&model)?;
            let text = g.to_file().to_yaml(Some(&format!(
                "Training graph of {} generated by remat from {}",
                g.name,
                model.display()
            )));
            write_atomic(&output, text.as_bytes())?;
            eprintln!(
                "wrote {} ({} nodes, {} edges)",
                output.display(),
                g.len(),
                g.num_edges()
            );
        }
        Command::Solve {
            model,
            budget,
            strategy,
            plan,
            device,
            solver,
        } => {
            let g = load_graph(&model)?;
            let budget = parse_budget(&g, &budget)?;
            let mut opts = solver.options();
            opts.device = device
                .as_deref()
                .map(load_device)
                .transpose()?
                .map(Into::into);
            let strat = strategies::by_name(&strategy).ok_or_else(|| {
                input_err(format!(
                    "unknown strategy '{strategy}'; available: {}",
                    strategies::names().join(", ")
                ))
            })?;
            let out = match solve::run(&g, strat.as_ref(), budget, &opts) {
                Err(e @ solve::SolveError::BelowMinimum { .. }) => {
                    return Err(input_err(e.to_string()))
                }
                r => r?,
            };
            print_summary(&g, &out);
            if let (Some(t), Some(d)) = (out.timing(), &opts.device) {
                print!("{}", remat::report::timing_lines(t, d.all_fast_step(&g)));
            }
            if let Some(path) = plan {
                let Some(pf) = out.plan_file(&g) else {
                    return Err(anyhow::anyhow!("no plan to write: status {}", out.status));
                };
                let bytes = if path.extension().is_some_and(|e| e == "json") {
                    serde_json::to_vec_pretty(&pf)?
                } else {
                    out.plan
                        .as_ref()
                        .map(|p| p.to_text(&g))
                        .unwrap_or_default()
                        .into_bytes()
                };
                write_atomic(&path, &bytes)?;
                println!("plan written     {}", path.display());
            }
        }
        Command::Simulate {
            model,
            plan,
            budget,
            device,
        } => {
            let g = load_graph(&model)?;
            let (file, p) = load_plan(&g, &plan)?;
            let device = device.as_deref().map(load_device).transpose()?;
            let rep = simulate_on(&g, &p, device.as_ref())
                .map_err(|e| input_err(format!("{}: {e}", plan.display())))?;
            println!(
                "plan             {} ({} statements)",
                plan.display(),
                p.statements.len()
            );
            println!(
                "computations     {} for {} nodes",
                rep.computations,
                g.len()
            );
            println!(
                "cost             {} ({:.4}x checkpoint-all)",
                rep.cost,
                rep.cost / g.total_cost().max(f64::MIN_POSITIVE)
            );
            println!("peak memory      {} ({} bytes)", rep.peak.human(), rep.peak);
            if let (Some(t), Some(d)) = (&rep.timing, &device) {
                print!("{}", remat::report::timing_lines(t, d.all_fast_step(&g)));
            }
            if (rep.cost - file.cost).abs() > 1e-6 * rep.cost.abs().max(1.0)
                || rep.peak.get() != file.peak_memory
            {
                println!(
                    "note             the file claims cost {} and peak {}; the figures above are the simulator's",
                    file.cost, file.peak_memory
                );
            }
            if let Some(b) = budget {
                let b = parse_budget(&g, &b)?;
                if rep.peak > b {
                    return Err(input_err(format!(
                        "{}: peak {} exceeds the budget {}",
                        plan.display(),
                        rep.peak,
                        b
                    )));
                }
                println!("budget           {} ({} bytes): fits", b.human(), b);
            }
        }
        Command::Hints { plan, output } => {
            let name = plan.display().to_string();
            let text = std::fs::read_to_string(&plan)
                .map_err(|e| input_err(format!("{name}: cannot read: {e}")))?;
            let file: remat::schedule::PlanFile = serde_json::from_str(&text)
                .map_err(|e| input_err(format!("{name}: not a plan JSON file: {e}")))?;
            let h = remat::hints::hints(&file).map_err(|e| input_err(format!("{name}: {e}")))?;
            write_atomic(&output, &serde_json::to_vec_pretty(&h)?)?;
            eprintln!(
                "wrote {} ({} steps, {} objects)",
                output.display(),
                h.steps.len(),
                h.objects.len()
            );
        }
        Command::Zoo(args) => remat::zoo::command::run(&args)?,
        Command::Baselines { model, output, all } => {
            let g = load_graph(&model)?;
            let bar = indicatif::ProgressBar::new(0).with_style(
                indicatif::ProgressStyle::with_template("{msg:15} [{bar:30}] {pos}/{len}")
                    .expect("valid template"),
            );
            let curves = remat::baselines::curves(&g, &mut |name, done, total| {
                bar.set_message(name.to_string());
                bar.set_length(total as u64);
                bar.set_position(done as u64);
            })?;
            bar.finish_and_clear();
            print!("{}", remat::baselines::to_table(&g, &curves, all));
            if let Some(path) = output {
                write_atomic(&path, &remat::baselines::to_csv(&g, &curves)?)?;
                eprintln!("wrote {}", path.display());
            }
        }
        Command::Strategies => {
            for s in strategies::all() {
                println!("{:<18} {}", s.name(), s.describe());
            }
        }
        Command::Sweep {
            model,
            budgets,
            strategies,
            output,
            plot,
            jobs,
            quiet,
            plans,
            zero_timings,
            no_lp_bound,
            solver,
        } => {
            let g = load_graph(&model)?;
            let file = budgets.or_else(|| remat::budgets::default_file(&model));
            let list = match &file {
                Some(p) => BudgetList::load(p).map_err(|e| input_err(e.to_string()))?,
                None => BudgetList::default_range(),
            };
            let mut cfg = SweepConfig::new(list.resolve(&g), output.clone());
            cfg.strategies = select_strategies(&strategies).map_err(input_err)?;
            cfg.jobs = jobs.unwrap_or_else(sweep::default_jobs).max(1);
            cfg.opts = solver.options();
            cfg.quiet = quiet;
            cfg.plans_dir = plans;
            cfg.zero_timings = zero_timings;
            if !no_lp_bound {
                cfg.lp_bound = Some(std::sync::Arc::new(strategies::lp_bound::lp_lower_bound));
            }
            if !quiet {
                eprintln!(
                    "sweep {}: {} budgets ({}) x {} strategies",
                    g.name,
                    cfg.budgets.len(),
                    file.as_ref()
                        .map(|p| p.display().to_string())
                        .unwrap_or_else(|| "default range".into()),
                    cfg.strategies.len()
                );
            }
            let summary = sweep::run(&g, &cfg).map_err(|e| match e {
                sweep::SweepError::Log(remat::resultlog::LogError::Format { .. }) => {
                    input_err(e.to_string())
                }
                e => e.into(),
            })?;
            if let Some(p) = &plot {
                plot::plot_sweep(&summary.rows, &g.name, p)?;
            }
            if !quiet {
                eprintln!(
                    "wrote {} ({} new rows, {} already there){}",
                    output.display(),
                    summary.solved,
                    summary.resumed,
                    plot.map(|p| format!(", plot {}", p.display()))
                        .unwrap_or_default()
                );
            }
            if !summary.failures.is_empty() {
                anyhow::bail!(
                    "{} pairs failed and have no row (re-run to retry them):\n  {}",
                    summary.failures.len(),
                    summary.failures.join("\n  ")
                );
            }
        }
        Command::Plot { csv, output, model } => {
            let rows = sweep::read_csv(&csv).map_err(|e| input_err(e.to_string()))?;
            let model = match model {
                Some(m) => m,
                None => {
                    let mut names: Vec<&str> = rows.iter().map(|r| r.model.as_str()).collect();
                    names.dedup();
                    match names.as_slice() {
                        [one] => one.to_string(),
                        [] => return Err(input_err(format!("{}: no rows", csv.display()))),
                        _ => {
                            return Err(input_err(format!(
                                "{} has several models; pick one with --model",
                                csv.display()
                            )))
                        }
                    }
                }
            };
            plot::plot_sweep(&rows, &model, &output).map_err(|e| input_err(e.to_string()))?;
            eprintln!("wrote {}", output.display());
        }
        Command::PlotPlan {
            model,
            plan,
            output,
            budget,
        } => {
            let g = load_graph(&model)?;
            let (file, p) = load_plan(&g, &plan)?;
            let budget = match budget {
                Some(b) => Some(parse_budget(&g, &b)?),
                None => file.budget.map(Bytes),
            };
            let trace =
                plot::plot_plan(&g, &p, budget, &file.strategy, &output).map_err(|e| match e {
                    plot::PlotError::Plan(_) | plot::PlotError::Format { .. } => {
                        input_err(format!("{}: {e}", plan.display()))
                    }
                    e => e.into(),
                })?;
            eprintln!(
                "wrote {} ({} statements, {} recomputations)",
                output.display(),
                trace.live.len(),
                trace.recomputations.len()
            );
        }
        Command::Report { csv, output } => {
            let mut rows = Vec::new();
            for p in &csv {
                rows.extend(sweep::read_csv(p).map_err(|e| input_err(e.to_string()))?);
            }
            let text = report::render(&report::summarize(&rows));
            print!("{text}");
            if let Some(o) = output {
                write_atomic(&o, text.as_bytes())?;
            }
        }
        Command::MaxBatch {
            model,
            memory,
            strategies,
            max_overhead,
            max_batch,
            output,
            jobs,
            quiet,
            solver,
        } => {
            let g = load_graph(&model)?;
            let memory = match BudgetSpec::parse(&memory) {
                Ok(BudgetSpec::Absolute(b)) => b,
                Ok(_) => {
                    return Err(input_err(
                        "--memory must be a size such as 16GB, not a percentage",
                    ))
                }
                Err(e) => return Err(input_err(format!("--memory: {e}"))),
            };
            let mut cfg = MaxBatchConfig::new(memory);
            cfg.strategies = select_strategies(&strategies).map_err(input_err)?;
            if let Some(f) = max_overhead {
                if !(f.is_finite() && f > 0.0) {
                    return Err(input_err("--max-overhead must be a positive number"));
                }
                cfg.rule = CostRule::MaxOverhead(f);
            }
            cfg.max_batch = max_batch.max(1);
            cfg.opts = solver.options();
            cfg.jobs = jobs.unwrap_or_else(sweep::default_jobs).max(1);
            cfg.quiet = quiet;
            cfg.output = output.clone();
            let rows = maxbatch::run(&g, &cfg).map_err(|e| match e {
                maxbatch::MaxBatchError::Log(remat::resultlog::LogError::Format { .. }) => {
                    input_err(e.to_string())
                }
                e => e.into(),
            })?;
            println!(
                "{} at {} ({} bytes), cost rule {}",
                g.name,
                memory.human(),
                memory,
                cfg.rule.label()
            );
            print!("{}", maxbatch::render(&rows));
            if let Some(o) = output {
                eprintln!("wrote {}", o.display());
            }
        }
    }
    Ok(())
}

fn print_summary(g: &remat::Graph, out: &solve::Outcome) {
    println!("model            {} ({} nodes)", g.name, g.len());
    println!("strategy         {}", out.strategy);
    println!(
        "budget           {} ({} bytes)",
        out.budget.human(),
        out.budget
    );
    println!("status           {}", out.status);
    if let Some(sim) = &out.sim {
        let base = g.total_cost();
        println!(
            "cost             {} ({:.4}x checkpoint-all, {} recomputations)",
            sim.cost,
            if base > 0.0 { sim.cost / base } else { 1.0 },
            sim.computations - g.len()
        );
        println!("peak memory      {} ({} bytes)", sim.peak.human(), sim.peak);
    }
    if let Some(lb) = out.lower_bound {
        let ratio = out.cost().map(|c| if lb > 0.0 { c / lb } else { 1.0 });
        match ratio {
            Some(r) => println!(
                "lower bound      {lb} (plan/bound = {r:.4}, gap {:.3}%)",
                out.gap().unwrap_or(0.0) * 100.0
            ),
            None => println!("lower bound      {lb}"),
        }
    }
    if let Some(d) = &out.detail {
        println!("detail           {d}");
    }
    println!("solve time       {:.2} s", out.seconds);
}
