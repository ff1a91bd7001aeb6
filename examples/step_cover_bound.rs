//! The step cover program's bound alone, for measuring it against plans:
//! `cargo run --release --example step_cover_bound -- GRAPH DEVICE PCT SECS [norec]`
//! (PCT: percent of the checkpoint-all peak; `norec`: no recomputation).
//! Prints the bound of the whole-step form, and of the staged form for
//! copies within their stage and for copies that span stages
//! (docs/tiers.md). With `SHOW=1` it first prints the events the spanning
//! form's solution chooses (which values it recomputes, copies and reads
//! directly, and where), to read beside a plan; with `SPANNING=1` it
//! solves only the spanning form.
mod common;

use remat::solver::step_cover::{step_cover_bound, Copies, Program};
use remat::solver::{solve_mip, Backend, Params};
use std::time::Duration;
fn main() {
    let (a, g, dev, budget, secs) =
        common::graph_device_budget_secs("step_cover_bound GRAPH DEVICE PCT SECS [norec]");
    let p = Params {
        time_limit: Duration::from_secs_f64(secs),
        feasibility_tolerance: remat::solver::step_cover::FEASIBILITY_TOLERANCE,
        verbose: remat::solver::verbose_from_env(),
        ..Params::default()
    };
    // STAGED=1: only the staged spanning form, past the size cap the
    // strategy keeps (to measure what it would give on large graphs).
    if std::env::var_os("STAGED").is_some() {
        let prog =
            remat::solver::step_cover::staged(&g, budget, &dev, a.len() > 5, Copies::Spanning)
                .unwrap();
        let t = std::time::Instant::now();
        if std::env::var_os("IPM").is_some() {
            let mut lp = remat::solver::highs::LpSession::new(
                &prog.model.relaxed(),
                &p,
                remat::solver::highs::LpMethod::Ipm,
            )
            .unwrap();
            let r = lp.solve().unwrap();
            println!(
                "staged spanning LP (ipm): {:.4} ms {:?} {:.2} s cols {}",
                r.objective * prog.scale * 1e3,
                r.status,
                t.elapsed().as_secs_f64(),
                prog.model.num_cols()
            );
            return;
        }
        let r = solve_mip(&prog.model, Backend::Highs, &p, None).unwrap();
        println!(
            "{} {} {}% staged spanning: bound {:.4} ms status {:?} {:.2} s cols {}",
            a[1],
            dev.name,
            a[3],
            r.bound.unwrap_or(0.0) * prog.scale * 1e3,
            r.status,
            t.elapsed().as_secs_f64(),
            prog.model.num_cols()
        );
        return;
    }
    if let Some(prog) = Program::whole_step(&g, budget, &dev, a.len() > 5) {
        let r = solve_mip(&prog.model, Backend::Highs, &p, None).unwrap();
        println!(
            "{} {} {}% whole step: bound {:.4} ms status {:?} {:.2} s cols {}",
            a[1],
            dev.name,
            a[3],
            r.bound.unwrap_or(0.0) * prog.scale * 1e3,
            r.status,
            r.seconds,
            prog.model.num_cols()
        );
    }
    // SHOW=1: the spanning form's chosen events, to read beside plans.
    if std::env::var_os("SHOW").is_some() {
        let prog =
            remat::solver::step_cover::staged(&g, budget, &dev, a.len() > 5, Copies::Spanning)
                .unwrap();
        let r = solve_mip(&prog.model, Backend::Highs, &p, None).unwrap();
        let x = r.x.unwrap();
        let name = |v: remat::graph::NodeId| g.node(v).name.clone();
        for (c, e) in &prog.events {
            let val = x[*c];
            if val > 1e-6 {
                let v = match *e {
                    remat::solver::step_cover::Event::Recompute { value, .. }
                    | remat::solver::step_cover::Event::CopyIn { value, .. }
                    | remat::solver::step_cover::Event::CopyOut { value, .. }
                    | remat::solver::step_cover::Event::Direct { value, .. }
                    | remat::solver::step_cover::Event::Again { value }
                    | remat::solver::step_cover::Event::Fetched { value } => value,
                };
                println!("{val:.3} {e:?} {} ({} B)", name(v), g.memory(v).get());
            }
        }
    }
    // SPANNING=1: only the spanning form (the one every answer's bound uses).
    let forms: &[Copies] = if std::env::var_os("SPANNING").is_some() {
        &[Copies::Spanning]
    } else {
        &[Copies::WithinStage, Copies::Spanning]
    };
    for &copies in forms {
        let c = step_cover_bound(&g, budget, &dev, a.len() > 5, copies, &p)
            .unwrap()
            .unwrap();
        println!(
            "{} {} {}% {copies:?}: bound {:.4} ms proven {} {:.2} s cols {} all-fast {:.4}",
            a[1],
            dev.name,
            a[3],
            c.bound.get() * 1e3,
            c.proven,
            c.seconds,
            c.columns,
            dev.all_fast_step(&g).get() * 1e3
        );
    }
}
