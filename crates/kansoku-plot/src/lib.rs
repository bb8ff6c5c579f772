//! # kansoku-plot — small SVG charts, written by hand
//!
//! Every chart is a function from data to a complete, self-contained SVG document
//! (`String`): no fonts to embed, no scripts, only `<line>`, `<polyline>`, `<polygon>`,
//! `<rect>`, `<circle>` and `<text>`. Charts:
//!
//! * [`kiviat`] — a radar ("Kiviat") graph of percentages, the seed-001 figure 4 picture.
//! * [`time_series`] — several named series over a common x axis.
//! * [`waveform`] — points (x, address) in several classes (code, data) over horizontal
//!   labelled address bands (functions, sections, heap, stack).
//! * [`histogram`] — bars over bins.
//! * [`timeline`] — rows of categorised positions (instruction traces coloured by
//!   function), the positions where the first two differ, and framed uncertain spans.
//!
//! Text is escaped; non-finite values are skipped, so a chart never becomes invalid XML.

#![deny(missing_docs)]

use std::fmt::Write;

/// A colour palette readable on white, used in order.
pub const PALETTE: &[&str] = &["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"];

/// Escapes text for SVG.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c if (c as u32) < 0x20 && c != '\n' && c != '\t' => {}
            c => out.push(c),
        }
    }
    out
}

struct Doc {
    s: String,
}

impl Doc {
    fn new(width: f64, height: f64, title: &str) -> Doc {
        let mut s = String::new();
        let (size, title) = fit_title(title, width);
        let _ = write!(
            s,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" viewBox=\"0 0 {width} {height}\" font-family=\"sans-serif\" font-size=\"12\">\n<rect x=\"0\" y=\"0\" width=\"{width}\" height=\"{height}\" fill=\"white\"/>\n<text x=\"{}\" y=\"20\" text-anchor=\"middle\" font-size=\"{size:.1}\" font-weight=\"bold\">{}</text>\n",
            width / 2.0,
            escape(&title)
        );
        Doc { s }
    }
    fn line(&mut self, x1: f64, y1: f64, x2: f64, y2: f64, stroke: &str, width: f64) {
        let _ = writeln!(self.s, "<line x1=\"{x1:.2}\" y1=\"{y1:.2}\" x2=\"{x2:.2}\" y2=\"{y2:.2}\" stroke=\"{stroke}\" stroke-width=\"{width}\"/>");
    }
    fn text(&mut self, x: f64, y: f64, anchor: &str, size: f64, fill: &str, text: &str) {
        let _ = writeln!(self.s, "<text x=\"{x:.2}\" y=\"{y:.2}\" text-anchor=\"{anchor}\" font-size=\"{size}\" fill=\"{fill}\">{}</text>", escape(text));
    }
    fn rect(&mut self, x: f64, y: f64, w: f64, h: f64, fill: &str, opacity: f64) {
        let _ = writeln!(self.s, "<rect x=\"{x:.2}\" y=\"{y:.2}\" width=\"{:.2}\" height=\"{:.2}\" fill=\"{fill}\" fill-opacity=\"{opacity}\"/>", w.max(0.0), h.max(0.0));
    }
    fn finish(mut self) -> String {
        self.s.push_str("</svg>\n");
        self.s
    }
}

/// Axis bounds that include all finite values; a degenerate range is widened.
fn bounds(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in values.filter(|v| v.is_finite()) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    if hi - lo < 1e-12 {
        return (lo - 0.5, hi + 0.5);
    }
    (lo, hi)
}

