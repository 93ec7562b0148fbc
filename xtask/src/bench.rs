//! `cargo xtask bench [filter]` and `cargo xtask collate DIR`: benchmark rows into
//! `benches/results/`.
//!
//! Every benchmark appends rows to the CSV file named by `GPUJOIN_BENCH_CSV`, header
//! `group,case,ms_median,floor_ms,device,commit` (see `benches/results/README.md`). `collate`
//! reads `DIR/bench.csv`, sorts the rows by GPU (`h100`, `h200`, else a slug of the device name),
//! merges them into `benches/results/<gpu>.csv` (a new row replaces the one with the same
//! group and case) and regenerates `benches/results/<gpu>.md`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

pub const HEADER: &str = "group,case,ms_median,floor_ms,device,commit";

/// Group and case of the row whose `ms_median` holds the device-to-device copy bandwidth in GB/s.
pub const BANDWIDTH: (&str, &str) = ("copy", "d2d_bandwidth");

/// A row that times copying 1 GiB device to device (ms); used for the bandwidth when
/// [`BANDWIDTH`] is absent.
const LEGACY_COPY: (&str, &str) = ("copy", "d2d_1gib");

#[derive(Debug, Clone, PartialEq)]
struct Row {
    group: String,
    case: String,
    ms_median: String,
    floor_ms: String,
    device: String,
    commit: String,
}

/// `cargo xtask bench [filter]`: runs every benchmark here, then collates the rows.
pub fn run_local(rest: &[String]) -> crate::Result<()> {
    let root = crate::root();
    let dir = root.join("target").join("bench-results");
    std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let csv = dir.join("bench.csv");
    match std::fs::remove_file(&csv) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(format!("truncating {}: {e}", csv.display()))
        }
        _ => {}
    }
    let mut c = crate::cargo(&["bench", "--workspace", "--exclude", "xtask", "--"])?;
    c.args(rest).env("GPUJOIN_BENCH_CSV", &csv);
    if std::env::var_os("GPUJOIN_COMMIT").is_none() {
        c.env("GPUJOIN_COMMIT", crate::bundle::commit(&root));
    }
    let ran = crate::run(c);
    let collated = collate_dir(&dir);
    ran.and(collated)
}

/// `cargo xtask collate DIR`.
pub fn collate(rest: &[String]) -> crate::Result<()> {
    let [dir] = rest else {
        return Err("usage: cargo xtask collate DIR   (DIR holds the bench.csv that a bundle run wrote)".into());
    };
    collate_dir(Path::new(dir))
}

fn collate_dir(dir: &Path) -> crate::Result<()> {
    let csv = dir.join("bench.csv");
    let text = match std::fs::read_to_string(&csv) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            println!(
                "collate: no {} (no benchmark ran, or none had a GPU: without a device the benches print \
                 SKIPPED); benches/results/ unchanged",
                csv.display()
            );
            return Ok(());
        }
        Err(e) => return Err(format!("reading {}: {e}", csv.display())),
    };
    let rows = parse(&text, &csv.display().to_string());
    if rows.is_empty() {
        println!(
            "collate: {} holds no benchmark rows (without a GPU the benches print SKIPPED and write none); \
             benches/results/ unchanged",
            csv.display()
        );
        return Ok(());
    }
    let mut by_gpu: BTreeMap<String, Vec<Row>> = BTreeMap::new();
    for r in rows {
        by_gpu.entry(gpu_slug(&r.device)).or_default().push(r);
    }
    let results = crate::root().join("benches").join("results");
    std::fs::create_dir_all(&results).map_err(|e| format!("creating {}: {e}", results.display()))?;
    for (gpu, new) in by_gpu {
        let path = results.join(format!("{gpu}.csv"));
        let old = std::fs::read_to_string(&path).unwrap_or_default();
        let mut merged: BTreeMap<(String, String), Row> = BTreeMap::new();
        for r in parse(&old, &path.display().to_string()) {
            merged.insert((r.group.clone(), r.case.clone()), r);
        }
        let n = new.len();
        for r in new {
            merged.insert((r.group.clone(), r.case.clone()), r); // later rows win
        }
        let rows: Vec<Row> = merged.into_values().collect();
        let mut out = format!("{HEADER}\n");
        for r in &rows {
            let fields = [&r.group, &r.case, &r.ms_median, &r.floor_ms, &r.device, &r.commit];
            out.push_str(&fields.iter().map(|f| quote(f)).collect::<Vec<_>>().join(","));
            out.push('\n');
        }
        std::fs::write(&path, out).map_err(|e| format!("writing {}: {e}", path.display()))?;
        let md = results.join(format!("{gpu}.md"));
        std::fs::write(&md, markdown(&gpu, &rows)).map_err(|e| format!("writing {}: {e}", md.display()))?;
        println!(
            "collate: {n} rows into benches/results/{gpu}.csv ({} rows in all); wrote benches/results/{gpu}.md",
            rows.len()
        );
    }
    Ok(())
}

