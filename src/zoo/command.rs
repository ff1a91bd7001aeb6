//! `remat zoo`: the command-line face of the zoo (main.rs only forwards).

use super::networks::{self, Input};
use super::ops::{self, OpsChain, OpsTransformer};
use super::synthetic::{self, Dist, RandomDag, ResidualChain};
use super::{committed_files, ZooError, REGENERATE};
use crate::cli::{input_err, write_atomic};
use crate::graph::{Graph, GraphFile};
use std::path::{Path, PathBuf};

#[derive(clap::Args, Debug, Clone, Default)]
pub struct ZooArgs {
    /// A network (see --list) or a synthetic family: linear, random, residual,
    /// ops-transformer, ops-chain.
    pub name: Option<String>,
    /// Regenerate every file in models/ and budgets/ (under --dir).
    #[arg(long, conflicts_with_all = ["name", "list"])]
    pub all: bool,
    /// With --all: compare instead of writing, and fail if any file differs.
    #[arg(long, requires = "all")]
    pub check: bool,
    /// With --all: the repository root holding models/ and budgets/.
    #[arg(long, default_value = ".")]
    pub dir: PathBuf,
    /// List the networks with their default batch and input.
    #[arg(long, conflicts_with = "name")]
    pub list: bool,
    /// Output file (YAML); standard output if left out.
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Batch size (networks, default: the paper's; ops-transformer, default 8).
    #[arg(long)]
    pub batch: Option<u32>,
    /// Input resolution HxW (image networks).
    #[arg(long)]
    pub resolution: Option<String>,
    /// Sequence length in tokens (gpt2, ops-transformer).
    #[arg(long)]
    pub seq_len: Option<u64>,
    /// linear, ops-transformer, ops-chain: number of layers (blocks), 1 to 10^6
    /// (ops-transformer: at most 416,666, 10^7 forward nodes).
    #[arg(long, value_parser = count(1_000_000))]
    pub layers: Option<usize>,
    /// random: total nodes; ops-chain: the fewest blocks with at least this many nodes (1 to 10^7).
    #[arg(long, value_parser = count(10_000_000))]
    pub nodes: Option<usize>,
    /// random: nodes per layer, at most.
    #[arg(long)]
    pub width: Option<usize>,
    /// random: number of layers (default: drawn from the width).
    #[arg(long)]
    pub depth: Option<usize>,
    /// random: probability of each extra edge from the nearby layers.
    #[arg(long, allow_hyphen_values = true)]
    pub skip_prob: Option<f64>,
    /// random: how many layers back an extra edge may reach.
    #[arg(long)]
    pub skip_span: Option<usize>,
    /// random: node cost distribution, N, LO..HI or log:LO..HI; residual: a number.
    #[arg(long, allow_hyphen_values = true)]
    pub cost: Option<String>,
    /// random: node bytes distribution, N, LO..HI or log:LO..HI; residual: a number.
    #[arg(long, allow_hyphen_values = true)]
    pub memory: Option<String>,
    /// random: RNG seed.
    #[arg(long)]
    pub seed: Option<u64>,
    /// random: emit a forward graph with a loss (the tool adds gradients).
    #[arg(long)]
    pub forward: bool,
    /// residual: number of residual blocks, 1 to 10^6.
    #[arg(long, value_parser = count(1_000_000))]
    pub blocks: Option<usize>,
    /// residual: layers per residual branch (blocks × (branch + 1) at most 10^7).
    #[arg(long)]
    pub branch: Option<usize>,
}

/// A count flag from 1 to `max`. Zero made some generators emit an empty
/// graph and others fail; a huge count aborted on a failed allocation
/// (`--layers 100000000` asked for 35 GB) instead of a one-line error.
fn count(max: u64) -> clap::builder::RangedU64ValueParser<usize> {
    clap::builder::RangedU64ValueParser::<usize>::new().range(1..=max)
}

impl ZooArgs {
    /// Names of the flags given that belong to none of `allowed`.
    fn stray(&self, allowed: &[&str]) -> Option<String> {
        let given = [
            ("--batch", self.batch.is_some()),
            ("--resolution", self.resolution.is_some()),
            ("--seq-len", self.seq_len.is_some()),
            ("--layers", self.layers.is_some()),
            ("--nodes", self.nodes.is_some()),
            ("--width", self.width.is_some()),
            ("--depth", self.depth.is_some()),
            ("--skip-prob", self.skip_prob.is_some()),
            ("--skip-span", self.skip_span.is_some()),
            ("--cost", self.cost.is_some()),
            ("--memory", self.memory.is_some()),
            ("--seed", self.seed.is_some()),
            ("--forward", self.forward),
            ("--blocks", self.blocks.is_some()),
            ("--branch", self.branch.is_some()),
        ];
        let bad: Vec<&str> = given
            .iter()
            .filter(|(flag, on)| *on && !allowed.contains(flag))
            .map(|(flag, _)| *flag)
            .collect();
        (!bad.is_empty()).then(|| bad.join(", "))
    }
}

fn zoo_err(e: ZooError) -> anyhow::Error {
    input_err(e.to_string())
}

/// Runs `remat zoo`.
pub fn run(args: &ZooArgs, quiet: bool) -> anyhow::Result<()> {
    if args.list {
        return print_list();
    }
    if args.all {
        if let Some(flags) = args.stray(&[]) {
            return Err(input_err(format!(
                "--all regenerates the committed files as they are; it takes no {flags}"
            )));
        }
        if args.output.is_some() {
            return Err(input_err(
                "--all writes models/ and budgets/ under --dir; it takes no --output",
            ));
        }
        if !args.check {
            crate::cli::check_output_dir(&args.dir, "--dir")?;
        }
        return regenerate(&args.dir, args.check, quiet);
    }
    let Some(name) = args.name.as_deref() else {
        return Err(input_err(
            "name a network or family (see `remat zoo --list`), or use --all",
        ));
    };
    let (file, header) = generate(name, args)?;
    // Sizes and costs come from the flags (`--memory`, `--cost`), so a
    // graph that fails validation is the flags' doing as often as not.
    let g = Graph::from_file(&file, name).map_err(|e| {
        input_err(format!(
            "the graph these flags generate is invalid: {}",
            e.to_string().replace('\n', " ")
        ))
    })?;
    let text = file.to_yaml(Some(&header));
    match &args.output {
        Some(path) => {
            write_atomic(path, text.as_bytes())?;
            if !quiet {
                // The graph's nodes, as `inspect` and the header count
                // them: a forward file's listed nodes are a fraction.
                eprintln!("wrote {} ({} nodes)", path.display(), g.len());
            }
        }
        None => crate::cli::write_stdout(format_args!("{text}"))?,
    }
    Ok(())
}

/// The file for one `remat zoo NAME ...` call and its header comment.
fn generate(name: &str, args: &ZooArgs) -> anyhow::Result<(GraphFile, String)> {
    let wrong = |flags: String| input_err(format!("{name} does not take {flags}"));
    match name {
        "linear" => {
            if let Some(f) = args.stray(&["--layers"]) {
                return Err(wrong(f));
            }
            let n = args.layers.unwrap_or(8);
            let header = format!(
                "Checkmate's linear graph with {n} layers (unit costs and sizes); made by `remat zoo linear --layers {n}`."
            );
            Ok((synthetic::linear_file(n), header))
        }
        "random" => {
            let allowed = [
                "--nodes",
                "--width",
                "--depth",
                "--skip-prob",
                "--skip-span",
                "--cost",
                "--memory",
                "--seed",
                "--forward",
            ];
            if let Some(f) = args.stray(&allowed) {
                return Err(wrong(f));
            }
            let d = RandomDag::default();
            let dist = |s: &Option<String>, default: Dist, flag: &str| match s {
                Some(s) => Dist::parse(s).map_err(|e| input_err(format!("{flag}: {e}"))),
                None => Ok(default),
            };
            let p = RandomDag {
                nodes: args.nodes.unwrap_or(d.nodes),
                width: args.width.unwrap_or(d.width),
                depth: args.depth,
                skip_prob: args.skip_prob.unwrap_or(d.skip_prob),
                skip_span: args.skip_span.unwrap_or(d.skip_span),
                cost: dist(&args.cost, d.cost, "--cost")?,
                memory: dist(&args.memory, d.memory, "--memory")?,
                seed: args.seed.unwrap_or(d.seed),
                forward: args.forward,
            };
            p.check().map_err(input_err)?;
            let header = format!(
                "Random layered DAG; made by `remat zoo random --nodes {} --width {}{} --skip-prob {} --skip-span {} --cost {} --memory {} --seed {}{}`.",
                p.nodes,
                p.width,
                p.depth.map(|d| format!(" --depth {d}")).unwrap_or_default(),
                p.skip_prob,
                p.skip_span,
                p.cost,
                p.memory,
                p.seed,
                if p.forward { " --forward" } else { "" },
            );
            Ok((synthetic::random_layered_file(&p), header))
        }
        "residual" => {
            if let Some(f) = args.stray(&["--blocks", "--branch", "--cost", "--memory"]) {
                return Err(wrong(f));
            }
            let d = ResidualChain::default();
            let num = |s: &Option<String>, default: u64, flag: &str| match s {
                Some(s) => s
                    .trim()
                    .parse::<u64>()
                    .map_err(|_| input_err(format!("{flag}: expected a whole number, got '{s}'"))),
                None => Ok(default),
            };
            let p = ResidualChain {
                blocks: args.blocks.unwrap_or(d.blocks),
                branch: args.branch.unwrap_or(d.branch),
                cost: num(&args.cost, d.cost, "--cost")?,
                memory: num(&args.memory, d.memory, "--memory")?,
            };
            p.check().map_err(input_err)?;
            let header = format!(
                "Residual chain; made by `remat zoo residual --blocks {} --branch {} --cost {} --memory {}`.",
                p.blocks, p.branch, p.cost, p.memory
            );
            Ok((synthetic::residual_file(&p), header))
        }
        "ops-transformer" => {
            if let Some(f) = args.stray(&["--layers", "--batch", "--seq-len"]) {
                return Err(wrong(f));
            }
            let d = OpsTransformer::default();
            let p = OpsTransformer {
                layers: args.layers.unwrap_or(d.layers),
                batch: args.batch.map(u64::from).unwrap_or(d.batch),
                seq_len: args.seq_len.unwrap_or(d.seq_len),
                ..d
            };
            p.check().map_err(input_err)?;
            let header = format!(
                "Operator-level pre-norm transformer (width {}, {} heads, vocabulary {}), {} nodes; made by `remat zoo ops-transformer --layers {} --batch {} --seq-len {}`.",
                p.width, p.heads, p.vocab, p.node_count(), p.layers, p.batch, p.seq_len
            );
            Ok((ops::transformer_file(&p), header))
        }
        "ops-chain" => {
            if let Some(f) = args.stray(&["--layers", "--nodes"]) {
                return Err(wrong(f));
            }
            let layers = match (args.layers, args.nodes) {
                (Some(_), Some(_)) => return Err(input_err("give --layers or --nodes, not both")),
                (Some(l), None) => l,
                (None, Some(n)) => OpsChain::layers_for(n),
                (None, None) => OpsChain::default().layers,
            };
            let p = OpsChain {
                layers,
                ..OpsChain::default()
            };
            p.check().map_err(input_err)?;
            let header = format!(
                "Operator-level residual MLP chain ({} rows x {} wide), {} nodes; made by `remat zoo ops-chain --layers {}`.",
                p.rows, p.width, p.node_count(), p.layers
            );
            Ok((ops::chain_file(&p), header))
        }
        _ => {
            let spec =
                networks::spec(name).ok_or_else(|| zoo_err(ZooError::Unknown(name.into())))?;
            if let Some(f) = args.stray(&["--batch", "--resolution", "--seq-len"]) {
                return Err(wrong(f));
            }
            let input = match (&args.resolution, args.seq_len) {
                (Some(_), Some(_)) => {
                    return Err(input_err("give --resolution or --seq-len, not both"))
                }
                (Some(r), None) => Some(parse_resolution(r)?),
                (None, Some(t)) => Some(Input::Tokens(t)),
                (None, None) => None,
            };
            let batch = args.batch.unwrap_or(spec.batch);
            if batch == 0 {
                return Err(input_err("--batch must be at least 1"));
            }
            let net = networks::build(name, input).map_err(zoo_err)?;
            let input = input.unwrap_or(spec.input);
            let flags = match input {
                Input::Image(h, w) => format!("--resolution {h}x{w}"),
                Input::Tokens(t) => format!("--seq-len {t}"),
            };
            let header = net.header(batch, &format!("remat zoo {name} --batch {batch} {flags}"));
            Ok((net.to_file(batch), header))
        }
    }
}

fn parse_resolution(s: &str) -> anyhow::Result<Input> {
    let bad = || {
        input_err(format!(
            "--resolution: expected HxW such as 224x224, got '{s}'"
        ))
    };
    let (h, w) = s.trim().split_once(['x', 'X']).ok_or_else(bad)?;
    let h: u64 = h.trim().parse().map_err(|_| bad())?;
    let w: u64 = w.trim().parse().map_err(|_| bad())?;
    if h == 0 || w == 0 {
        return Err(bad());
    }
    Ok(Input::Image(h, w))
}

fn print_list() -> anyhow::Result<()> {
    let mut out: Vec<String> = Vec::new();
    out.push(format!(
        "{:<15} {:>6}  {:<11} about",
        "name", "batch", "input"
    ));
    for s in networks::NETWORKS {
        let input = match s.input {
            Input::Image(h, w) => format!("{h}x{w}"),
            Input::Tokens(t) => format!("{t} tokens"),
        };
        out.push(format!(
            "{:<15} {:>6}  {:<11} {}",
            s.name, s.batch, input, s.about
        ));
    }
    out.push(format!(
        "{:<15} {:>6}  {:<11} Checkmate's linear graph (--layers N)",
        "linear", 1, "-"
    ));
    out.push(format!(
        "{:<15} {:>6}  {:<11} random layered DAG (--nodes --width --depth --skip-prob --skip-span --cost --memory --seed --forward)",
        "random", 1, "-"
    ));
    out.push(format!(
        "{:<15} {:>6}  {:<11} chain of residual blocks (--blocks --branch --cost --memory)",
        "residual", 1, "-"
    ));
    out.push(format!(
        "{:<15} {:>6}  {:<11} operator-level transformer (--layers --batch --seq-len)",
        "ops-transformer", 8, "1024 tokens"
    ));
    out.push(format!(
        "{:<15} {:>6}  {:<11} operator-level residual MLP chain (--layers or --nodes)",
        "ops-chain", 1, "-"
    ));
    crate::cli::write_stdout(format_args!("{}\n", out.join("\n")))
}

/// `remat zoo --all [--check]`.
fn regenerate(dir: &Path, check: bool, quiet: bool) -> anyhow::Result<()> {
    let files = committed_files().map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut differ = Vec::new();
    for f in &files {
        let path = dir.join(&f.path);
        if check {
            let same = std::fs::read(&path).is_ok_and(|b| b == f.contents.as_bytes());
            if !same {
                differ.push(f.path.clone());
            }
        } else {
            write_atomic(&path, f.contents.as_bytes())?;
            if !quiet {
                eprintln!("wrote {}", path.display());
            }
        }
    }
    if !differ.is_empty() {
        anyhow::bail!(
            "{} file(s) differ from what `{REGENERATE}` makes: {}",
            differ.len(),
            differ.join(", ")
        );
    }
    if check {
        eprintln!("all {} files match", files.len());
    }
    Ok(())
}
