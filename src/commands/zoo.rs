//! `remat zoo`: the zoo owns its flags (they follow its families), so this
//! handler only forwards.

use anyhow::Result;

pub use remat::zoo::command::ZooArgs as Args;

pub fn run(args: Args, ctx: &super::Ctx) -> Result<()> {
    remat::zoo::command::run(&args, ctx.quiet)?;
    Ok(())
}
