//! `remat strategies`: the registry, one line each.

use anyhow::Result;

#[derive(clap::Args)]
pub struct Args {}

pub fn run(_: Args, _: &super::Ctx) -> Result<()> {
    for s in remat::strategies::all() {
        outln!("{:<18} {}", s.name(), s.describe())?;
    }
    outln!("\nwith --device (two memory tiers; the sweep group `tiered`):")?;
    for s in remat::strategies::tiered_policies() {
        outln!("{:<18} {}", s.name(), s.describe())?;
    }
    Ok(())
}
