//! The `host bench --svg` chart: grouped bars (one group per shape, one bar per
//! implementation, plus a geomean group over the GPU MODE shapes), median time on a log
//! axis, written by hand as a self-contained SVG that renders on GitHub.

use std::fmt::Write as _;

use crate::bench::{BenchReport, OUR_BEST};

const WIDTH: f64 = 960.0;
const HEIGHT: f64 = 500.0;
const LEFT: f64 = 72.0;
const RIGHT: f64 = 16.0;
const TOP: f64 = 96.0;
const BOTTOM: f64 = 56.0;

/// Colours of our kernels (greens; `naive` comes first and is the lightest) and of the baselines (blue, orange, brown, purple...).
const OURS: [&str; 4] = ["#81c784", "#2e7d32", "#1b5e20", "#a5d6a7"];
const BASELINES: [&str; 5] = ["#1565c0", "#ef6c00", "#6d4c41", "#8e24aa", "#546e7a"];

/// The label of the group of geomean bars.
pub const GEOMEAN_GROUP: &str = "geomean (GPU MODE 3)";

/// Escapes text for XML content and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

/// A bar's value label: 3 significant digits, `k` above 10000 us.
fn short(us: f64) -> String {
    if us >= 10_000.0 {
        format!("{:.1}k", us / 1000.0)
    } else if us >= 100.0 {
        format!("{us:.0}")
    } else if us >= 10.0 {
        format!("{us:.1}")
    } else {
        format!("{us:.2}")
    }
}

/// A decade tick's label.
fn decade(exp: i32) -> String {
    match exp {
        e if e < 0 => format!("{} us", 10f64.powi(e)),
        0 => "1 us".into(),
        1 => "10 us".into(),
        2 => "100 us".into(),
        e => format!("{} ms", 10f64.powi(e - 3)),
    }
}

/// One bar to draw.
struct Bar {
    group: usize,
    series: usize,
    us: f64,
    title: String,
    geomean: bool,
}