/// Formats a tick value compactly.
pub fn tick_label(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if !(1e-3..1e6).contains(&a) {
        format!("{v:.3e}")
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.3}").trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// A title that fits the picture's width: the font shrinks from 15 to 9 px, and a title
/// still too long is cut with an ellipsis (a bold sans-serif character is about 0.62 em).
fn fit_title(title: &str, width: f64) -> (f64, String) {
    let chars = title.chars().count().max(1) as f64;
    let room = width * 0.96;
    let size = (room / (0.62 * chars)).clamp(9.0, 15.0);
    let fits = (room / (0.62 * size)) as usize;
    if title.chars().count() <= fits {
        return (size, title.to_string());
    }
    (size, title.chars().take(fits.saturating_sub(1)).collect::<String>() + "…")
}

/// Picks labels that do not overlap: `(y, priority, text)`, higher priority first; a
/// label closer than `min_gap` px to one already placed is left out.
fn non_overlapping(mut labels: Vec<(f64, f64, String)>, min_gap: f64) -> Vec<(f64, String)> {
    labels.sort_by(|a, b| b.1.total_cmp(&a.1));
    let mut placed: Vec<(f64, String)> = Vec::new();
    for (y, _, text) in labels {
        if placed.iter().all(|(py, _)| (py - y).abs() >= min_gap) {
            placed.push((y, text));
        }
    }
    placed
}

/// A plotting frame: data → pixel transforms, axes with ticks and labels.
struct Frame {
    left: f64,
    top: f64,
    width: f64,
    height: f64,
    x: (f64, f64),
    y: (f64, f64),
}

impl Frame {
    fn px(&self, x: f64) -> f64 {
        self.left + (x - self.x.0) / (self.x.1 - self.x.0) * self.width
    }
    fn py(&self, y: f64) -> f64 {
        self.top + self.height - (y - self.y.0) / (self.y.1 - self.y.0) * self.height
    }
    /// Linear axes: five ticks on x (and y when `y_ticks`), labelled.
    fn axes(&self, doc: &mut Doc, x_label: &str, y_label: &str, y_ticks: bool) {
        self.axis_lines(doc);
        for i in 0..=5 {
            let f = i as f64 / 5.0;
            let xv = self.x.0 + f * (self.x.1 - self.x.0);
            self.x_tick(doc, xv, &tick_label(xv));
            if y_ticks {
                let yv = self.y.0 + f * (self.y.1 - self.y.0);
                self.y_tick(doc, yv, &tick_label(yv));
            }
        }
        self.axis_labels(doc, x_label, y_label);
    }
    fn axis_lines(&self, doc: &mut Doc) {
        doc.line(self.left, self.top + self.height, self.left + self.width, self.top + self.height, "black", 1.0);
        doc.line(self.left, self.top, self.left, self.top + self.height, "black", 1.0);
    }
    /// A tick and its label at data value `xv` on the x axis.
    fn x_tick(&self, doc: &mut Doc, xv: f64, label: &str) {
        let x = self.px(xv);
        doc.line(x, self.top + self.height, x, self.top + self.height + 4.0, "black", 1.0);
        doc.text(x, self.top + self.height + 16.0, "middle", 10.0, "black", label);
    }
    /// A tick, its grid line and its label at data value `yv` on the y axis.
    fn y_tick(&self, doc: &mut Doc, yv: f64, label: &str) {
        let y = self.py(yv);
        doc.line(self.left - 4.0, y, self.left, y, "black", 1.0);
        doc.line(self.left, y, self.left + self.width, y, "#e0e0e0", 0.5);
        doc.text(self.left - 6.0, y + 3.0, "end", 10.0, "black", label);
    }
    fn axis_labels(&self, doc: &mut Doc, x_label: &str, y_label: &str) {
        doc.text(self.left + self.width / 2.0, self.top + self.height + 32.0, "middle", 12.0, "black", x_label);
        let _ = writeln!(
            doc.s,
            "<text x=\"14\" y=\"{:.2}\" text-anchor=\"middle\" transform=\"rotate(-90 14 {:.2})\">{}</text>",
            self.top + self.height / 2.0,
            self.top + self.height / 2.0,
            escape(y_label)
        );
    }
}

/// A Kiviat (radar) graph: one axis per `(label, percent)`, 0 at the centre and 100 at
/// the rim, the polygon of values filled. Seed 001 draws its eight items this way: odd
/// items (activity) large and even items (waiting) small make a cross.
pub fn kiviat(title: &str, axes: &[(&str, f64)]) -> String {
    let (w, h) = (760.0, 520.0);
    let (cx, cy, r) = (w / 2.0, h / 2.0 + 15.0, 180.0);
    let mut doc = Doc::new(w, h, title);
    let n = axes.len().max(3);
    let angle = |i: usize| -std::f64::consts::FRAC_PI_2 + i as f64 * std::f64::consts::TAU / n as f64;
    for ring in [25.0, 50.0, 75.0, 100.0] {
        let pts: Vec<String> = (0..n).map(|i| format!("{:.2},{:.2}", cx + r * ring / 100.0 * angle(i).cos(), cy + r * ring / 100.0 * angle(i).sin())).collect();
        let _ = writeln!(doc.s, "<polygon points=\"{}\" fill=\"none\" stroke=\"#c0c0c0\" stroke-width=\"0.8\"/>", pts.join(" "));
        doc.text(cx + 3.0, cy - r * ring / 100.0 + 11.0, "start", 9.0, "#808080", &format!("{ring:.0}%"));
    }
    let mut pts = Vec::new();
    for (i, (label, value)) in axes.iter().enumerate() {
        let a = angle(i);
        doc.line(cx, cy, cx + r * a.cos(), cy + r * a.sin(), "#808080", 0.8);
        let v = if value.is_finite() { value.clamp(0.0, 100.0) } else { 0.0 };
        pts.push(format!("{:.2},{:.2}", cx + r * v / 100.0 * a.cos(), cy + r * v / 100.0 * a.sin()));
        let (lx, ly) = (cx + (r + 18.0) * a.cos(), cy + (r + 18.0) * a.sin());
        let anchor = if a.cos() > 0.2 { "start" } else if a.cos() < -0.2 { "end" } else { "middle" };
        doc.text(lx, ly, anchor, 12.0, "black", &format!("{} {}", label, if value.is_finite() { format!("{value:.1}%") } else { "n/a".into() }));
    }
    if !axes.is_empty() {
        let _ = writeln!(doc.s, "<polygon points=\"{}\" fill=\"#1f77b4\" fill-opacity=\"0.35\" stroke=\"#1f77b4\" stroke-width=\"2\"/>", pts.join(" "));
    }
    doc.finish()
}

/// One named series of `(x, y)` points.
pub struct Series<'a> {
    /// The legend's text.
    pub name: &'a str,
    /// The points, in the order the line joins them.
    pub points: &'a [(f64, f64)],
}

