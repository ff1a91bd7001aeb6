//! `remat hints`: a plan as the per-step hint stream a tiering runtime
//! (CachedArrays) consumes; the format is in docs/format.md.

use anyhow::Result;
use remat::cli::{
    check_output, check_plan, input_err, load_device, load_graph, load_plan, write_output,
};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// `[MODEL] PLAN`: the plan file (JSON or text, as `solve --plan`
    /// writes them), after the graph file it was made for. With the graph
    /// the plan is checked exactly as `simulate` checks it before any hint
    /// is written; a JSON plan alone (the form of earlier releases) is
    /// checked only for the registers its hints name.
    #[arg(value_names = ["MODEL", "PLAN"], num_args = 1..=2, required = true)]
    files: Vec<PathBuf>,
    /// Output JSON file (`-`: standard output).
    #[arg(short, long)]
    output: PathBuf,
    /// Device file (devices/*.yaml): needed for plans with transfers, as for `simulate`.
    #[arg(long)]
    device: Option<PathBuf>,
}

pub fn run(args: Args, ctx: &super::Ctx) -> Result<()> {
    let inputs: Vec<&std::path::Path> = args
        .files
        .iter()
        .map(PathBuf::as_path)
        .chain(args.device.as_deref())
        .collect();
    check_output(&args.output, &inputs)?;
    let plan = args.files.last().expect("clap: one or two files");
    let name = plan.display().to_string();
    let mut notes = Vec::new();
    let file = match args.files.as_slice() {
        [model, _] => {
            // Hints describe a plan a runtime will follow: one that
            // `simulate` refuses (a value read before it is computed, a
            // peak over the budget) must not get any.
            let g = load_graph(model)?;
            let (file, p) = load_plan(&g, model, plan)?;
            let device = args
                .device
                .as_deref()
                .map(|d| load_device(d, &g))
                .transpose()?;
            let (rep, _) = check_plan(&g, plan, &file, &p, device.as_ref(), None)?;
            if let Some(n) = device
                .as_ref()
                .and_then(|d| super::over_device(rep.peak, d, file.budget.map(remat::Bytes)))
            {
                notes.push(n);
            }
            file
        }
        _ => {
            if args.device.is_some() {
                return Err(input_err(format!(
                    "{name}: --device needs the graph file: remat hints MODEL PLAN --device D"
                )));
            }
            plan_alone(plan)?
        }
    };
    let h = remat::hints::hints(&file).map_err(|e| input_err(format!("{name}: {e}")))?;
    write_output(&args.output, &serde_json::to_vec_pretty(&h)?)?;
    for n in notes.iter().filter(|_| !ctx.quiet) {
        eprintln!("note: {n}");
    }
    if !ctx.quiet && args.output.as_os_str() != "-" {
        eprintln!(
            "wrote {} ({} steps, {} objects)",
            args.output.display(),
            h.steps.len(),
            h.objects.len()
        );
    }
    Ok(())
}

/// A JSON plan read without its graph: the text form names no allocation
/// sizes, which only the graph gives.
fn plan_alone(plan: &std::path::Path) -> Result<remat::schedule::PlanFile> {
    let name = plan.display().to_string();
    let text = remat::input::read_text(plan, remat::input::MAX_GRAPH_BYTES)
        .map_err(|e| input_err(format!("{name}: cannot read: {e}")))?;
    if !text.trim_start().starts_with('{') {
        return Err(input_err(format!(
            "{name}: not a plan JSON file; without the graph, hints reads the JSON form (remat hints MODEL PLAN reads both)"
        )));
    }
    serde_json::from_str(&text).map_err(|e| {
        input_err(format!(
            "{name}: not a plan JSON file: {}",
            remat::input::plain_serde_message(&e.to_string())
        ))
    })
}
