//! What the bench binaries share: resuming a results CSV, reading one
//! back, naming a refused solve, and the overhead-against-budget panels
//! (tiers.rs and joint.rs).
#![allow(dead_code)] // each bench uses its own part

use plotters::prelude::*;
use remat::solve::SolveError;
use remat::strategies::StrategyError;
use std::collections::{BTreeMap, HashSet};
use std::path::Path;

/// Rows already measured, keyed by (graph, budget %, backend or strategy):
/// columns 0, 3 and 5 of both bench CSVs.
pub type Done = HashSet<(String, String, String)>;

/// The CSV text so far (a fresh header if the file is missing or foreign)
/// and the keys of its rows, so a re-run only measures what is missing.
pub fn resume(out: &Path, header: &str) -> (String, Done) {
    let (text, keys) = resume_by(out, header, &[0, 3, 5]);
    let done = keys
        .into_iter()
        .map(|k| (k[0].clone(), k[1].clone(), k[2].clone()))
        .collect();
    (text, done)
}

/// [`resume`] with the key columns named (they must come before any
/// column that may hold a quoted comma).
pub fn resume_by(out: &Path, header: &str, cols: &[usize]) -> (String, HashSet<Vec<String>>) {
    let text = std::fs::read_to_string(out)
        .ok()
        .filter(|t| t.starts_with(header))
        .unwrap_or_else(|| format!("{header}\n"));
    let last = cols.iter().copied().max().unwrap_or(0);
    let done = text
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (f.len() > last).then(|| cols.iter().map(|&c| f[c].to_string()).collect())
        })
        .collect();
    (text, done)
}

/// One CSV row, column → value.
pub type Row = BTreeMap<String, String>;

/// Every row of a CSV as column → value (empty if the file is missing).
pub fn read_rows(path: &Path) -> Vec<Row> {
    let Ok(mut r) = csv::Reader::from_path(path) else {
        return Vec::new();
    };
    let Ok(head) = r.headers().cloned() else {
        return Vec::new();
    };
    r.records()
        .filter_map(|rec| rec.ok())
        .map(|rec| {
            head.iter()
                .zip(rec.iter())
                .map(|(h, v)| (h.to_string(), v.to_string()))
                .collect()
        })
        .collect()
}

/// The status column for a solve the pipeline refused.
pub fn status_of_error(e: &SolveError) -> &'static str {
    match e {
        SolveError::BelowMinimum { .. } => "below-minimum",
        SolveError::Strategy(StrategyError::NotApplicable { .. }) => "not-applicable",
        _ => "error",
    }
}

static FONT: &[u8] = include_bytes!("../../assets/fonts/DejaVuSans.ttf");

