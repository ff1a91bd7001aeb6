//! Plots people read without the CSV next to them: the overhead-vs-budget
//! trade-off of a sweep (the paper's Figure 5) and the memory profile of one
//! plan (Figure 1). SVG or PNG, by the output's extension.
//!
//! Text is rendered with an embedded DejaVu Sans (assets/fonts, Bitstream
//! Vera license) through ab_glyph, so plotting needs no system font
//! libraries.

use crate::graph::Graph;
use crate::schedule::{simulate, Plan, SimError, Statement};
use crate::strategies;
use crate::units::Bytes;
use crate::workflows::sweep::Row;
use plotters::coord::Shift;
use plotters::prelude::*;
use std::collections::HashMap;
use std::path::Path;

static FONT: &[u8] = include_bytes!("../../assets/fonts/DejaVuSans.ttf");

#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    #[error("{path}: unsupported plot format (use .svg or .png)")]
    Format { path: String },
    #[error("{path}: {msg}")]
    Draw { path: String, msg: String },
    #[error("nothing to plot: {0}")]
    Empty(String),
    #[error("plan rejected by the simulator: {0}")]
    Plan(#[from] SimError),
}

/// Sixteen colors that stay distinguishable (matplotlib's tab10, then six
/// darker ones), so every strategy of a full sweep has its own.
const COLORS: [RGBColor; 16] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
    RGBColor(0, 0, 0),
    RGBColor(0, 90, 50),
    RGBColor(120, 0, 120),
    RGBColor(160, 110, 0),
    RGBColor(0, 60, 140),
    RGBColor(170, 0, 60),
];

const SIZE: (u32, u32) = (1000, 640);

fn register_font() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // The font is compiled in and known to parse; a failure would only
        // make text invisible, not wrong.
        let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, FONT);
        let _ = plotters::style::register_font("sans-serif", FontStyle::Bold, FONT);
    });
}

/// A byte scale for axis labels: divisor and unit name.
fn byte_unit(max: f64) -> (f64, &'static str) {
    if max >= 1e9 {
        (1e9, "GB")
    } else if max >= 1e6 {
        (1e6, "MB")
    } else if max >= 1e3 {
        (1e3, "KB")
    } else {
        (1.0, "bytes")
    }
}

