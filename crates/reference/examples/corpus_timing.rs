//! Times input generation and execution of every fusion of a corpus folder.
//!
//! cargo run --release -p fusebench-reference --example corpus_timing [DIR] [SEED] [FILTER]
//!
//! FUSEBENCH_REF_PROFILE=1 also prints the time of every node.

use fusebench_reference::{generate_inputs, run, stats};
use std::path::PathBuf;
use std::time::Instant;

/// CPU seconds (user + system) this process has used so far.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // Fields 14 and 15 of stat (utime, stime), counted after the ")" ending field 2.
    (ticks(11) + ticks(12)) / 100.0
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let dir = PathBuf::from(
        args.get(1)
            .cloned()
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| {
                concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/corpus").into()
            }),
    );
    let seed: u64 = args.get(2).map(|s| s.parse().unwrap()).unwrap_or(0);
    let filter = args.get(3).cloned().unwrap_or_default();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.extension().is_some_and(|e| e == "py") && p.to_string_lossy().contains(&filter)
        })
        .collect();
    files.sort();
    let (mut tg, mut tr, mut cg, mut cr) = (0.0, 0.0, 0.0, 0.0);
    let total = Instant::now();
    println!(
        "{:<40} {:>8} {:>8} {:>6}  outputs",
        "file", "gen s", "run s", "ops"
    );
    for p in &files {
        let f = match fusebench_frontend::parse_file(p) {
            Ok(f) => f,
            Err(e) => {
                println!("{}: parse error: {e}", p.display());
                continue;
            }
        };
        let (t0, c0) = (Instant::now(), cpu_seconds());
        let g = generate_inputs(&f, seed).unwrap();
        let (g_s, c1) = (t0.elapsed().as_secs_f64(), cpu_seconds());
        let t1 = Instant::now();
        let out = run(&f, &g.inputs);
        let (r_s, c2) = (t1.elapsed().as_secs_f64(), cpu_seconds());
        tg += g_s;
        tr += r_s;
        cg += c1 - c0;
        cr += c2 - c1;
        let name = p.file_name().unwrap().to_string_lossy();
        match out {
            Ok(out) => {
                let desc: Vec<String> = out
                    .iter()
                    .map(|t| {
                        let s = stats(t);
                        format!(
                            "{}{:?} mean={:.4e} max={:.3e} nan={} inf={}",
                            t.dtype(),
                            t.shape(),
                            s.mean,
                            s.abs_max,
                            s.nan_count,
                            s.inf_count
                        )
                    })
                    .collect();
                println!(
                    "{name:<40} {g_s:>8.3} {r_s:>8.3} {:>6}  {}",
                    f.op_count(),
                    desc.join("; ")
                );
            }
            Err(e) => println!("{name:<40} {g_s:>8.3} {r_s:>8.3} error: {e}"),
        }
        for n in &g.notes {
            println!("    note: {n}");
        }
    }
    println!(
        "total: generate {tg:.2} s, run {tr:.2} s (wall; CPU {cg:.2} s + {cr:.2} s); with stats {:.2} s ({} threads)",
        total.elapsed().as_secs_f64(),
        rayon::current_num_threads()
    );
}