/// `h100`, `h200`, or a lowercase slug of the device name.
fn gpu_slug(device: &str) -> String {
    let up = device.to_ascii_uppercase();
    if up.contains("H100") {
        return "h100".into();
    }
    if up.contains("H200") {
        return "h200".into();
    }
    let mut slug = String::new();
    for c in device.chars() {
        if c.is_ascii_alphanumeric() {
            slug.push(c.to_ascii_lowercase());
        } else if !slug.is_empty() && !slug.ends_with('-') {
            slug.push('-');
        }
    }
    let slug = slug.trim_end_matches('-').to_string();
    if slug.is_empty() { "unknown".into() } else { slug }
}

/// Rows of a bench CSV; header lines (anywhere, since several runs may append) are skipped, and
/// malformed lines are reported and dropped.
fn parse(text: &str, what: &str) -> Vec<Row> {
    let mut rows = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim_end_matches('\r');
        if line.trim().is_empty() || line.trim() == HEADER {
            continue;
        }
        let f = split_csv(line);
        if f.len() != 6 || f[0].is_empty() || f[1].is_empty() {
            eprintln!("collate: {what}:{}: expected `{HEADER}`, skipping: {line}", i + 1);
            continue;
        }
        let mut f = f.into_iter();
        let mut next = || f.next().unwrap_or_default();
        rows.push(Row {
            group: next(),
            case: next(),
            ms_median: next(),
            floor_ms: next(),
            device: next(),
            commit: next(),
        });
    }
    rows
}

/// One CSV line into fields (double quotes protect commas; `""` is a quote).
fn split_csv(line: &str) -> Vec<String> {
    let mut fields = vec![String::new()];
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                chars.next();
                fields.last_mut().unwrap().push('"');
            }
            ('"', _) => quoted = !quoted,
            (',', false) => fields.push(String::new()),
            _ => fields.last_mut().unwrap().push(c),
        }
    }
    fields.into_iter().map(|f| f.trim().to_string()).collect()
}

fn quote(f: &str) -> String {
    if f.contains([',', '"', '\n']) {
        format!("\"{}\"", f.replace('"', "\"\""))
    } else {
        f.to_string()
    }
}

fn num(s: &str) -> Option<f64> {
    s.trim().parse::<f64>().ok().filter(|x| x.is_finite())
}

fn fmt_num(x: f64) -> String {
    let a = x.abs();
    if a >= 1000.0 {
        format!("{x:.0}")
    } else if a >= 100.0 {
        format!("{x:.1}")
    } else if a >= 10.0 {
        format!("{x:.2}")
    } else if a >= 1.0 {
        format!("{x:.3}")
    } else {
        format!("{x:.4}")
    }
}

fn cell(s: &str) -> String {
    match num(s) {
        Some(x) => fmt_num(x),
        None if s.trim().is_empty() => "–".into(),
        None => s.replace('|', "\\|"),
    }
}