/// Axis numbers without needless decimals: `50`, `1.25`.
fn tick(x: &f64) -> String {
    if (x - x.round()).abs() < 1e-9 * x.abs().max(1.0) {
        format!("{x:.0}")
    } else {
        let s = format!("{x:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// Whether `path` names a format the plots can be drawn in, so that a
/// command can refuse it before a long run rather than after.
pub fn check_format(path: &Path) -> Result<(), PlotError> {
    match extension(path).as_str() {
        "svg" | "png" => Ok(()),
        _ => Err(PlotError::Format {
            path: path.display().to_string(),
        }),
    }
}

/// The lower-case extension that picks the backend ("" without one).
fn extension(path: &Path) -> String {
    path.extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default()
}

/// Draws with the backend the extension names, then moves the file into
/// place, so a reader never sees a half-written plot.
fn render(
    path: &Path,
    draw: impl Fn(DrawingArea<SVGBackend, Shift>) -> Result<(), String>,
    draw_png: impl Fn(DrawingArea<BitMapBackend, Shift>) -> Result<(), String>,
) -> Result<(), PlotError> {
    register_font();
    let name = path.display().to_string();
    let fail = |msg: String| PlotError::Draw {
        path: name.clone(),
        msg,
    };
    match extension(path).as_str() {
        "svg" => {
            let mut text = String::new();
            {
                let root = SVGBackend::with_string(&mut text, SIZE).into_drawing_area();
                draw(root.clone()).map_err(fail)?;
                root.present().map_err(|e| fail(e.to_string()))?;
            }
            crate::cli::write_atomic(path, text.as_bytes()).map_err(|e| fail(format!("{e:#}")))
        }
        "png" => {
            let dir = path
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            std::fs::create_dir_all(dir).map_err(|e| fail(e.to_string()))?;
            let tmp = dir.join(format!(".plot-{}.tmp.png", std::process::id()));
            {
                let root = BitMapBackend::new(&tmp, SIZE).into_drawing_area();
                draw_png(root.clone()).map_err(fail)?;
                root.present().map_err(|e| fail(e.to_string()))?;
            }
            std::fs::rename(&tmp, path).map_err(|e| fail(e.to_string()))
        }
        _ => Err(PlotError::Format { path: name }),
    }
}

/// One strategy's best overhead at or below each budget, as the corners of
/// a step line (budgets ascending), plus the budgets actually solved.
struct StepCurve {
    /// The strategy drawn, then those whose curves coincide with it (to
    /// within a pixel or so): drawn once, named together.
    strategies: Vec<String>,
    /// Whether the others coincide exactly (`=`) or only to the eye (`≈`).
    exact: bool,
    steps: Vec<(f64, f64)>,
    points: Vec<(f64, f64)>,
}

/// The data of a sweep plot, in plotting units.
struct SweepData {
    model: String,
    unit: &'static str,
    curves: Vec<StepCurve>,
    lp: Vec<(f64, f64)>,
    x_range: (f64, f64),
    y_range: (f64, f64),
    /// Strategies without a plan at any budget, or that do not apply.
    no_plan: Vec<String>,
    not_applicable: Vec<String>,
    /// Rows timed on a device: the y-axis is the step time over the all-fast
    /// step (a plan that offloads computes no more than checkpoint-all, and
    /// its cost said nothing of its stalls).
    timed: bool,
}

/// The top of the y-axis: the data's maximum, unless a few outliers would
/// squash everything else against the bottom (mobilenet's one 18x point
/// beside curves within 1.3x). Then the axis stops a little above the
/// 90th percentile of overheads and the points above it are marked at the
/// top edge with their values.
fn useful_top(ys: &[f64]) -> f64 {
    let mut v: Vec<f64> = ys.iter().copied().filter(|y| y.is_finite()).collect();
    if v.is_empty() {
        return 1.0;
    }
    v.sort_by(f64::total_cmp);
    let max = v[v.len() - 1];
    let p90 = v[(v.len() - 1) * 9 / 10];
    let spread = (p90 - 1.0).max(0.05);
    if max - 1.0 > 3.0 * spread {
        p90 + spread * 0.5
    } else {
        max
    }
}

fn sweep_data(rows: &[Row], model: &str) -> Result<SweepData, PlotError> {
    let rows: Vec<&Row> = rows.iter().filter(|r| r.model == model).collect();
    if rows.is_empty() {
        return Err(PlotError::Empty(format!("no rows for model '{model}'")));
    }
    let max_budget = rows.iter().map(|r| r.budget.as_f64()).fold(0.0, f64::max);
    let min_budget = rows
        .iter()
        .map(|r| r.budget.as_f64())
        .fold(f64::INFINITY, f64::min);
    let (div, unit) = byte_unit(max_budget);

    // Strategies in registry order, then any others by name.
    let order: HashMap<&str, usize> = strategies::names()
        .into_iter()
        .enumerate()
        .map(|(i, n)| (n, i))
        .collect();
    let mut names: Vec<&str> = rows.iter().map(|r| r.strategy.as_str()).collect();
    names.sort_by_key(|n| (order.get(n).copied().unwrap_or(usize::MAX), *n));
    names.dedup();

    let timed = rows.iter().any(|r| r.timing.is_some());
    let y_of = |r: &Row| r.compared(timed).1;
    let mut curves: Vec<StepCurve> = Vec::new();
    let mut no_plan = Vec::new();
    let mut not_applicable = Vec::new();
    for name in names {
        let mut pts: Vec<(f64, f64)> = rows
            .iter()
            .filter(|r| r.strategy == name)
            .filter_map(|r| Some((r.budget.as_f64() / div, y_of(r)?)))
            .collect();
        if pts.is_empty() {
            let mine = || rows.iter().filter(|r| r.strategy == name);
            if mine().any(|r| r.status == crate::workflows::sweep::NOT_APPLICABLE) {
                not_applicable.push(name.to_string());
            } else if !mine().any(|r| r.status == "bound") {
                no_plan.push(name.to_string());
            }
            continue;
        }
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut steps = Vec::new();
        let mut best = f64::INFINITY;
        for &(x, y) in &pts {
            if y < best {
                if let Some(&(_, prev)) = steps.last() {
                    steps.push((x, prev));
                }
                best = y;
                steps.push((x, best));
            }
        }
        steps.push((max_budget / div, best));
        curves.push(StepCurve {
            strategies: vec![name.to_string()],
            exact: true,
            steps,
            points: pts,
        });
    }
    // The LP bound in overhead units: cost / overhead recovers the
    // checkpoint-all cost from any row with a plan.
    let base = rows
        .iter()
        .find_map(|r| Some(r.cost? / r.overhead?).filter(|b| b.is_finite() && *b > 0.0));
    // The LP bound is on recomputation alone: it bounds no step time of a
    // plan that offloads, so a timed plot leaves it out.
    let mut lp: Vec<(f64, f64)> = match base.filter(|_| !timed) {
        Some(base) => {
            let mut by_budget: HashMap<Bytes, f64> = HashMap::new();
            for r in &rows {
                if let Some(b) = r.lp_bound {
                    let e = by_budget.entry(r.budget).or_insert(b);
                    *e = e.max(b);
                }
            }
            by_budget
                .into_iter()
                .map(|(b, v)| (b.as_f64() / div, v / base))
                .collect()
        }
        None => Vec::new(),
    };
    lp.sort_by(|a, b| a.0.total_cmp(&b.0));
    let lp = bound_steps(&lp);

    let ys: Vec<f64> = curves
        .iter()
        .flat_map(|c| c.points.iter().map(|p| p.1))
        .chain(lp.iter().map(|p| p.1))
        .collect();
    let lo = ys.iter().copied().fold(f64::INFINITY, f64::min);
    let lo = if lo.is_finite() { lo } else { 1.0 };
    let hi = useful_top(&ys).max(lo);
    let pad = ((hi - lo) * 0.08).max(0.02);
    let curves = merge_coincident(curves, (hi - lo + 2.0 * pad) / 250.0);
    let (xl, xh) = (min_budget / div, max_budget / div);
    let xpad = ((xh - xl) * 0.03).max(xh.abs() * 0.01).max(1e-9);
    Ok(SweepData {
        model: model.to_string(),
        unit,
        curves,
        lp,
        x_range: (xl - xpad, xh + xpad),
        y_range: ((lo - pad).max(0.0), hi + pad),
        no_plan,
        not_applicable,
        timed,
    })
}

/// The legend box of the memory-profile figure, in the corner the data
/// leaves free.
fn draw_legend<'a, DB: DrawingBackend + 'a, CT: plotters::coord::CoordTranslate>(
    chart: &mut ChartContext<'a, DB, CT>,
    pos: SeriesLabelPosition,
) -> Result<(), String> {
    chart
        .configure_series_labels()
        .position(pos)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 15))
        .draw()
        .map_err(|x| x.to_string())
}

/// Curves that would hide each other (the optimal strategies, often DTR
/// too, all at 1.00) become one line whose legend entry names them all:
/// those at the same budgets whose overheads differ by at most `tol`
/// (about two pixels of the y-axis).
fn merge_coincident(curves: Vec<StepCurve>, tol: f64) -> Vec<StepCurve> {
    let within = |a: &[(f64, f64)], b: &[(f64, f64)], tol: f64| {
        a.len() == b.len()
            && a.iter()
                .zip(b)
                .all(|(p, q)| p.0 == q.0 && (p.1 - q.1).abs() <= tol)
    };
    let mut out: Vec<StepCurve> = Vec::new();
    for c in curves {
        match out.iter_mut().find(|o| within(&o.points, &c.points, tol)) {
            Some(o) => {
                o.exact &= within(&o.points, &c.points, 1e-12);
                o.strategies.extend(c.strategies);
            }
            None => out.push(c),
        }
    }
    out
}

/// How one curve is drawn: a color, a dash pattern and a marker, all three
/// varying with the index, so curves stay apart in gray print too.
#[derive(Clone, Copy)]
struct Look {
    color: RGBColor,
    /// (dash, gap) in pixels; `None` is solid.
    dash: Option<(u32, u32)>,
    marker: usize,
}

fn look(i: usize) -> Look {
    const DASHES: [Option<(u32, u32)>; 3] = [None, Some((9, 5)), Some((2, 4))];
    Look {
        color: COLORS[i % COLORS.len()],
        dash: DASHES[i % DASHES.len()],
        marker: i % 5,
    }
}

fn marker_at<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    (x, y): (i32, i32),
    look: Look,
) -> Result<(), String> {
    let style = look.color.filled();
    let r = match look.marker {
        0 => area.draw(&Circle::new((x, y), 4, style)),
        1 => area.draw(&TriangleMarker::new((x, y), 5, style)),
        2 => area.draw(&Rectangle::new([(x - 4, y - 4), (x + 4, y + 4)], style)),
        3 => area.draw(&Cross::new((x, y), 5, look.color.stroke_width(2))),
        _ => area.draw(&Polygon::new(
            vec![(x, y - 5), (x + 5, y), (x, y + 5), (x - 5, y)],
            style,
        )),
    };
    r.map_err(|e| e.to_string())
}

