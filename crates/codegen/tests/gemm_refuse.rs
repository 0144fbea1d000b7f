//! A grouped product the GPU kernel does not take (Float operands) is
//! refused up front, naming the op, the value it defines, what the kernel
//! takes and where the op does run.

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


#[test]
fn grouped_products_of_float_are_refused_at_plan_time() {
    let defs = "a = fd.define_tensor(shape=[6, 4], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)\n\
                b = fd.define_tensor(shape=[2, 4, 3], contiguity=[True, True, True], dtype=DataType.Float, is_cpu=False)\n\
                o = fd.define_tensor(shape=[2], contiguity=[True], dtype=DataType.Int32, is_cpu=False)";
    let e = refusal(defs, "y = fd.ops.grouped_mm(a, b, o)", "y");
    for want in ["grouped_mm y of Float", "BFloat16 and Half", "CPU reference runs Float"] {
        assert!(e.contains(want), "{e}\n--- does not contain ---\n{want}");
    }
}
