//! The lab's SVG: hit rate against window size (log scale), one line per policy, each point
//! with its 95% interval as an error bar.

use crate::stats::Interval;

/// One line of the plot.
pub struct Series {
    /// The legend's text.
    pub label: String,
    /// (window, hit rate) points.
    pub points: Vec<(usize, Interval)>,
    /// Drawn dashed (the bounds).
    pub dashed: bool,
}

const COLORS: [&str; 8] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#7f7f7f", "#d62728", "#9467bd", "#8c564b", "#17becf",
];

/// The whole SVG document.
pub fn svg(series: &[Series]) -> String {
    let (w, h, left, bottom, top, right) = (720.0, 400.0, 60.0, 50.0, 30.0, 210.0);
    let plot_w = w - left - right;
    let plot_h = h - top - bottom;
    let mut windows: Vec<usize> = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .collect();
    windows.sort_unstable();
    windows.dedup();
    let (lo, hi) = (
        (*windows.first().unwrap_or(&1) as f64).ln(),
        (*windows.last().unwrap_or(&2) as f64).ln(),
    );
    let x = |window: usize| {
        if hi > lo {
            left + ((window as f64).ln() - lo) / (hi - lo) * plot_w
        } else {
            left + plot_w / 2.0
        }
    };
    let y = |rate: f64| top + (1.0 - rate.clamp(0.0, 1.0)) * plot_h;
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<text x=\"{}\" y=\"18\" text-anchor=\"middle\" font-size=\"14\">Evidence hit rate vs context window (LoCoMo; bars: 95% CI over seeds)</text>\n",
        left + plot_w / 2.0
    );
    for tick in 0..=5 {
        let rate = tick as f64 / 5.0;
        svg.push_str(&format!(
            "<line x1=\"{left}\" x2=\"{}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#ddd\"/><text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{rate:.1}</text>\n",
            left + plot_w,
            left - 6.0,
            y(rate) + 4.0,
            y = y(rate)
        ));
    }
    for &window in &windows {
        svg.push_str(&format!(
            "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{window}</text>\n",
            x(window),
            top + plot_h + 18.0
        ));
    }
    svg.push_str(&format!(
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">window (tokens, log scale)</text>\n<text x=\"16\" y=\"{}\" transform=\"rotate(-90 16 {})\" text-anchor=\"middle\">hit rate</text>\n",
        left + plot_w / 2.0,
        h - 10.0,
        top + plot_h / 2.0,
        top + plot_h / 2.0
    ));
    for (i, s) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let dash = if s.dashed {
            " stroke-dasharray=\"6 4\""
        } else {
            ""
        };
        let points: Vec<String> = s
            .points
            .iter()
            .map(|(window, r)| format!("{:.1},{:.1}", x(*window), y(r.mean)))
            .collect();
        svg.push_str(&format!(
            "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"2\"{dash} points=\"{}\"/>\n",
            points.join(" ")
        ));
        for (window, r) in &s.points {
            let px = x(*window);
            // Error bar with caps, then the point.
            svg.push_str(&format!(
                "<path d=\"M{px:.1},{lo:.1}V{hi:.1}M{a:.1},{lo:.1}H{b:.1}M{a:.1},{hi:.1}H{b:.1}\" stroke=\"{color}\" stroke-width=\"1.2\" fill=\"none\"/><circle cx=\"{px:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"{color}\"/>\n",
                y(r.mean),
                lo = y(r.lo),
                hi = y(r.hi),
                a = px - 4.0,
                b = px + 4.0,
            ));
        }
        let ly = top + 24.0 + 20.0 * i as f64;
        svg.push_str(&format!(
            "<line x1=\"{}\" x2=\"{}\" y1=\"{ly}\" y2=\"{ly}\" stroke=\"{color}\" stroke-width=\"2\"{dash}/><text x=\"{}\" y=\"{}\">{}</text>\n",
            w - right + 12.0,
            w - right + 36.0,
            w - right + 42.0,
            ly + 4.0,
            s.label
        ));
    }
    svg.push_str("</svg>\n");
    svg
}