fn line_between<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    pts: &[(i32, i32)],
    look: Look,
) -> Result<(), String> {
    let style = look.color.stroke_width(2);
    let r = match look.dash {
        None => area.draw(&PathElement::new(pts.to_vec(), style)),
        Some((size, gap)) => pts.windows(2).try_for_each(|w| {
            area.draw(&plotters::element::DashedPathElement::new(
                w.to_vec(),
                size,
                gap,
                style,
            ))
        }),
    };
    r.map_err(|e| e.to_string())
}

/// Splits a legend label so that it fits the side panel.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for word in text.split(' ') {
        match lines.last_mut() {
            Some(l) if l.len() + 1 + word.len() <= width => {
                l.push(' ');
                l.push_str(word);
            }
            _ => lines.push(word.to_string()),
        }
    }
    lines
}

fn draw_sweep<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    d: &SweepData,
) -> Result<(), String> {
    let e = |x: DrawingAreaErrorKind<DB::ErrorType>| x.to_string();
    root.fill(&WHITE).map_err(e)?;
    // The legend gets a panel of its own beside the data, never over it.
    let (left, side) = root.split_horizontally(SIZE.0 - 270);
    let mut chart = ChartBuilder::on(&left)
        .caption(
            format!(
                "{}: {} vs memory budget",
                d.model,
                if d.timed {
                    "step time"
                } else {
                    "compute overhead"
                }
            ),
            ("sans-serif", 22),
        )
        .margin(16)
        .x_label_area_size(50)
        .y_label_area_size(70)
        .build_cartesian_2d(d.x_range.0..d.x_range.1, d.y_range.0..d.y_range.1)
        .map_err(e)?;
    chart
        .configure_mesh()
        .x_desc(format!("memory budget ({})", d.unit))
        .x_label_formatter(&tick)
        .y_label_formatter(&tick)
        .y_desc(if d.timed {
            "step time / all-fast step"
        } else {
            "overhead (cost / checkpoint-all cost)"
        })
        .axis_desc_style(("sans-serif", 17))
        .label_style(("sans-serif", 14))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()
        .map_err(e)?;
    let (y0, top) = d.y_range;
    let gray = RGBColor(90, 90, 90);
    if !d.lp.is_empty() {
        // Below the bound no plan can exist: a band, not just a line.
        let band: Vec<(f64, f64)> = d.lp.iter().map(|&(x, y)| (x, y.min(top))).collect();
        chart
            .draw_series(AreaSeries::new(band.iter().copied(), y0, gray.mix(0.15)))
            .map_err(e)?;
        chart
            .draw_series(DashedLineSeries::new(band, 6, 4, gray.stroke_width(1)))
            .map_err(e)?;
    }
    let clip = |(x, y): (f64, f64)| (x, y.min(top));
    // Curves are drawn in pixels, on `left` (whose origin is the root's),
    // so that dashes and markers can be composed freely.
    let coords = chart.plotting_area().clone();
    let to_px = |p: (f64, f64)| coords.map_coordinate(&p);
    let plot = &left;
    let mut outliers: Vec<(f64, f64, Look)> = Vec::new();
    for (i, c) in d.curves.iter().enumerate() {
        let lk = look(i);
        let px: Vec<(i32, i32)> = c.steps.iter().map(|&p| to_px(clip(p))).collect();
        line_between(plot, &px, lk)?;
        for &p in &c.points {
            if p.1 > top {
                outliers.push((p.0, p.1, lk));
            } else {
                marker_at(plot, to_px(p), lk)?;
            }
        }
    }
    // Outliers sit on the top edge as open triangles; only the highest of
    // each curve is labelled with its value, so labels never pile up.
    for (k, (x, _, lk)) in outliers.iter().enumerate() {
        let (px, py) = to_px((*x, top));
        plot.draw(&TriangleMarker::new(
            (px, py + 6),
            6,
            lk.color.stroke_width(2),
        ))
        .map_err(e)?;
        let highest = outliers
            .iter()
            .filter(|o| o.2.color == lk.color)
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .is_some_and(|o| std::ptr::eq(o, &outliers[k]));
        if highest {
            plot.draw(&Text::new(
                format!("max {}x", tick(&outliers[k].1)),
                (px + 8, py + 10),
                ("sans-serif", 13).into_font().color(&lk.color),
            ))
            .map_err(e)?;
        }
    }

    // The legend panel: each entry's own line, dash and marker.
    let font = ("sans-serif", 15).into_font();
    let mut y = 60;
    let mut entry = |side: &DrawingArea<DB, Shift>,
                     label: &str,
                     sample: &dyn Fn(i32) -> Result<(), String>|
     -> Result<(), String> {
        sample(y)?;
        let lines = wrap(label, 26);
        for (k, line) in lines.iter().enumerate() {
            side.draw(&Text::new(
                line.clone(),
                (50, y - 8 + 18 * k as i32),
                font.clone(),
            ))
            .map_err(|x| x.to_string())?;
        }
        y += 18 * (lines.len() as i32 - 1);
        y += 26;
        Ok(())
    };
    for (i, c) in d.curves.iter().enumerate() {
        let lk = look(i);
        let sep = if c.exact { " = " } else { " ≈ " };
        entry(&side, &c.strategies.join(sep), &|y| {
            line_between(&side, &[(6, y), (42, y)], lk)?;
            marker_at(&side, (24, y), lk)
        })?;
    }
    if !d.lp.is_empty() {
        entry(&side, "lower bound: no plan below", &|y| {
            side.draw(&Rectangle::new(
                [(6, y - 7), (42, y + 7)],
                gray.mix(0.15).filled(),
            ))
            .map_err(|x| x.to_string())?;
            side.draw(&plotters::element::DashedPathElement::new(
                vec![(6, y - 7), (42, y - 7)],
                6,
                4,
                gray,
            ))
            .map_err(|x| x.to_string())
        })?;
    }
    let mut notes = Vec::new();
    if !d.no_plan.is_empty() {
        notes.push(format!("no plan: {}", d.no_plan.join(", ")));
    }
    if !d.not_applicable.is_empty() {
        notes.push(format!("not applicable: {}", d.not_applicable.join(", ")));
    }
    if d.curves.iter().any(|c| c.points.iter().any(|p| p.1 > top)) {
        notes.push("▲ on the top edge: points above the axis".into());
    }
    let small = ("sans-serif", 13).into_font();
    for note in notes {
        for line in wrap(&note, 32) {
            side.draw(&Text::new(line, (8, y), small.clone()))
                .map_err(e)?;
            y += 16;
        }
        y += 8;
    }
    Ok(())
}

