//! Experiment: a feasibility search over free orders, then the exact
//! schedule search in the order of its first computations.
//! `cargo run --release --example free_order -- GRAPH PCT|BYTES SECS [HEUR]`
use fixedbitset::FixedBitSet;
use remat::graph::analysis::checkpoint_all_peak;
use remat::graph::{Graph, GraphKind};
use remat::schedule::feasible::{decide, Feasibility};
use remat::schedule::{generate_plan, simulate};
use remat::strategies::local_search::{search_from, Ranking};
use remat::units::Bytes;
use std::collections::hash_map::DefaultHasher;
use std::collections::HashSet;
use std::hash::{Hash, Hasher};
use std::path::Path;
use std::time::{Duration, Instant};

struct Frame {
    w: FixedBitSet,
    c: FixedBitSet,
    mem_w: u64,
    cands: Vec<usize>,
    next: usize,
    trail: usize,
}

fn key(w: &FixedBitSet, c: &FixedBitSet) -> u64 {
    let mut h = DefaultHasher::new();
    w.as_slice().hash(&mut h);
    c.as_slice().hash(&mut h);
    h.finish()
}

/// The backward search: returns the forward sequence of computations.
fn free_search(g: &Graph, cap: u64, deadline: Instant, heur: usize) -> Option<Vec<usize>> {
    let n = g.len();
    let mem: Vec<u64> = g.ids().map(|i| g.memory(i).get()).collect();
    let deps: Vec<Vec<usize>> = g
        .ids()
        .map(|k| {
            let mut d: Vec<usize> = g.deps(k).iter().map(|d| d.idx()).collect();
            d.sort_unstable();
            d.dedup();
            d
        })
        .collect();
    let sink: Vec<bool> = g.ids().map(|i| g.users(i).is_empty()).collect();
    let extra = |v: usize, w: &FixedBitSet| -> u64 {
        deps[v]
            .iter()
            .filter(|&&d| !w.contains(d))
            .map(|&d| mem[d])
            .sum::<u64>()
            + if w.contains(v) { 0 } else { mem[v] }
    };
    let order = |w: &FixedBitSet, c: &FixedBitSet, mem_w: u64| -> Vec<usize> {
        let mut cands: Vec<usize> = w
            .ones()
            .chain((0..n).filter(|&v| sink[v] && !c.contains(v)))
            .filter(|&v| mem_w + extra(v, w) <= cap)
            .collect();
        cands.sort_unstable();
        cands.dedup();
        // Score: net bytes W gains by computing v here.
        let net = |v: usize| -> i64 {
            let add: u64 = deps[v]
                .iter()
                .filter(|&&d| !w.contains(d))
                .map(|&d| mem[d])
                .sum();
            add as i64 - if w.contains(v) { mem[v] as i64 } else { 0 }
        };
        match heur {
            0 => cands.sort_by_key(|&v| std::cmp::Reverse(v)),
            1 => cands.sort_by_key(|&v| (net(v) > 0, std::cmp::Reverse(v))),
            2 => cands.sort_by_key(|&v| (net(v), std::cmp::Reverse(v))),
            _ => cands.sort_by_key(|&v| (c.contains(v), net(v) > 0, std::cmp::Reverse(v))),
        }
        cands
    };
    let mut seen: HashSet<u64> = HashSet::new();
    let mut trail: Vec<usize> = Vec::new();
    let w0 = FixedBitSet::with_capacity(n);
    let c0 = FixedBitSet::with_capacity(n);
    let cands = order(&w0, &c0, 0);
    seen.insert(key(&w0, &c0));
    let mut stack = vec![Frame {
        w: w0,
        c: c0,
        mem_w: 0,
        cands,
        next: 0,
        trail: 0,
    }];
    let mut states = 0u64;
    while let Some(top) = stack.last_mut() {
        if states.is_multiple_of(1024) && Instant::now() >= deadline {
            eprintln!("free search: deadline after {states} states");
            return None;
        }
        if top.next >= top.cands.len() {
            stack.pop();
            continue;
        }
        let v = top.cands[top.next];
        top.next += 1;
        states += 1;
        trail.truncate(top.trail);
        let mut w = top.w.clone();
        let mut c = top.c.clone();
        let mut mem_w = top.mem_w;
        if w.contains(v) {
            mem_w -= mem[v];
            w.set(v, false);
        }
        for &d in &deps[v] {
            if !w.contains(d) {
                w.insert(d);
                mem_w += mem[d];
            }
        }
        c.insert(v);
        trail.push(v);
        if w.is_clear() && c.count_ones(..) == n {
            eprintln!("free search: {states} states, {} computations", trail.len());
            trail.reverse();
            return Some(trail);
        }
        if !seen.insert(key(&w, &c)) {
            continue;
        }
        let cands = order(&w, &c, mem_w);
        let len = trail.len();
        stack.push(Frame {
            w,
            c,
            mem_w,
            cands,
            next: 0,
            trail: len,
        });
    }
    eprintln!("free search: exhausted after {states} states");
    None
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let g = Graph::load(Path::new(&a[1])).unwrap();
    let b: u64 = a[2].parse().unwrap();
    let budget = if b <= 100 {
        checkpoint_all_peak(&g).scale_ceil(b as u128, 100)
    } else {
        Bytes(b)
    };
    let secs: f64 = a[3].parse().unwrap();
    let heur: usize = a.get(4).map(|s| s.parse().unwrap()).unwrap_or(1);
    let cap = budget.get() - g.fixed_memory.get();
    let start = Instant::now();
    let Some(seq) = free_search(&g, cap, start + Duration::from_secs_f64(secs), heur) else {
        println!("no free sequence ({:.2} s)", start.elapsed().as_secs_f64());
        return;
    };
    let cost: f64 = seq
        .iter()
        .map(|&v| g.cost(remat::graph::NodeId::from(v)))
        .sum();
    println!(
        "free sequence: {} computations, {:.3}x one pass, {:.2} s",
        seq.len(),
        cost / g.total_cost(),
        start.elapsed().as_secs_f64()
    );
    // The order of first computations.
    let mut pos = vec![usize::MAX; g.len()];
    let mut pi = Vec::new();
    for &v in &seq {
        if pos[v] == usize::MAX {
            pos[v] = pi.len();
            pi.push(v);
        }
    }
    let mut file = g.to_file();
    let GraphKind::Training = file.graph else {
        panic!("training graphs only")
    };
    let nodes = std::mem::take(&mut file.nodes);
    file.nodes = pi.iter().map(|&v| nodes[v].clone()).collect();
    let gp = Graph::from_file(&file, "reordered").unwrap();
    if let Some(out) = a.get(5) {
        std::fs::write(out, serde_yaml::to_string(&file).unwrap()).unwrap();
    }
    let moved = pi.iter().enumerate().filter(|(i, &v)| *i != v).count();
    println!("order: {moved} of {} nodes moved", g.len());
    // The sequence as a schedule in that order, stage by stage.
    {
        let n = g.len();
        let deps: Vec<Vec<usize>> = g
            .ids()
            .map(|k| g.deps(k).iter().map(|d| d.idx()).collect())
            .collect();
        let mut w_before = vec![FixedBitSet::with_capacity(n); seq.len()];
        let mut w = FixedBitSet::with_capacity(n);
        for p in (0..seq.len()).rev() {
            let v = seq[p];
            w.set(v, false);
            for &d in &deps[v] {
                w.insert(d);
            }
            w_before[p] = w.clone();
        }
        let mut sch = remat::schedule::Schedule::identity(n);
        let mut stage = 0usize;
        let mut dups = 0;
        let mut seen_first = vec![false; n];
        let mut in_stage: Vec<usize> = Vec::new();
        for (p, &v) in seq.iter().enumerate() {
            if in_stage.is_empty() {
                for i in w_before[p].ones() {
                    sch.set_s(stage, pos[i], true);
                }
            }
            if in_stage.contains(&v) {
                dups += 1;
            }
            in_stage.push(v);
            sch.set_r(stage, pos[v], true);
            if !seen_first[v] {
                seen_first[v] = true;
                stage += 1;
                in_stage.clear();
            }
        }
        match generate_plan(&gp, &sch).map_err(|e| e.to_string()).and_then(|pl| simulate(&gp, &pl).map_err(|e| e.to_string())) {
            Ok(sim) => println!("converted schedule: cost {} ({:.3}x), peak {} (budget {budget}), {dups} repeats in a stage", sim.cost, sim.cost / g.total_cost(), sim.peak),
            Err(e) => println!("converted schedule rejected: {e}"),
        }
    }
    let t = Instant::now();
    match decide(&gp, budget, t + Duration::from_secs_f64(secs)) {
        Feasibility::Fits(sch) => {
            let sim = simulate(&gp, &generate_plan(&gp, &sch).unwrap()).unwrap();
            println!(
                "schedule in that order: cost {} ({:.3}x), peak {} ({:.2} s)",
                sim.cost,
                sim.cost / g.total_cost(),
                sim.peak,
                t.elapsed().as_secs_f64()
            );
            let deadline = Instant::now() + Duration::from_secs_f64(secs);
            if let Some(s) = search_from(&gp, sch, budget, Ranking::Forecast, deadline) {
                let sim = simulate(&gp, &generate_plan(&gp, &s).unwrap()).unwrap();
                println!(
                    "searched from: cost {} ({:.3}x), peak {}",
                    sim.cost,
                    sim.cost / g.total_cost(),
                    sim.peak
                );
            }
        }
        Feasibility::NoSchedule { states } => {
            println!("no schedule in that order ({states} states)")
        }
        Feasibility::Unknown { states } => println!("undecided in that order ({states} states)"),
    }
}
