//! Writes the plan (kernels, launch shapes, CUDA without the prelude) of every
//! repro script under the given folders, one file each, to compare a change
//! to the code generator before and after it on many more fusions than the
//! snapshots hold:
//!
//! FUSEBENCH_DUMP_FROM=dir1:dir2 FUSEBENCH_DUMP_TO=out \
//!   cargo test -p fusebench-codegen --test dump_plans -- --ignored
//!
//! then `diff -r` two such folders. Schedule choices and reasons are left
//! out: the test is that the kernels are the same.

use fusebench_codegen::{plan, Device};

mod common;
use std::path::{Path, PathBuf};

fn scripts(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            scripts(&p, out);
        } else if p.extension().is_some_and(|e| e == "py") {
            out.push(p);
        }
    }
}

fn dump(path: &Path) -> String {
    let f = match fusebench_frontend::parse_file(path) {
        Ok(f) => f,
        Err(e) => return format!("parse error: {e}\n"),
    };
    let layouts: Vec<_> = match &f.recipe {
        Some(r) => r.iter().map(|r| r.strides().map(|s| (s, 0))).collect(),
        None => vec![None; f.inputs.len()],
    };
    let p = match plan(&f, &layouts, Device::default()) {
        Ok(p) => p,
        Err(e) => return format!("plan error: {e}\n"),
    };
    let mut out = String::new();
    for k in &p.kernels {
        out.push_str(&format!(
            "// {} {:?} grid {:?} block {:?} args {:?}: {}\n",
            k.name, k.schedule, k.grid, k.block, k.args, k.summary
        ));
    }
    for t in &p.temps {
        out.push_str(&format!(
            "// temp {} x {} ({})\n",
            t.elements, t.dtype, t.what
        ));
    }
    out.push_str(&format!(
        "// outputs {:?} alias_writes {:?}\n",
        p.outputs, p.alias_writes
    ));
    out + common::kernels(&p)
}

#[test]
#[ignore = "a tool: writes plans for FUSEBENCH_DUMP_FROM into FUSEBENCH_DUMP_TO"]
fn dump_plans() {
    let (Some(from), Some(to)) = (
        std::env::var_os("FUSEBENCH_DUMP_FROM"),
        std::env::var_os("FUSEBENCH_DUMP_TO"),
    ) else {
        panic!("set FUSEBENCH_DUMP_FROM (folders, ':'-separated) and FUSEBENCH_DUMP_TO");
    };
    let to = PathBuf::from(to);
    let mut files = Vec::new();
    for d in std::env::split_paths(&from) {
        scripts(&d, &mut files);
    }
    files.sort();
    for (i, path) in files.iter().enumerate() {
        let name = format!("{i:05}-{}.txt", path.file_stem().unwrap().to_string_lossy());
        let text = std::panic::catch_unwind(|| dump(path)).unwrap_or_else(|_| "panicked\n".into());
        std::fs::create_dir_all(&to).unwrap();
        std::fs::write(to.join(name), format!("{}\n{text}", path.display())).unwrap();
    }
    eprintln!("{} plans written", files.len());
}
