//! `remat hints`: a plan as the per-step hint stream a tiering runtime
//! (CachedArrays) consumes; the format is in docs/format.md.

use anyhow::Result;
use remat::cli::{
    check_output, check_plan, input_err, load_device, load_graph, load_plan, write_output,
};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// Graph file the plan was made for: the plan is checked against it
    /// exactly as `simulate` checks it before any hint is written.
    model: PathBuf,
    /// Plan file, JSON or text (as `solve --plan` writes them).
    plan: PathBuf,
    /// Output JSON file (`-`: standard output).
    #[arg(short, long)]
    output: PathBuf,
    /// Device file (devices/*.yaml): needed for plans with transfers, as for `simulate`.
    #[arg(long)]
    device: Option<PathBuf>,
}

pub fn run(args: Args, ctx: &super::Ctx) -> Result<()> {
    let inputs: Vec<&std::path::Path> = [args.model.as_path(), args.plan.as_path()]
        .into_iter()
        .chain(args.device.as_deref())
        .collect();
    check_output(&args.output, &inputs)?;
    let name = args.plan.display().to_string();
    // Hints describe a plan a runtime will follow: one that `simulate`
    // refuses (a value read before it is computed, a peak over the
    // budget) must not get any.
    let g = load_graph(&args.model)?;
    let (file, p) = load_plan(&g, &args.model, &args.plan)?;
    let device = args
        .device
        .as_deref()
        .map(|d| load_device(d, &g))
        .transpose()?;
    check_plan(&g, &args.plan, &file, &p, device.as_ref(), None)?;
    let h = remat::hints::hints(&file).map_err(|e| input_err(format!("{name}: {e}")))?;
    write_output(&args.output, &serde_json::to_vec_pretty(&h)?)?;
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