/// Lines over a common x axis, with a legend. `y_range` fixes the y axis (e.g. 0..100 %).
pub fn time_series(title: &str, x_label: &str, y_label: &str, series: &[Series], y_range: Option<(f64, f64)>) -> String {
    let (w, h) = (820.0, 420.0);
    let mut doc = Doc::new(w, h, title);
    let x = bounds(series.iter().flat_map(|s| s.points.iter().map(|p| p.0)));
    let y = y_range.unwrap_or_else(|| bounds(series.iter().flat_map(|s| s.points.iter().map(|p| p.1))));
    let frame = Frame { left: 70.0, top: 40.0, width: 560.0, height: 310.0, x, y };
    frame.axes(&mut doc, x_label, y_label, true);
    for (i, s) in series.iter().enumerate() {
        let colour = PALETTE[i % PALETTE.len()];
        let pts: Vec<String> = s.points.iter().filter(|p| p.0.is_finite() && p.1.is_finite()).map(|p| format!("{:.2},{:.2}", frame.px(p.0), frame.py(p.1))).collect();
        if !pts.is_empty() {
            let _ = writeln!(doc.s, "<polyline points=\"{}\" fill=\"none\" stroke=\"{colour}\" stroke-width=\"1.5\"/>", pts.join(" "));
        }
        let ly = 50.0 + 18.0 * i as f64;
        doc.line(645.0, ly, 665.0, ly, colour, 3.0);
        doc.text(670.0, ly + 4.0, "start", 11.0, "black", s.name);
    }
    doc.finish()
}

