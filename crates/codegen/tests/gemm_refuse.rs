//! The grouped/scaled products have no GPU kernel yet: planning
//! a fusion that uses one is refused up front, naming the op, the value it
//! defines and where the op does run.

use fusebench_codegen::{plan, Device};

fn refusal(defs: &str, body: &str, out: &str) -> String {
    let mut src = String::from("from nvfuser_direct import FusionDefinition, DataType\ndef f(fd : FusionDefinition) -> None :\n");
    for l in defs.lines().chain(body.lines()) {
        src += &format!("    {}\n", l.trim());
    }
    src += &format!("    fd.add_output({out})\nwith FusionDefinition() as fd:\n    f(fd)\n");
    let f = fusebench_frontend::parse_script("t.py", &src).unwrap();
    plan(&f, &vec![None; f.inputs.len()], Device::default()).unwrap_err().to_string()
}

#[track_caller]
fn says(e: &str, op: &str, out: &str, what: &str) {
    for want in [format!("`{op}` (defining {out})"), what.to_string(), "no GPU kernel yet".into(), "CPU reference".into()] {
        assert!(e.contains(&want), "{e}\n--- does not contain ---\n{want}");
    }
}

#[test]
fn grouped_and_scaled_products_are_refused_at_plan_time() {
    let defs = "a = fd.define_tensor(shape=[6, 4], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False)\n\
                b = fd.define_tensor(shape=[2, 4, 3], contiguity=[True, True, True], dtype=DataType.BFloat16, is_cpu=False)\n\
                o = fd.define_tensor(shape=[2], contiguity=[True], dtype=DataType.Int32, is_cpu=False)";
    let e = refusal(defs, "y = fd.ops.grouped_mm(a, b, o)", "y");
    says(&e, "grouped_mm", "y", "grouped and scaled matrix products");
    let defs = "a = fd.define_tensor(shape=[4, 16], contiguity=[True, True], dtype=DataType.Float8_e4m3fn, is_cpu=False)\n\
                b = fd.define_tensor(shape=[16, 8], contiguity=[True, True], dtype=DataType.Float8_e4m3fn, is_cpu=False)\n\
                s = fd.define_tensor(shape=[], contiguity=[], dtype=DataType.Float, is_cpu=False)";
    let e = refusal(defs, "y, _, _ = fd.ops.scaled_mm(a, b, s, s)", "y");
    says(&e, "scaled_mm", "y", "grouped and scaled matrix products");
}