/// The bound between the sampled budgets, as steps: the best plan's cost
/// never rises with the budget, so at any budget it is at least every
/// bound at a larger one, and no more can be claimed (a straight line
/// between two samples shaded budgets where a plan exists). At each sample
/// the curve drops to the next sample's claim.
fn bound_steps(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let mut claim: Vec<f64> = points.iter().map(|p| p.1).collect();
    for i in (0..claim.len().saturating_sub(1)).rev() {
        claim[i] = claim[i].max(claim[i + 1]);
    }
    let mut out = Vec::with_capacity(2 * points.len());
    for (i, &(x, _)) in points.iter().enumerate() {
        out.push((x, claim[i]));
        if let Some(&next) = claim.get(i + 1) {
            out.push((x, next));
        }
    }
    out
}

/// Figure 5: for each strategy, the best overhead among its plans at or
/// below each budget, as a step line; dots mark the budgets solved; the LP
/// bound (when the CSV has it) is dashed.
pub fn plot_sweep(rows: &[Row], model: &str, path: &Path) -> Result<(), PlotError> {
    let d = sweep_data(rows, model)?;
    render(path, |r| draw_sweep(r, &d), |r| draw_sweep(r, &d))
}

/// Memory (fixed memory included) after each statement of a plan.
pub struct MemoryTrace {
    pub live: Vec<Bytes>,
    /// Statement indices of computations of a node already computed.
    pub recomputations: Vec<usize>,
    /// Statement index of the first backward computation, if any.
    pub backward_start: Option<usize>,
}

