//! `remat hints`: a plan as the per-step hint stream a tiering runtime
//! (CachedArrays) consumes; the format is in docs/format.md.

use anyhow::Result;
use remat::cli::{check_output, input_err, write_output};
use remat::schedule::PlanFile;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// Plan JSON file (as `solve --plan` writes it).
    plan: PathBuf,
    /// Output JSON file (`-`: standard output).
    #[arg(short, long)]
    output: PathBuf,
}

pub fn run(args: Args, ctx: &super::Ctx) -> Result<()> {
    check_output(&args.output, &[&args.plan])?;
    let name = args.plan.display().to_string();
    let text = remat::input::read_text(&args.plan, remat::input::MAX_GRAPH_BYTES)
        .map_err(|e| input_err(format!("{name}: cannot read: {e}")))?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    // The text form names no allocation sizes (they come from the graph,
    // which `hints` does not read).
    if !text.trim_start().starts_with('{') {
        return Err(input_err(format!(
            "{name}: not a plan JSON file; hints reads the JSON form (write the plan with --plan FILE.json)"
        )));
    }
    let file: PlanFile = serde_json::from_str(text)
        .map_err(|e| input_err(format!("{name}: not a plan JSON file: {e}")))?;
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
