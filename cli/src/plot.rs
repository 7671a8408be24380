//! `bench --plot`: the fastest kernel of each case and call of each peer as grouped bars (SVG).

use crate::bench::{best, Measured};
use plotters::coord::ranged1d::SegmentValue;
use plotters::prelude::*;
use std::path::Path;

/// Colours of the series: sparsec's schedules first, then the peers.
const COLOURS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

/// Draws `measured` to `path`: a group of bars per data set (matrix and feature width), a
/// bar per schedule and per peer, the fastest kernel or call in milliseconds on a
/// logarithmic axis.
pub fn bars(path: &Path, title: &str, measured: &[Measured]) -> Result<(), String> {
    let fail = |e: String| format!("--plot {}: {e}", path.display());
    // Groups in order of appearance; series: schedules, then peers.
    let mut groups: Vec<&str> = Vec::new();
    let mut series: Vec<String> = Vec::new();
    for m in measured {
        if !groups.contains(&m.data.as_str()) {
            groups.push(&m.data);
        }
        if !series.contains(&format!("sparsec {}", m.schedule)) {
            series.push(format!("sparsec {}", m.schedule));
        }
    }
    let peers: Vec<String> = measured.first().map(|m| m.peers.iter().map(|(p, _)| p.name()).collect()).unwrap_or_default();
    series.extend(peers.iter().cloned());
    // (group, series) -> milliseconds.
    let mut value = vec![vec![f64::NAN; series.len()]; groups.len()];
    for m in measured {
        let g = groups.iter().position(|x| *x == m.data).unwrap_or(0);
        let s = series.iter().position(|x| *x == format!("sparsec {}", m.schedule)).unwrap_or(0);
        value[g][s] = m.kernel();
        for (k, (_, v)) in m.peers.iter().enumerate() {
            let slot = &mut value[g][series.len() - peers.len() + k];
            *slot = if slot.is_nan() { best(v) } else { slot.min(best(v)) };
        }
    }
    let all: Vec<f64> = value.iter().flatten().copied().filter(|v| v.is_finite() && *v > 0.0).collect();
    if all.is_empty() {
        return Err(fail("nothing was measured".into()));
    }
    let (lo, hi) = (all.iter().copied().fold(f64::INFINITY, f64::min) / 2.0, all.iter().copied().fold(0.0, f64::max) * 12.0);
    // (headroom above the bars for the legend)
    let slots = series.len() + 1;
    let width = (160 + groups.len() * slots * 36).clamp(640, 2400) as u32;
    let root = SVGBackend::new(path, (width, 520)).into_drawing_area();
    let err = |e: DrawingAreaErrorKind<std::io::Error>| fail(e.to_string());
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(format!("{title}: fastest kernel"), ("sans-serif", 22))
        .margin(16)
        .x_label_area_size(70)
        .y_label_area_size(80)
        .build_cartesian_2d((0..groups.len() * slots).into_segmented(), (lo..hi).log_scale())
        .map_err(err)?;
    let label = |v: &SegmentValue<usize>| match v {
        SegmentValue::CenterOf(k) if k % slots == series.len() / 2 && k / slots < groups.len() => groups[k / slots].to_string(),
        _ => String::new(),
    };
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(groups.len() * slots)
        .x_label_formatter(&label)
        .x_label_style(("sans-serif", 14))
        .y_desc("milliseconds (log scale; lower is faster)")
        .y_label_style(("sans-serif", 13))
        .draw()
        .map_err(err)?;
    for (s, name) in series.iter().enumerate() {
        let colour = COLOURS[s % COLOURS.len()];
        let rects: Vec<_> = (0..groups.len())
            .filter(|&g| value[g][s].is_finite())
            .map(|g| {
                let k = g * slots + s;
                Rectangle::new([(SegmentValue::Exact(k), lo), (SegmentValue::Exact(k + 1), value[g][s])], colour.filled())
            })
            .collect();
        chart
            .draw_series(rects)
            .map_err(err)?
            .label(name.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 14, y + 6)], colour.filled()));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .draw()
        .map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}