/// Replays a plan's allocations; the plan must pass the simulator first,
/// so this replay can trust every register.
pub fn memory_trace(g: &Graph, plan: &Plan) -> Result<MemoryTrace, PlotError> {
    simulate(g, plan)?;
    let mut sizes: HashMap<u32, Bytes> = HashMap::new();
    let mut seen = vec![false; g.len()];
    let mut live = g.fixed_memory;
    let mut out = MemoryTrace {
        live: Vec::with_capacity(plan.statements.len()),
        recomputations: Vec::new(),
        backward_start: None,
    };
    for (i, st) in plan.statements.iter().enumerate() {
        match st {
            Statement::Allocate {
                register, bytes, ..
            } => {
                sizes.insert(*register, *bytes);
                live += *bytes;
            }
            Statement::Deallocate { register } => {
                live = live.saturating_sub(sizes.remove(register).unwrap_or_default());
            }
            // Slow copies do not occupy the fast tier drawn here; a copy
            // in occupies it from its issue.
            Statement::CopyOut { register, src } => {
                let b = sizes.get(src).copied().unwrap_or_default();
                sizes.insert(*register, b);
            }
            Statement::CopyIn { register, src } => {
                let b = sizes.get(src).copied().unwrap_or_default();
                sizes.insert(*register, b);
                live += b;
            }
            Statement::Drop { register } => {
                sizes.remove(register);
            }
            Statement::Wait { .. } => {}
            Statement::Compute { node, .. } => {
                if std::mem::replace(&mut seen[node.idx()], true) {
                    out.recomputations.push(i);
                }
                if out.backward_start.is_none() && g.node(*node).backward {
                    out.backward_start = Some(i);
                }
            }
        }
        out.live.push(live);
    }
    Ok(out)
}

struct PlanData {
    title: String,
    /// Each recomputation's statement index and node name.
    recomputed: Vec<(usize, String)>,
    unit: &'static str,
    div: f64,
    trace: MemoryTrace,
    budget: Option<Bytes>,
    fixed: Bytes,
}

/// A plot's title and its second line (the nodes recomputed), each cut
/// with an ellipsis to the width of the image: a list of long layer names
/// ran off its right edge.
fn draw_title<DB: DrawingBackend>(
    head: &DrawingArea<DB, Shift>,
    title: &str,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let room = head.dim_in_pixel().0.saturating_sub(32);
    for (k, line) in title.lines().enumerate() {
        let color = if line.contains("EXCEEDS") {
            COLORS[3]
        } else {
            BLACK
        };
        let font = ("sans-serif", if k == 0 { 20 } else { 14 })
            .into_font()
            .color(&color);
        let chars: Vec<char> = line.chars().collect();
        let (mut keep, mut text) = (chars.len(), line.to_string());
        while keep > 8
            && head
                .estimate_text_size(&text, &font)
                .is_ok_and(|(w, _)| w > room)
        {
            keep = keep * 9 / 10;
            text = chars[..keep].iter().collect::<String>() + "…";
        }
        head.draw(&Text::new(text, (16, 12 + 26 * k as i32), font))?;
    }
    Ok(())
}

fn draw_plan<DB: DrawingBackend>(root: DrawingArea<DB, Shift>, d: &PlanData) -> Result<(), String> {
    let e = |x: DrawingAreaErrorKind<DB::ErrorType>| x.to_string();
    root.fill(&WHITE).map_err(e)?;
    let n = d.trace.live.len().max(1) as f64;
    let peak = d.trace.live.iter().copied().max().unwrap_or_default();
    let top = peak.max(d.budget.unwrap_or_default()).as_f64() / d.div * 1.3;
    // The title and the list of recomputed nodes, above the chart.
    let (head, body) = root.split_vertically(64);
    draw_title(&head, &d.title).map_err(e)?;
    let mut chart = ChartBuilder::on(&body)
        .margin(16)
        .x_label_area_size(50)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..n, 0f64..top.max(1e-9))
        .map_err(e)?;
    chart
        .configure_mesh()
        .x_desc("plan statement")
        .x_label_formatter(&tick)
        .y_label_formatter(&tick)
        .y_desc(format!("memory in use ({})", d.unit))
        .axis_desc_style(("sans-serif", 17))
        .label_style(("sans-serif", 14))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()
        .map_err(e)?;
    let blue = COLORS[0];
    let mut pts = Vec::with_capacity(2 * d.trace.live.len());
    let mut prev = d.fixed.as_f64() / d.div;
    for (i, b) in d.trace.live.iter().enumerate() {
        let y = b.as_f64() / d.div;
        pts.push((i as f64, prev));
        pts.push((i as f64, y));
        prev = y;
    }
    pts.push((n, prev));
    chart
        .draw_series(AreaSeries::new(pts.iter().copied(), 0.0, blue.mix(0.18)))
        .map_err(e)?;
    chart
        .draw_series(LineSeries::new(pts.iter().copied(), blue.stroke_width(2)))
        .map_err(e)?
        .label(format!("memory in use (peak {})", peak.human()))
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 22, y)], blue.stroke_width(2)));
    if d.fixed > Bytes::ZERO {
        let gray = RGBColor(120, 120, 120);
        let f = d.fixed.as_f64() / d.div;
        chart
            .draw_series(DashedLineSeries::new(
                [(0.0, f), (n, f)],
                4,
                4,
                gray.stroke_width(1),
            ))
            .map_err(e)?
            .label(format!("fixed memory {}", d.fixed.human()))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 22, y)], gray));
    }
    if let Some(b) = d.budget {
        let red = COLORS[3];
        let y = b.as_f64() / d.div;
        chart
            .draw_series(DashedLineSeries::new(
                [(0.0, y), (n, y)],
                10,
                5,
                red.stroke_width(2),
            ))
            .map_err(e)?
            .label(format!("budget {}", b.human()))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 22, y)], red.stroke_width(2)));
    }
    if let Some(s) = d.trace.backward_start {
        let green = COLORS[2];
        chart
            .draw_series(DashedLineSeries::new(
                [(s as f64, 0.0), (s as f64, top)],
                3,
                3,
                green.stroke_width(1),
            ))
            .map_err(e)?
            .label("backward pass starts")
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 22, y)], green));
    }
    if !d.trace.recomputations.is_empty() {
        let orange = COLORS[1];
        chart
            .draw_series(d.trace.recomputations.iter().map(|&i| {
                TriangleMarker::new(
                    (i as f64, d.trace.live[i].as_f64() / d.div),
                    5,
                    orange.filled(),
                )
            }))
            .map_err(e)?
            .label(format!("recomputation ({})", d.trace.recomputations.len()))
            .legend(move |(x, y)| TriangleMarker::new((x + 11, y), 5, orange.filled()));
        // Named where there is room for the names; past that the legend
        // lists the most recomputed nodes.
        if d.recomputed.len() <= 24 {
            let font = ("sans-serif", 12).into_font().color(&orange);
            for (i, name) in &d.recomputed {
                // Just above the marker, reading upwards.
                let y = d.trace.live[*i].as_f64() / d.div + top * 0.02;
                chart
                    .draw_series(std::iter::once(Text::new(
                        name.clone(),
                        (*i as f64, y),
                        font.clone().transform(FontTransform::Rotate270),
                    )))
                    .map_err(e)?;
            }
        }
    }
    draw_legend(&mut chart, SeriesLabelPosition::UpperLeft)
}