pub const COLORS: [RGBColor; 7] = [
    RGBColor(0, 0, 0),
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

/// One PNG for one device: a panel per distinct `panel_col` value (in
/// the rows' order), line `k` through `point(row, k)` where it is `Some`
/// ((budget %, overhead as a fraction)).
pub fn plot_device(
    rows: &[Row],
    device: &str,
    path: &Path,
    panel_col: &str,
    labels: &[&str],
    x_range: (f64, f64),
    point: impl Fn(&Row, usize) -> Option<(f64, f64)>,
) -> Result<(), String> {
    let rows: Vec<_> = rows.iter().filter(|r| r["device"] == device).collect();
    let mut names: Vec<&String> = Vec::new();
    for r in &rows {
        if !names.contains(&&r[panel_col]) {
            names.push(&r[panel_col]);
        }
    }
    let panels: Vec<Panel> = names
        .iter()
        .map(|name| Panel {
            title: name.to_string(),
            lines: (0..labels.len())
                .map(|k| {
                    rows.iter()
                        .filter(|r| &&r[panel_col] == name)
                        .filter_map(|r| point(r, k))
                        .collect()
                })
                .collect(),
        })
        .collect();
    plot_overhead_panels(
        path,
        &format!(
            "{device}: step time over the all-fast step, by budget (% of checkpoint-all peak)"
        ),
        labels,
        &panels,
        x_range,
    )
}

/// One panel's lines: for each label, (budget %, overhead over all-fast as
/// a fraction) where that line has a plan.
pub struct Panel {
    pub title: String,
    pub lines: Vec<Vec<(f64, f64)>>,
}

/// Overhead against budget, a panel per graph, a line per label (colours
/// in `COLORS` order): step time over the all-fast step (1 + overhead, on
/// a log axis, drawn as log10 on a linear one so that narrow ranges still
/// get labels: overheads span 0.1% to 60x) against the budget in % of the
/// checkpoint-all peak. Written atomically as a PNG.
pub fn plot_overhead_panels(
    path: &Path,
    title: &str,
    labels: &[&str],
    panels: &[Panel],
    x_range: (f64, f64),
) -> Result<(), String> {
    if panels.is_empty() {
        return Err("no rows".into());
    }
    let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, FONT);
    let e = |x: &dyn std::fmt::Display| x.to_string();
    let cols = 4;
    let nrows = panels.len().div_ceil(cols);
    let tmp = path.with_extension("tmp.png");
    {
        let root = BitMapBackend::new(&tmp, (1600, 420 * nrows as u32 + 110)).into_drawing_area();
        root.fill(&WHITE).map_err(|x| e(&x))?;
        let (top, body) = root.split_vertically(110);
        top.draw(&Text::new(title.to_string(), (20, 12), ("sans-serif", 26)))
            .map_err(|x| e(&x))?;
        for (k, label) in labels.iter().enumerate() {
            let x = 20 + 215 * k as i32;
            top.draw(&PathElement::new(
                vec![(x, 72), (x + 30, 72)],
                COLORS[k].stroke_width(3),
            ))
            .map_err(|x| e(&x))?;
            top.draw(&Text::new(
                label.to_string(),
                (x + 36, 62),
                ("sans-serif", 19),
            ))
            .map_err(|x| e(&x))?;
        }
        for (area, panel) in body.split_evenly((nrows, cols)).iter().zip(panels) {
            let lines: Vec<Vec<(f64, f64)>> = panel
                .lines
                .iter()
                .map(|pts| {
                    let mut v: Vec<(f64, f64)> =
                        pts.iter().map(|&(x, y)| (x, (1.0 + y).log10())).collect();
                    v.sort_by(|a, b| a.0.total_cmp(&b.0));
                    v
                })
                .collect();
            let ymax = lines
                .iter()
                .flat_map(|p| p.iter().map(|q| q.1))
                .fold(1.1f64.log10(), f64::max)
                + 0.06;
            let mut chart = ChartBuilder::on(area)
                .caption(&panel.title, ("sans-serif", 20))
                .margin(10)
                .x_label_area_size(36)
                .y_label_area_size(56)
                .build_cartesian_2d(x_range.0..x_range.1, 0.98f64.log10()..ymax)
                .map_err(|x| e(&x))?;
            chart
                .configure_mesh()
                .x_desc("budget (%)")
                .y_desc("step / all-fast step (log)")
                .y_labels(12)
                .y_label_formatter(&|v| {
                    // Exponent form past 1000: the public graphs' costs
                    // are not flops, and their ratios reach 10^8, whose
                    // digits overran the panel's label area.
                    let y = 10f64.powf(*v);
                    if y >= 1000.0 {
                        format!("{y:.0e}")
                    } else if y >= 10.0 {
                        format!("{y:.0}")
                    } else {
                        format!("{y:.2}")
                    }
                })
                .label_style(("sans-serif", 13))
                .axis_desc_style(("sans-serif", 14))
                .light_line_style(RGBColor(235, 235, 235))
                .draw()
                .map_err(|x| e(&x))?;
            for (k, pts) in lines.iter().enumerate() {
                let c = COLORS[k];
                chart
                    .draw_series(LineSeries::new(pts.iter().copied(), c.stroke_width(2)))
                    .map_err(|x| e(&x))?;
                chart
                    .draw_series(pts.iter().map(|&p| Circle::new(p, 4, c.filled())))
                    .map_err(|x| e(&x))?;
            }
        }
        root.present().map_err(|x| e(&x))?;
    }
    std::fs::rename(&tmp, path).map_err(|x| x.to_string())
}

/// An argument the bench does not take: `--help` prints `usage` and
/// exits 0; anything else is refused with it (exit 2). Why not ignored:
/// a mistyped option used to run the whole default bench, for hours,
/// and write its rows into results/.
pub fn unknown_argument(arg: &str, usage: &str) -> ! {
    if arg == "--help" || arg == "-h" {
        println!("usage: {usage}");
        std::process::exit(0);
    }
    eprintln!("error: unknown argument `{arg}`\nusage: {usage}");
    std::process::exit(2);
}