/// A class of waveform points (e.g. code addresses, data addresses).
pub struct PointClass<'a> {
    /// The legend's text.
    pub name: &'a str,
    /// `(x, address)` of each point.
    pub points: &'a [(f64, f64)],
}

/// A labelled address range drawn as a horizontal band behind the points.
pub struct Band {
    /// What the range is (a function, a section, the heap), written at its left edge.
    pub label: String,
    /// The lowest address of the range.
    pub low: f64,
    /// The address just past the range.
    pub high: f64,
}

/// The program waveform: address (y) against time or sample number (x), one colour per
/// class, labelled address bands. Addresses far apart make a linear y axis useless
/// (code near 0x5555_5555_0000, stack near 0x7fff_ffff_0000), so the y axis is *broken*:
/// each band and each cluster of points gets its own stretch of the axis, in address
/// order, with a gap between stretches.
pub fn waveform(title: &str, x_label: &str, classes: &[PointClass], bands: &[Band]) -> String {
    let (w, h) = (900.0, 560.0);
    let mut doc = Doc::new(w, h, title);
    let x = bounds(classes.iter().flat_map(|c| c.points.iter().map(|p| p.0)));
    // Segments of the broken axis: bands that hold points, plus clusters of unbanded points.
    let mut ranges: Vec<(f64, f64)> = Vec::new();
    let in_band = |a: f64| bands.iter().any(|b| a >= b.low && a < b.high);
    for b in bands {
        if classes.iter().any(|c| c.points.iter().any(|p| p.1 >= b.low && p.1 < b.high)) {
            ranges.push((b.low, b.high));
        }
    }
    let mut loose: Vec<f64> = classes.iter().flat_map(|c| c.points.iter().map(|p| p.1)).filter(|a| a.is_finite() && !in_band(*a)).collect();
    loose.sort_by(|a, b| a.total_cmp(b));
    let mut i = 0;
    while i < loose.len() {
        let start = loose[i];
        let mut end = start;
        while i < loose.len() && loose[i] - end <= 65536.0 {
            end = loose[i];
            i += 1;
        }
        ranges.push((start - 8.0, end + 8.0));
    }
    ranges.sort_by(|a, b| a.0.total_cmp(&b.0));
    // Merge overlapping ranges.
    let mut merged: Vec<(f64, f64)> = Vec::new();
    for r in ranges {
        match merged.last_mut() {
            Some(last) if r.0 <= last.1 => last.1 = last.1.max(r.1),
            _ => merged.push(r),
        }
    }
    if merged.is_empty() {
        merged.push((0.0, 1.0));
    }
    let (left, top, width, height) = (150.0, 40.0, 600.0, 460.0);
    let gap = 8.0;
    let seg_h = (height - gap * (merged.len() as f64 - 1.0)).max(10.0) / merged.len() as f64;
    // Segment k occupies [bottom - (k+1) seg_h - k gap, bottom - k (seg_h + gap)].
    let map_y = |a: f64| -> Option<f64> {
        let k = merged.iter().position(|r| a >= r.0 && a <= r.1)?;
        let r = merged[k];
        let frac = if r.1 > r.0 { (a - r.0) / (r.1 - r.0) } else { 0.5 };
        Some(top + height - k as f64 * (seg_h + gap) - frac * seg_h)
    };
    let frame = Frame { left, top, width, height, x, y: (0.0, 1.0) };
    // Bands; their labels where they do not overlap (taller bands first).
    let mut labels = Vec::new();
    for (j, b) in bands.iter().enumerate() {
        let (Some(y0), Some(y1)) = (map_y(b.low), map_y(b.high.min(merged.iter().find(|r| b.low >= r.0 && b.low <= r.1).map_or(b.high, |r| r.1)))) else { continue };
        let fill = if j % 2 == 0 { "#f0f0f0" } else { "#e4e4f4" };
        doc.rect(left, y1, width, y0 - y1, fill, 1.0);
        labels.push(((y0 + y1) / 2.0 + 4.0, y0 - y1, b.label.clone()));
    }
    for (y, text) in non_overlapping(labels, 11.0) {
        doc.text(left - 6.0, y, "end", 10.0, "#303030", &text);
    }
    for (k, r) in merged.iter().enumerate() {
        let y_low = top + height - k as f64 * (seg_h + gap);
        doc.text(w - 4.0, y_low - 2.0, "end", 9.0, "#606060", &format!("0x{:x}", r.0 as u64));
        if seg_h >= 24.0 {
            doc.text(w - 4.0, y_low - seg_h + 9.0, "end", 9.0, "#606060", &format!("0x{:x}", r.1 as u64));
        }
        if k > 0 {
            let yb = y_low + gap / 2.0;
            doc.line(left - 8.0, yb + 2.0, left + 8.0, yb - 2.0, "black", 1.0);
        }
    }
    frame.axes(&mut doc, x_label, "address (broken axis, ranges labelled)", false);
    for (i, c) in classes.iter().enumerate() {
        let colour = PALETTE[i % PALETTE.len()];
        let radius = if c.points.len() > 5000 { 0.8 } else { 1.6 };
        for p in c.points {
            if let (true, Some(y)) = (p.0.is_finite(), map_y(p.1)) {
                let _ = writeln!(doc.s, "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"{radius}\" fill=\"{colour}\"/>", frame.px(p.0), y);
            }
        }
        // The legend sits under the plot, clear of the address labels on the right.
        let (lx, ly) = (left + 130.0 * i as f64, h - 10.0);
        let _ = writeln!(doc.s, "<circle cx=\"{lx}\" cy=\"{}\" r=\"4\" fill=\"{colour}\"/>", ly - 4.0);
        doc.text(lx + 10.0, ly, "start", 11.0, "black", &format!("{} ({})", c.name, c.points.len()));
    }
    doc.finish()
}