/// "conv1 x3, conv2, ...": the most recomputed nodes first, at most `max`.
fn recomputed_summary(recomputed: &[(usize, String)], max: usize) -> String {
    let mut counts: Vec<(String, usize)> = Vec::new();
    for (_, n) in recomputed {
        match counts.iter_mut().find(|(m, _)| m == n) {
            Some(c) => c.1 += 1,
            None => counts.push((n.clone(), 1)),
        }
    }
    counts.sort_by_key(|c| std::cmp::Reverse(c.1));
    let mut parts: Vec<String> = counts
        .iter()
        .take(max)
        .map(|(n, c)| {
            if *c > 1 {
                format!("{n} x{c}")
            } else {
                n.clone()
            }
        })
        .collect();
    if counts.len() > max {
        parts.push(format!("and {} more", counts.len() - max));
    }
    parts.join(", ")
}

/// ` (strategy)` for a title, nothing for a plan that names none (a
/// hand-written one titled its figure `model () on device`).
fn strategy_label(strategy: &str) -> String {
    if strategy.trim().is_empty() {
        String::new()
    } else {
        format!(" ({strategy})")
    }
}

/// Figure 1: memory in use over the plan's statements against the budget,
/// with recomputations marked.
pub fn plot_plan(
    g: &Graph,
    plan: &Plan,
    budget: Option<Bytes>,
    strategy: &str,
    path: &Path,
) -> Result<MemoryTrace, PlotError> {
    let trace = memory_trace(g, plan)?;
    let sim = simulate(g, plan)?;
    let max = trace
        .live
        .iter()
        .copied()
        .max()
        .unwrap_or_default()
        .max(budget.unwrap_or_default());
    let (div, unit) = byte_unit(max.as_f64());
    let recomputed: Vec<(usize, String)> = trace
        .recomputations
        .iter()
        .filter_map(|&i| match &plan.statements[i] {
            Statement::Compute { node, .. } => Some((i, g.node(*node).name.clone())),
            _ => None,
        })
        .collect();
    let mut title = format!(
        "{}{}: cost {:.3}x checkpoint-all, {}",
        g.name,
        strategy_label(strategy),
        g.overhead(sim.cost),
        crate::cli::plural(
            trace.recomputations.len(),
            "recomputation",
            "recomputations"
        )
    );
    if let Some(b) = budget.filter(|b| sim.peak > *b) {
        title = format!(
            "{}{}: peak {} EXCEEDS the budget {}",
            g.name,
            strategy_label(strategy),
            sim.peak.human(),
            b.human()
        );
    }
    if !recomputed.is_empty() {
        title.push_str(&format!(
            "\nrecomputed: {}",
            recomputed_summary(&recomputed, 8)
        ));
    }
    let d = PlanData {
        title,
        recomputed,
        unit,
        div,
        trace,
        budget,
        fixed: g.fixed_memory,
    };
    render(path, |r| draw_plan(r, &d), |r| draw_plan(r, &d))?;
    Ok(d.trace)
}

/// What a timed plan figure draws: the simulator's timeline and report.
struct TimedData {
    title: String,
    timeline: crate::schedule::Timeline,
    step: f64,
    budget: Option<Bytes>,
    fast_peak: Bytes,
    slow_peak: Bytes,
    /// Names of the copy lanes, engine 0 first (none on a synchronous
    /// device, whose copies run on the compute lane).
    engines: Vec<&'static str>,
}

/// A time scale for axis labels: divisor and unit name.
fn time_unit(max: f64) -> (f64, &'static str) {
    if max >= 1.0 {
        (1.0, "s")
    } else if max >= 1e-3 {
        (1e-3, "ms")
    } else {
        (1e-6, "µs")
    }
}

const FORWARD: RGBColor = RGBColor(31, 119, 180);
const BACKWARD: RGBColor = RGBColor(44, 160, 44);
const RECOMPUTE: RGBColor = RGBColor(255, 127, 14);
const TO_SLOW: RGBColor = RGBColor(148, 103, 189);
const TO_FAST: RGBColor = RGBColor(23, 190, 207);

