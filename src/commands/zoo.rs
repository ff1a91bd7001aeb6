//! `remat zoo`: the zoo owns its flags (they follow its families), so this
//! handler only forwards, after checking where the graph is to be written.

use anyhow::Result;
use remat::cli::check_output;

pub use remat::zoo::command::ZooArgs as Args;

pub fn run(mut args: Args, ctx: &super::Ctx) -> Result<()> {
    // `-o -` is standard output, as for every other command (it used to
    // write a file named `-`).
    if args.output.as_ref().is_some_and(|o| o.as_os_str() == "-") {
        args.output = None;
    }
    if let Some(o) = &args.output {
        check_output(o, &[])?;
    }
    remat::zoo::command::run(&args, ctx.quiet)?;
    Ok(())
}