/// Bars: `bins` are `(low, high, count)`.
pub fn histogram(title: &str, x_label: &str, bins: &[(f64, f64, u64)]) -> String {
    let (w, h) = (720.0, 400.0);
    let mut doc = Doc::new(w, h, title);
    let x = bounds(bins.iter().flat_map(|b| [b.0, b.1]));
    let ymax = bins.iter().map(|b| b.2).max().unwrap_or(1).max(1) as f64;
    let frame = Frame { left: 70.0, top: 40.0, width: 610.0, height: 290.0, x, y: (0.0, ymax) };
    frame.axes(&mut doc, x_label, "count", true);
    for b in bins {
        let (x0, x1) = (frame.px(b.0), frame.px(b.1));
        let y = frame.py(b.2 as f64);
        doc.rect(x0, y, (x1 - x0 - 1.0).max(0.5), frame.py(0.0) - y, PALETTE[0], 0.8);
    }
    doc.finish()
}

/// A histogram on log scales: bins of equal ratio (see `log_histogram` in the monitor) as
/// equal widths on a log10 x axis, and counts on a log10(1 + count) y axis, so that a
/// thousand 40 ns calls and three 2 ms calls are both visible. Ticks at powers of ten.
pub fn log_histogram(title: &str, x_label: &str, bins: &[(f64, f64, u64)]) -> String {
    let (w, h) = (720.0, 400.0);
    let mut doc = Doc::new(w, h, title);
    let lg = |v: f64| v.max(1e-9).log10();
    let x = bounds(bins.iter().flat_map(|b| [lg(b.0), lg(b.1)]));
    let cmax = bins.iter().map(|b| b.2).max().unwrap_or(1).max(1) as f64;
    let y = (0.0, (1.0 + cmax).log10().max(0.5));
    let frame = Frame { left: 70.0, top: 40.0, width: 610.0, height: 290.0, x, y };
    frame.axis_lines(&mut doc);
    for v in log_ticks(10f64.powf(x.0), 10f64.powf(x.1)) {
        frame.x_tick(&mut doc, v.log10(), &duration_label(v));
    }
    for c in std::iter::once(0.0).chain(log_ticks(1.0, 10f64.powf(y.1) - 1.0)) {
        frame.y_tick(&mut doc, (1.0 + c).log10(), &tick_label(c));
    }
    frame.axis_labels(&mut doc, x_label, "calls (log scale)");
    for b in bins.iter().filter(|b| b.2 > 0) {
        let (x0, x1) = (frame.px(lg(b.0)), frame.px(lg(b.1)));
        let top = frame.py((1.0 + b.2 as f64).log10());
        doc.rect(x0, top, (x1 - x0 - 1.0).max(0.5), frame.py(0.0) - top, PALETTE[0], 0.8);
    }
    doc.finish()
}