fn draw_timed<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    d: &TimedData,
    g: &Graph,
) -> Result<(), String> {
    use crate::schedule::Lane;
    let e = |x: DrawingAreaErrorKind<DB::ErrorType>| x.to_string();
    root.fill(&WHITE).map_err(e)?;
    let (head, body) = root.split_vertically(64);
    draw_title(&head, &d.title).map_err(e)?;
    let lanes = 1 + d.engines.len();
    // At least three lane heights, so that the lanes' legend fits below a
    // lone compute lane (a synchronous device) too.
    let slots = lanes.max(3);
    let (mem_area, lane_area) =
        body.split_vertically(body.dim_in_pixel().1 as i32 - 60 - 34 * slots as i32);
    let (tdiv, tunit) = time_unit(d.step);
    let end = (d.step / tdiv).max(1e-12);
    // Room right of the step's end for the lanes' legend, on both charts
    // so that their time axes line up.
    let right = end * 1.16;
    let top_bytes = d
        .fast_peak
        .max(d.slow_peak)
        .max(d.budget.unwrap_or_default());
    let (div, unit) = byte_unit(top_bytes.as_f64());
    let top = (top_bytes.as_f64() / div * 1.3).max(1e-9);

    // Both tiers' occupancy against time: step functions, each point the
    // level from that time on.
    let mut chart = ChartBuilder::on(&mem_area)
        .margin(16)
        .margin_bottom(4)
        .x_label_area_size(24)
        .y_label_area_size(110)
        .build_cartesian_2d(0f64..right, 0f64..top)
        .map_err(e)?;
    chart
        .configure_mesh()
        .x_label_formatter(&tick)
        .y_label_formatter(&tick)
        .y_desc(format!("memory ({unit})"))
        .axis_desc_style(("sans-serif", 17))
        .label_style(("sans-serif", 14))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()
        .map_err(e)?;
    let steps = |level: &dyn Fn(&crate::schedule::MemoryPoint) -> Bytes, start: Bytes| {
        let mut pts = Vec::with_capacity(2 * d.timeline.memory.len() + 2);
        let mut prev = start.as_f64() / div;
        pts.push((0.0, prev));
        for m in &d.timeline.memory {
            let (x, y) = (m.time.get() / tdiv, level(m).as_f64() / div);
            pts.push((x, prev));
            pts.push((x, y));
            prev = y;
        }
        pts.push((end, prev));
        pts
    };
    let fast = steps(&|m| m.fast, g.fixed_memory);
    let slow = steps(&|m| m.slow, Bytes::ZERO);
    chart
        .draw_series(AreaSeries::new(
            fast.iter().copied(),
            0.0,
            FORWARD.mix(0.15),
        ))
        .map_err(e)?;
    chart
        .draw_series(LineSeries::new(fast, FORWARD.stroke_width(2)))
        .map_err(e)?
        .label(format!("fast tier (peak {})", d.fast_peak.human()))
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 22, y)], FORWARD.stroke_width(2)));
    chart
        .draw_series(LineSeries::new(slow, TO_SLOW.stroke_width(2)))
        .map_err(e)?
        .label(format!("slow tier (peak {})", d.slow_peak.human()))
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 22, y)], TO_SLOW.stroke_width(2)));
    if let Some(b) = d.budget {
        let red = COLORS[3];
        let y = b.as_f64() / div;
        chart
            .draw_series(DashedLineSeries::new(
                [(0.0, y), (end, y)],
                10,
                5,
                red.stroke_width(2),
            ))
            .map_err(e)?
            .label(format!("budget {}", b.human()))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 22, y)], red.stroke_width(2)));
    }
    draw_legend(&mut chart, SeriesLabelPosition::UpperRight)?;

    // The lanes: compute on top, then each copy engine; a bar per
    // computation or copy, gaps on the compute lane are stalls.
    let names: Vec<&str> = std::iter::once("compute")
        .chain(d.engines.iter().copied())
        .collect();
    let mut lanes_chart = ChartBuilder::on(&lane_area)
        .margin(16)
        .margin_top(0)
        .x_label_area_size(46)
        .y_label_area_size(110)
        .build_cartesian_2d(0f64..right, 0f64..slots as f64)
        .map_err(e)?;
    let lane_label = |y: &f64| {
        let k = (slots as f64 - y - 0.5).round();
        if (y.fract() - 0.5).abs() < 1e-6 && k >= 0.0 && (k as usize) < names.len() {
            names[k as usize].to_string()
        } else {
            String::new()
        }
    };
    lanes_chart
        .configure_mesh()
        .disable_y_mesh()
        .x_desc(format!("time ({tunit})"))
        .x_label_formatter(&tick)
        .y_labels(2 * slots + 1)
        .y_label_formatter(&lane_label)
        .axis_desc_style(("sans-serif", 17))
        .label_style(("sans-serif", 13))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()
        .map_err(e)?;
    // Lane k's band, top to bottom; bars narrower than a pixel are
    // widened to one so that short copies still show.
    let min_w = end / 700.0;
    // A white outline keeps back-to-back bars (copies queued on one
    // engine, computations without a stall between them) apart, where
    // bars are wide enough to spare it: on a plan of a thousand
    // statements it would leave nothing but white.
    let bar = |lane: usize, start: f64, stop: f64, color: RGBColor| {
        let y0 = slots as f64 - lane as f64 - 0.85;
        let x0 = start / tdiv;
        let x1 = (stop / tdiv).max(x0 + min_w);
        let corners = [(x0, y0), (x1, y0 + 0.7)];
        let edge = if x1 - x0 > 5.0 * min_w {
            WHITE.stroke_width(1)
        } else {
            color.stroke_width(1)
        };
        [
            Rectangle::new(corners, color.filled()),
            Rectangle::new(corners, edge),
        ]
    };
    let lane_of = |l: Lane| match l {
        Lane::Compute => 0,
        Lane::Engine(k) => (1 + k).min(lanes - 1),
    };
    // 0: forward, 1: backward, 2: a recomputation of either.
    let kind = |c: &crate::schedule::ComputeSpan| match (c.recompute, g.node(c.node).backward) {
        (true, _) => 2,
        (false, false) => 0,
        (false, true) => 1,
    };
    let kinds = [
        ("forward", FORWARD),
        ("backward", BACKWARD),
        ("recomputation", RECOMPUTE),
    ];
    for (k, (label, color)) in kinds.into_iter().enumerate() {
        let spans: Vec<_> = d
            .timeline
            .computes
            .iter()
            .filter(|c| kind(c) == k)
            .collect();
        if spans.is_empty() {
            continue;
        }
        lanes_chart
            .draw_series(
                spans
                    .iter()
                    .flat_map(|c| bar(0, c.start.get(), c.end.get(), color)),
            )
            .map_err(e)?
            .label(label)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 16, y + 5)], color.filled()));
    }
    for (label, color, out) in [
        ("copy to slow", TO_SLOW, true),
        ("copy to fast", TO_FAST, false),
    ] {
        let spans: Vec<_> = d
            .timeline
            .copies
            .iter()
            .filter(|c| c.to_slow == out)
            .collect();
        if spans.is_empty() {
            continue;
        }
        lanes_chart
            .draw_series(
                spans
                    .iter()
                    .flat_map(|c| bar(lane_of(c.lane), c.start.get(), c.end.get(), color)),
            )
            .map_err(e)?
            .label(label)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 16, y + 5)], color.filled()));
    }
    lanes_chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 12))
        .draw()
        .map_err(e)
}

