//! `remat zoo`: the zoo owns its flags (they follow its families), so this
//! handler only forwards, after checking where the graph is to be written.

use anyhow::Result;
use remat::cli::{check_output, input_err};

pub use remat::zoo::command::ZooArgs as Args;

pub fn run(mut args: Args, ctx: &super::Ctx) -> Result<()> {
    // clap's `requires = "all"` lets `--check` through beside a NAME (it
    // skips requirements that conflict with an argument given), and `--dir`
    // has a default: both were ignored, and `zoo vgg16 --check` looked like
    // a check that passed. A `--dir .` is the default, so ignoring it
    // loses nothing.
    if !args.all {
        let stray: Vec<&str> = [
            ("--check", args.check),
            ("--dir", args.dir != std::path::Path::new(".")),
        ]
        .into_iter()
        .filter_map(|(flag, on)| on.then_some(flag))
        .collect();
        if !stray.is_empty() {
            return Err(input_err(format!(
                "{} {} only with --all (regenerating models/ and budgets/)",
                stray.join(" and "),
                if stray.len() == 1 { "applies" } else { "apply" }
            )));
        }
    }
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