/// Tick values for a log axis from `lo` to `hi`: powers of ten, or 1-2-5 steps (or every
/// digit) when the range holds fewer than two of them, so a narrow range is labelled too.
fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let (lo, hi) = (lo.max(1e-12), hi.max(1e-12));
    let (d0, d1) = (lo.log10().floor() as i32, hi.log10().ceil() as i32);
    for mantissas in [&[1.0][..], &[1.0, 2.0, 5.0], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]] {
        let ticks: Vec<f64> = (d0..=d1)
            .flat_map(|d| mantissas.iter().map(move |m| m * 10f64.powi(d)))
            .filter(|v| *v >= lo * (1.0 - 1e-9) && *v <= hi * (1.0 + 1e-9))
            .collect();
        if ticks.len() >= 2 || mantissas.len() == 9 {
            return ticks;
        }
    }
    Vec::new()
}

/// `40 ns`, `1 µs`, `2 ms`, `1 s` for a time in nanoseconds.
fn duration_label(ns: f64) -> String {
    let (v, unit) = if ns >= 1e9 {
        (ns / 1e9, "s")
    } else if ns >= 1e6 {
        (ns / 1e6, "ms")
    } else if ns >= 1e3 {
        (ns / 1e3, "µs")
    } else {
        (ns, "ns")
    };
    format!("{} {unit}", tick_label(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn well_formed(svg: &str) {
        assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
        assert!(svg.trim_end().ends_with("</svg>"));
        assert!(!svg.contains("NaN") && !svg.contains("inf"), "non-finite coordinate in {svg}");
        // Every element opened is closed: count '<' tags vs self-closing / closing.
        let opens = svg.matches("<text").count() + svg.matches("<svg").count();
        let closes = svg.matches("</text>").count() + svg.matches("</svg>").count();
        assert_eq!(opens, closes);
    }

    #[test]
    fn log_histogram_marks_decades_and_shows_rare_bins() {
        let svg = log_histogram("t", "x", &[(40.0, 80.0, 1000), (80.0, 2e6, 0), (1e6, 2e6, 3)]);
        well_formed(&svg);
        assert!(svg.contains(">100 ns<") && svg.contains(">1 ms<"), "{svg}");
        // Two bars (the empty bin draws none) besides the white background.
        assert_eq!(svg.matches("<rect").count(), 1 + 2, "{svg}");
    }

    #[test]
    fn kiviat_places_values_on_axes() {
        let svg = kiviat("eight items", &[("CPU active", 100.0), ("CPU only", 0.0), ("x", 50.0), ("y", f64::NAN)]);
        well_formed(&svg);
        // The first axis points up: value 100 lands on the rim straight above the centre.
        assert!(svg.contains("380.00,95.00"), "{svg}");
        assert!(svg.contains("y n/a"));
    }

    #[test]
    fn text_is_escaped() {
        let svg = time_series("a<b & \"c\"", "t", "y", &[Series { name: "<x>", points: &[(0.0, 1.0), (1.0, f64::INFINITY)] }], None);
        well_formed(&svg);
        assert!(svg.contains("a&lt;b &amp; &quot;c&quot;") && svg.contains("&lt;x&gt;"));
    }

    #[test]
    fn waveform_breaks_the_axis_between_far_ranges() {
        let code = [(0.0, 0x5555_0000_1000u64 as f64), (1.0, 0x5555_0000_1040u64 as f64)];
        let data = [(0.0, 0x7fff_ffff_e000u64 as f64)];
        let bands = vec![Band { label: "main".into(), low: 0x5555_0000_1000u64 as f64, high: 0x5555_0000_1100u64 as f64 }];
        let svg = waveform("w", "sample", &[PointClass { name: "code", points: &code }, PointClass { name: "data", points: &data }], &bands);
        well_formed(&svg);
        assert_eq!(svg.matches("<circle").count(), 3 + 2, "3 points and 2 legend marks");
        assert!(svg.contains(">main</text>"));
    }

    #[test]
    fn histogram_bar_heights_follow_counts() {
        let svg = histogram("h", "ns", &[(0.0, 1.0, 10), (1.0, 2.0, 5)]);
        well_formed(&svg);
        assert!(svg.contains("height=\"290.00\"") && svg.contains("height=\"145.00\""), "{svg}");
    }
}

/// One row of a [`timeline`]: a label and, per position, the index of its category
/// (`None` = nothing there, e.g. past the end of a shorter trace); optionally a span of
/// positions (first, last) drawn as uncertain — framed, hatched, with `uncertain_label`
/// above it — e.g. where another order of a reconstruction scores as well.
pub struct TimelineRow<'a> {
    /// The row's name, at its left.
    pub label: &'a str,
    /// One key per position: which of the names (and colour) the cell shows.
    pub cells: Vec<Option<usize>>,
    /// First and last position drawn as uncertain.
    pub uncertain: Option<(usize, usize)>,
}

/// The label above an uncertain span, and its colour (no category's, not the
/// differences').
pub const UNCERTAIN_LABEL: &str = "another order scores as well here";
const UNCERTAIN: &str = "#555555";

/// The colour of "these rows differ here" marks: no category uses it.
const DIFFERENCE: &str = "#222222";

/// Rows of categorised positions drawn as coloured runs over a common position axis —
/// for example an exact instruction trace and its reconstruction, coloured by function.
/// Under the rows a grey strip marks in near-black (a colour no category uses) every
/// position where the first two rows differ.
/// `categories` names the colours in the legend (colours repeat after the palette).
pub fn timeline(title: &str, x_label: &str, rows: &[TimelineRow], categories: &[&str]) -> String {
    let positions = rows.iter().map(|r| r.cells.len()).max().unwrap_or(0).max(1);
    let (left, top, width, row_h) = (150.0, 50.0, 900.0, 28.0);
    // Room above each row for an uncertain span's label.
    let gap = if rows.iter().any(|r| r.uncertain.is_some()) { 22.0 } else { 10.0 };
    let strip_top = top + rows.len() as f64 * (row_h + gap);
    let legend_top = strip_top + 78.0;
    let height = legend_top + 20.0 * categories.len().div_ceil(4) as f64 + 20.0;
    let mut doc = Doc::new(left + width + 30.0, height, title);
    let px = |i: usize| left + i as f64 / positions as f64 * width;
    for (r, row) in rows.iter().enumerate() {
        let y = top + r as f64 * (row_h + gap);
        doc.text(left - 8.0, y + row_h / 2.0 + 4.0, "end", 12.0, "black", row.label);
        let mut i = 0;
        while i < row.cells.len() {
            let cat = row.cells[i];
            let start = i;
            while i < row.cells.len() && row.cells[i] == cat {
                i += 1;
            }
            if let Some(c) = cat {
                doc.rect(px(start), y, (px(i) - px(start)).max(0.5), row_h, PALETTE[c % PALETTE.len()], 0.9);
            }
        }
        if let Some((first, last)) = row.uncertain {
            uncertain_span(&mut doc, px(first), px(last.max(first) + 1), y, row_h);
        }
    }
    if rows.len() >= 2 {
        doc.text(left - 8.0, strip_top + 12.0, "end", 11.0, "black", "differs");
        doc.rect(left, strip_top, width, 14.0, "#f0f0f0", 1.0);
        for i in 0..positions {
            let a = rows[0].cells.get(i).copied().flatten();
            let b = rows[1].cells.get(i).copied().flatten();
            if a != b {
                doc.rect(px(i), strip_top, (px(i + 1) - px(i)).max(0.5), 14.0, DIFFERENCE, 1.0);
            }
        }
    }
    let axis_y = strip_top + 22.0;
    doc.line(left, axis_y, left + width, axis_y, "black", 1.0);
    for k in 0..=5 {
        let v = positions as f64 * k as f64 / 5.0;
        let x = left + width * k as f64 / 5.0;
        doc.line(x, axis_y, x, axis_y + 4.0, "black", 1.0);
        doc.text(x, axis_y + 16.0, "middle", 10.0, "black", &tick_label(v));
    }
    doc.text(left + width / 2.0, axis_y + 32.0, "middle", 12.0, "black", x_label);
    for (c, name) in categories.iter().enumerate() {
        let x = left + (c % 4) as f64 * 220.0;
        let y = legend_top + (c / 4) as f64 * 20.0;
        doc.rect(x, y - 10.0, 12.0, 12.0, PALETTE[c % PALETTE.len()], 0.9);
        doc.text(x + 18.0, y, "start", 11.0, "black", name);
    }
    doc.finish()
}

/// A framed, hatched band over `[x0, x1)` of the row at `y`, labelled above.
fn uncertain_span(doc: &mut Doc, x0: f64, x1: f64, y: f64, h: f64) {
    let w = (x1 - x0).max(1.0);
    let _ = writeln!(
        doc.s,
        "<pattern id=\"hatch{x0:.0}_{y:.0}\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\"><line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"white\" stroke-width=\"2\"/></pattern>"
    );
    let _ = writeln!(
        doc.s,
        "<rect class=\"uncertain\" x=\"{x0:.2}\" y=\"{y:.2}\" width=\"{w:.2}\" height=\"{h:.2}\" fill=\"url(#hatch{x0:.0}_{y:.0})\" fill-opacity=\"0.6\" stroke=\"{UNCERTAIN}\" stroke-width=\"1.5\" stroke-dasharray=\"4 2\"/>"
    );
    doc.text(x0 + w / 2.0, y - 5.0, "middle", 10.0, UNCERTAIN, UNCERTAIN_LABEL);
}

#[cfg(test)]
mod timeline_tests {
    use super::*;

    #[test]
    fn timeline_draws_runs_and_differences() {
        let rows = [
            TimelineRow { label: "exact", cells: vec![Some(0), Some(0), Some(1), Some(1)], uncertain: None },
            TimelineRow { label: "rebuilt", cells: vec![Some(0), Some(1), Some(1)], uncertain: None },
        ];
        let svg = timeline("t <&>", "instruction", &rows, &["func_A", "func_B"]);
        assert!(svg.starts_with("<svg") || svg.starts_with("<?xml"), "{svg}");
        assert!(svg.contains("t &lt;&amp;&gt;"));
        assert!(svg.contains("func_B") && svg.contains("rebuilt"));
        // Two positions differ (1, and 3 where the rebuilt row ends): two marks.
        assert_eq!(svg.matches(DIFFERENCE).count(), 2, "{svg}");
        assert!(!svg.contains("uncertain"), "no span asked for");
    }

    #[test]
    fn an_uncertain_span_is_framed_and_labelled_over_its_row() {
        let rows = [
            TimelineRow { label: "exact", cells: vec![Some(0); 10], uncertain: None },
            TimelineRow { label: "rebuilt", cells: vec![Some(0); 10], uncertain: Some((2, 5)) },
        ];
        let svg = timeline("t", "instruction", &rows, &["f"]);
        assert_eq!(svg.matches("class=\"uncertain\"").count(), 1, "{svg}");
        assert!(svg.contains(UNCERTAIN_LABEL));
        // Positions 2..=5 of 10 over a 900-wide strip starting at 150: x 330, width 360.
        assert!(svg.contains("x=\"330.00\"") && svg.contains("width=\"360.00\""), "{svg}");
        assert_eq!(svg.matches(DIFFERENCE).count(), 0, "the rows agree: {svg}");
    }
}