/// The chart for `report`.
pub fn chart(report: &BenchReport) -> String {
    // Series: implementations in order of first appearance; groups: shapes, then geomean.
    let mut series: Vec<(String, bool)> = Vec::new();
    let mut groups: Vec<String> = Vec::new();
    for e in &report.entries {
        if !series.iter().any(|(n, _)| *n == e.implementation) {
            series.push((e.implementation.clone(), e.ours));
        }
        if !groups.contains(&e.shape) {
            groups.push(e.shape.clone());
        }
    }
    let mut bars: Vec<Bar> = report
        .entries
        .iter()
        .map(|e| Bar {
            group: groups.iter().position(|g| *g == e.shape).unwrap_or(0),
            series: series.iter().position(|(n, _)| *n == e.implementation).unwrap_or(0),
            us: e.median_us,
            title: format!(
                "{} on {}: {:.2} us, {:.1} TFLOP/s, check: {}",
                e.implementation, e.shape, e.median_us, e.tflops, e.check.summary
            ),
            geomean: false,
        })
        .collect();
    let geo: Vec<_> = report.geomean.iter().filter(|g| g.implementation != OUR_BEST).collect();
    if !geo.is_empty() {
        groups.push(GEOMEAN_GROUP.into());
        for g in geo {
            if let Some(s) = series.iter().position(|(n, _)| *n == g.implementation) {
                bars.push(Bar {
                    group: groups.len() - 1,
                    series: s,
                    us: g.median_us,
                    title: format!("{}: geomean {:.2} us over the GPU MODE shapes", g.implementation, g.median_us),
                    geomean: true,
                });
            }
        }
    }
    let colour = |s: usize| -> &'static str {
        let (_, ours) = series[s];
        let rank = series[..s].iter().filter(|(_, o)| *o == ours).count();
        if ours { OURS[rank % OURS.len()] } else { BASELINES[rank % BASELINES.len()] }
    };

    let positive: Vec<f64> = bars.iter().map(|b| b.us).filter(|v| v.is_finite() && *v > 0.0).collect();
    let lo = positive.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = positive.iter().copied().fold(0.0, f64::max);
    let (lo_exp, hi_exp) = if positive.is_empty() {
        (0, 3)
    } else {
        let l = lo.log10().floor() as i32;
        let h = (hi.log10().ceil() as i32).max(l + 1);
        (l, h)
    };
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let y_of = |us: f64| {
        let f = (us.log10() - lo_exp as f64) / (hi_exp - lo_exp) as f64;
        TOP + plot_h * (1.0 - f.clamp(0.0, 1.0))
    };

    let mut s = String::new();
    let _ = writeln!(
        s,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="Helvetica, Arial, sans-serif">"##
    );
    let _ = writeln!(s, r##"<rect x="0" y="0" width="{WIDTH}" height="{HEIGHT}" fill="white"/>"##);
    let device = report.device.as_ref().map_or("no GPU".to_string(), |d| d.name.clone());
    let _ = writeln!(
        s,
        r##"<text x="{LEFT}" y="24" font-size="16" font-weight="bold">{}</text>"##,
        escape(&format!("NVFP4 GEMM (C = A·Bᵀ, fp16 out) on {device}: median time, lower is better"))
    );
    let _ = writeln!(
        s,
        r##"<text x="{LEFT}" y="42" font-size="11" fill="#555">{}</text>"##,
        escape(&format!(
            "host bench, {}: median of {} calls, L2 flushed before each, CUDA events; log scale",
            report.date, report.iters
        ))
    );
    // Legend.
    let (mut x, mut y) = (LEFT, 62.0);
    for (i, (name, ours)) in series.iter().enumerate() {
        let label = if *ours { format!("ours: {name}") } else { name.clone() };
        let width = 28.0 + 6.6 * label.chars().count() as f64;
        if x + width > WIDTH - RIGHT {
            x = LEFT;
            y += 16.0;
        }
        let _ = writeln!(s, r##"<rect x="{x:.1}" y="{:.1}" width="12" height="12" fill="{}"/>"##, y - 10.0, colour(i));
        let _ = writeln!(s, r##"<text x="{:.1}" y="{y:.1}" font-size="11">{}</text>"##, x + 16.0, escape(&label));
        x += width;
    }
    // Axis, decade grid lines and labels.
    for e in lo_exp..=hi_exp {
        let gy = y_of(10f64.powi(e));
        let _ = writeln!(
            s,
            r##"<line x1="{LEFT}" y1="{gy:.1}" x2="{:.1}" y2="{gy:.1}" stroke="#ddd" stroke-width="1"/>"##,
            WIDTH - RIGHT
        );
        let _ = writeln!(
            s,
            r##"<text x="{:.1}" y="{:.1}" font-size="11" text-anchor="end" fill="#333">{}</text>"##,
            LEFT - 6.0,
            gy + 4.0,
            decade(e)
        );
    }
    let _ = writeln!(
        s,
        r##"<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{:.1}" stroke="#333" stroke-width="1"/>"##,
        TOP + plot_h
    );
    // Bars, grouped.
    let group_w = plot_w / groups.len().max(1) as f64;
    let per_group = series.len().max(1) as f64;
    let bar_w = (group_w * 0.8 / per_group).min(40.0);
    for b in &bars {
        let group_left = LEFT + group_w * b.group as f64 + (group_w - bar_w * per_group) / 2.0;
        let bx = group_left + bar_w * b.series as f64;
        let by = y_of(b.us);
        let bh = TOP + plot_h - by;
        let _ = writeln!(
            s,
            r##"<rect class="{}" x="{bx:.1}" y="{by:.1}" width="{:.1}" height="{bh:.1}" fill="{}"><title>{}</title></rect>"##,
            if b.geomean { "bar geomean" } else { "bar" },
            bar_w - 2.0,
            colour(b.series),
            escape(&b.title)
        );
        let _ = writeln!(
            s,
            r##"<text x="{:.1}" y="{:.1}" font-size="9" text-anchor="middle" fill="#333">{}</text>"##,
            bx + (bar_w - 2.0) / 2.0,
            by - 3.0,
            short(b.us)
        );
    }
    for (i, g) in groups.iter().enumerate() {
        let _ = writeln!(
            s,
            r##"<text x="{:.1}" y="{:.1}" font-size="12" text-anchor="middle">{}</text>"##,
            LEFT + group_w * (i as f64 + 0.5),
            TOP + plot_h + 20.0,
            escape(g)
        );
    }
    let _ = writeln!(
        s,
        r##"<text x="{:.1}" y="{:.1}" font-size="10" text-anchor="end" fill="#777">M x N x K</text>"##,
        WIDTH - RIGHT,
        HEIGHT - 12.0
    );
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::tests::sample_report;

    /// Checks that every tag is closed in order (an XML well-formedness check enough for
    /// what `chart` writes: no comments, CDATA or processing instructions).
    fn balanced(svg: &str) -> Result<usize, String> {
        let mut stack: Vec<String> = Vec::new();
        let mut count = 0;
        let mut rest = svg;
        while let Some(start) = rest.find('<') {
            let end = rest[start..].find('>').ok_or("unterminated tag")? + start;
            let tag = &rest[start + 1..end];
            if let Some(name) = tag.strip_prefix('/') {
                let open = stack.pop().ok_or(format!("</{name}> closes nothing"))?;
                if open != name {
                    return Err(format!("<{open}> closed by </{name}>"));
                }
            } else if !tag.ends_with('/') {
                stack.push(tag.split_whitespace().next().unwrap_or("").to_string());
            }
            if !tag.matches('"').count().is_multiple_of(2) {
                return Err(format!("unbalanced quotes in <{tag}>"));
            }
            count += 1;
            rest = &rest[end + 1..];
        }
        if stack.is_empty() { Ok(count) } else { Err(format!("unclosed: {stack:?}")) }
    }

    #[test]
    fn the_chart_is_well_formed_with_one_bar_per_result_and_its_labels() {
        let report = sample_report();
        let svg = chart(&report);
        std::fs::write(std::env::temp_dir().join("nvfp4-bench-sample.svg"), &svg).unwrap();
        assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
        balanced(&svg).unwrap();
        assert!(svg.lines().all(|l| l.starts_with('<') && l.ends_with('>')), "one element per line:\n{svg}");
        let geo = report.geomean.iter().filter(|g| g.implementation != OUR_BEST).count();
        assert_eq!(svg.matches(r##"<rect class="bar"##).count(), report.entries.len() + geo);
        assert_eq!(svg.matches(r##"<rect class="bar geomean""##).count(), geo);
        for e in &report.entries {
            assert!(svg.contains(&format!(">{}</text>", e.shape)), "shape label {}", e.shape);
            assert!(svg.contains(&escape(&e.implementation)), "legend {}", e.implementation);
            assert!(svg.contains(&format!("{:.2} us", e.median_us)), "bar title for {}", e.median_us);
        }
        assert!(svg.contains(GEOMEAN_GROUP));
        assert!(svg.contains("ours: sm90") && svg.contains("NVIDIA H100 80GB HBM3"));
        // Decades from 10 us (13.5 us is the fastest) to 100 ms (85.9 ms the slowest).
        assert!(svg.contains(">10 us</text>") && svg.contains(">100 ms</text>"));
        assert!(!svg.contains(">1 us</text>"));
        assert!(svg.contains(">85.9k</text>") && svg.contains(">292</text>") && svg.contains(">13.5</text>"));
    }

    #[test]
    fn bars_grow_with_time_on_the_log_axis() {
        let svg = chart(&sample_report());
        let heights: Vec<(f64, String)> = svg
            .lines()
            .filter(|l| l.starts_with(r##"<rect class="bar""##))
            .map(|l| {
                let h = l.split("height=\"").nth(1).unwrap().split('"').next().unwrap().parse::<f64>().unwrap();
                let title = l.split("<title>").nth(1).unwrap().split(':').next().unwrap().to_string();
                (h, title)
            })
            .collect();
        let height = |prefix: &str| heights.iter().find(|(_, t)| t.starts_with(prefix)).unwrap().0;
        assert!(height("naive on 128x7168x16384") > height("sm90 on 128x7168x16384"));
        assert!(height("sm90 on 128x7168x16384") > height("cuBLASLt FP8 e4m3 on 128x7168x16384"));
        assert!(heights.iter().all(|(h, _)| *h >= 0.0));
    }

    #[test]
    fn text_is_escaped_and_an_empty_report_still_renders() {
        assert_eq!(escape(r##"a<b>&"c'"##), "a&lt;b&gt;&amp;&quot;c&apos;");
        let mut r = sample_report();
        r.entries[0].implementation = "x<&>y".into();
        let svg = chart(&r);
        balanced(&svg).unwrap();
        assert!(svg.contains("x&lt;&amp;&gt;y") && !svg.contains("x<&>y"));
        r.entries.clear();
        r.geomean.clear();
        let svg = chart(&r);
        balanced(&svg).unwrap();
        assert_eq!(svg.matches(r##"class="bar"##).count(), 0);
    }
}