/// The results page of one GPU: the device and its copy bandwidth, then one table per group.
fn markdown(gpu: &str, rows: &[Row]) -> String {
    let devices: BTreeSet<&str> = rows.iter().map(|r| r.device.as_str()).filter(|d| !d.is_empty()).collect();
    let device = if devices.is_empty() { gpu.to_string() } else { devices.into_iter().collect::<Vec<_>>().join(", ") };
    let mut md = format!("# Benchmark results: {device}\n\n");
    md.push_str(&format!(
        "Generated by `cargo xtask collate` from `{gpu}.csv`; do not edit by hand. \
         Columns are explained in [README.md](README.md).\n\n"
    ));
    let bw = rows.iter().find(|r| (r.group.as_str(), r.case.as_str()) == BANDWIDTH);
    md.push_str("| device | copy bandwidth (device to device) | commit |\n|---|---:|---|\n");
    // Fallback: the harness's `copy,d2d_1gib` row (ms to copy 1 GiB; read + write counted).
    let gib = rows.iter().find(|r| (r.group.as_str(), r.case.as_str()) == LEGACY_COPY);
    match (bw, gib.and_then(|r| num(&r.ms_median).filter(|&ms| ms > 0.0).map(|ms| (r, ms)))) {
        (Some(r), _) => md.push_str(&format!(
            "| {device} | {} GB/s | {} |\n",
            num(&r.ms_median).map(|x| format!("{x:.0}")).unwrap_or_else(|| cell(&r.ms_median)),
            cell(&r.commit)
        )),
        (None, Some((r, ms))) => md.push_str(&format!(
            "| {device} | {:.0} GB/s (from `copy/d2d_1gib`) | {} |\n",
            2.0 * (1u64 << 30) as f64 / (ms * 1e-3) / 1e9,
            cell(&r.commit)
        )),
        (None, None) => md.push_str(&format!("| {device} | not measured | – |\n")),
    }
    let mut groups: BTreeMap<&str, Vec<&Row>> = BTreeMap::new();
    for r in rows {
        if (r.group.as_str(), r.case.as_str()) != BANDWIDTH {
            groups.entry(r.group.as_str()).or_default().push(r);
        }
    }
    for (group, rows) in groups {
        md.push_str(&format!(
            "\n## {group}\n\n| case | median ms | byte-floor ms | fraction of floor | commit |\n|---|---:|---:|---:|---|\n"
        ));
        for r in rows {
            let frac = match (num(&r.floor_ms), num(&r.ms_median)) {
                (Some(f), Some(m)) if f > 0.0 && m > 0.0 => format!("{:.1}%", 100.0 * f / m),
                _ => "–".into(),
            };
            md.push_str(&format!(
                "| {} | {} | {} | {frac} | {} |\n",
                r.case.replace('|', "\\|"),
                cell(&r.ms_median),
                cell(&r.floor_ms),
                cell(&r.commit)
            ));
        }
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs() {
        assert_eq!(gpu_slug("NVIDIA H100 80GB HBM3"), "h100");
        assert_eq!(gpu_slug("NVIDIA H200"), "h200");
        assert_eq!(gpu_slug("NVIDIA GeForce RTX 4090"), "nvidia-geforce-rtx-4090");
        assert_eq!(gpu_slug(""), "unknown");
    }

    #[test]
    fn csv_lines() {
        assert_eq!(split_csv(r#"a,"b,c",1.5,,"x ""y""",z"#), ["a", "b,c", "1.5", "", "x \"y\"", "z"]);
        let rows = parse(&format!("{HEADER}\ng,c,1,0.5,NVIDIA H100,abc\n{HEADER}\nbad line\n"), "t");
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].floor_ms, "0.5");
        assert_eq!(quote("a,b"), "\"a,b\"");
    }

    #[test]
    fn page() {
        let rows = parse("copy,d2d_bandwidth,2950.4,,NVIDIA H100,abc\nsort,keys u32 1M,0.2,0.1,NVIDIA H100,abc\n", "t");
        let md = markdown("h100", &rows);
        assert!(md.contains("| NVIDIA H100 | 2950 GB/s | abc |"), "{md}");
        assert!(md.contains("## sort"));
        assert!(md.contains("| keys u32 1M | 0.2000 | 0.1000 | 50.0% | abc |"), "{md}");
        assert!(!md.contains("## copy"));
        let legacy = parse("copy,d2d_1gib,0.7281,0.7281,NVIDIA H100,abc\n", "t");
        assert!(markdown("h100", &legacy).contains("| NVIDIA H100 | 2949 GB/s (from `copy/d2d_1gib`) | abc |"));
    }
}
