//! Every corpus and golden fusion gets a plan: kernels for every written
//! output, launch shapes within limits, and CUDA C that names every kernel.

use fusebench_codegen::{plan, Device, OutputSource};

fusebench_testdata::needs_shared! {
#[test]
fn every_fusion_plans() {
    let mut report = String::new();
    for dir in ["corpus", "golden"] {
        for path in fusebench_testdata::scripts(dir) {
            let f = fusebench_frontend::parse_file(&path).unwrap();
            let layouts: Vec<_> = match &f.recipe {
                Some(r) => r.iter().map(|r| r.strides().map(|s| (s, 0))).collect(),
                None => vec![None; f.inputs.len()],
            };
            let p = plan(&f, &layouts, Device::default())
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            for k in &p.kernels {
                assert!(
                    p.source.contains(&format!(" {}(", k.name)),
                    "{}: kernel {} missing from source",
                    path.display(),
                    k.name
                );
                let threads: u32 = k.block.iter().product();
                assert!(
                    (32..=1024).contains(&threads) && threads.is_multiple_of(32),
                    "{}: block {:?}",
                    k.name,
                    k.block
                );
                assert!(k.grid[0] >= 1);
            }
            let written = p
                .outputs
                .iter()
                .filter(|o| matches!(o.source, OutputSource::Written))
                .count();
            assert!(written == 0 || !p.kernels.is_empty());
            report.push_str(&format!(
                "{}: {} kernels, {} of {} outputs written\n",
                path.file_name().unwrap().to_string_lossy(),
                p.kernels.len(),
                written,
                p.outputs.len()
            ));
            for k in &p.kernels {
                report.push_str(&format!(
                    "    {} {:?} grid {:?} block {:?}: {}\n",
                    k.name, k.schedule, k.grid, k.block, k.summary
                ));
            }
        }
    }
    eprintln!("{report}");
}
}