/// The timed figure of a plan on a device: both tiers' memory against
/// time, with the budget line, above the compute stream's and the copy
/// engines' lanes. Everything drawn comes from one replay by the simulator.
pub fn plot_plan_timed(
    g: &Graph,
    plan: &Plan,
    device: &crate::device::Device,
    budget: Option<Bytes>,
    strategy: &str,
    path: &Path,
) -> Result<(crate::schedule::SimReport, crate::schedule::Timeline), PlotError> {
    use crate::device::Engines;
    let (sim, timeline) = crate::schedule::simulate_timeline(g, plan, device)?;
    let t = sim.timing.clone().expect("a timed replay has timing");
    let fast = device.all_fast_step(g).get();
    let over = if fast > 0.0 {
        format!("{:+.1}%", (t.step.get() / fast - 1.0) * 100.0)
    } else {
        "n/a".into()
    };
    let mut title = format!(
        "{}{} on {}: step {} ({over} vs all-fast)",
        g.name,
        strategy_label(strategy),
        device.name,
        t.step
    );
    if let Some(b) = budget.filter(|b| sim.peak > *b) {
        title.push_str(&format!(
            ", fast peak {} EXCEEDS the budget {}",
            sim.peak.human(),
            b.human()
        ));
    }
    title.push_str(&format!(
        "\nstalled {}; moved {} to slow and {} to fast in {}; {}",
        t.stall,
        t.bytes_to_slow.human(),
        t.bytes_to_fast.human(),
        crate::cli::plural(t.copies, "copy", "copies"),
        crate::cli::plural(
            sim.computations - g.len(),
            "recomputation",
            "recomputations"
        ),
    ));
    let engines = match device.slow.engines {
        Engines::Duplex => vec!["engine → slow", "engine → fast"],
        Engines::Shared => vec!["copy engine"],
        Engines::Synchronous => vec![],
    };
    let d = TimedData {
        title,
        timeline,
        step: t.step.get(),
        budget,
        fast_peak: sim.peak,
        slow_peak: t.slow_peak,
        engines,
    };
    render(path, |r| draw_timed(r, &d, g), |r| draw_timed(r, &d, g))?;
    Ok((sim, d.timeline))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_plan_without_a_strategy_has_no_empty_parentheses() {
        assert_eq!(super::strategy_label(""), "");
        assert_eq!(super::strategy_label("  "), "");
        assert_eq!(super::strategy_label("remat-fast"), " (remat-fast)");
    }

    /// The tiny MLP of docs/format.md: bound 1.144 at 493,724 B and 1.0 at
    /// 520,000 B, where a plan at 505,000 B costs 1.0. A line between them
    /// claimed about 1.08 there; the steps claim 1.0 past 493,724 B.
    #[test]
    fn the_bound_between_samples_claims_only_the_next_ones() {
        let s = super::bound_steps(&[(493_724.0, 1.144), (520_000.0, 1.0), (600_000.0, 1.0)]);
        assert_eq!(
            s,
            vec![
                (493_724.0, 1.144),
                (493_724.0, 1.0),
                (520_000.0, 1.0),
                (520_000.0, 1.0),
                (600_000.0, 1.0)
            ]
        );
        // A bound that rises with the budget holds below too.
        let s = super::bound_steps(&[(1.0, 1.0), (2.0, 1.5)]);
        assert_eq!(s, vec![(1.0, 1.5), (1.0, 1.5), (2.0, 1.5)]);
        assert!(super::bound_steps(&[]).is_empty());
    }
}
