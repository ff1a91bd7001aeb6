use remat::solver::checkmate::Formulation;
use remat::solver::*;
use remat::strategies::*;
fn main() {
    let g = remat::zoo::synthetic::linear(8);
    let f = Formulation::build(&g, remat::Bytes(7), true, None);
    let p = Params { gap: 1e-6, ..Params::default() };
    let warm = remat::strategies::portfolio::best_heuristic(&g, remat::Bytes(7), &SolveOptions::default()).unwrap();
    println!("seed {} {}", warm.0, warm.1.cost(&g));
    let (x, peak) = f.vector_for(&g, &warm.1);
    println!("seed peak {peak} viol {}", f.model.max_violation(&x));
    let r = solve_mip(&f.model, Backend::Cbc, &p, Some(&x)).unwrap();
    println!("{:?} {:?} {:?}", r.status, r.objective, r.bound);
    let r = solve_mip(&f.model, Backend::Cbc, &p, None).unwrap();
    println!("{:?} {:?} {:?}", r.status, r.objective, r.bound);
}
