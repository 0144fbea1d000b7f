//! A plan's translation units (`Plan::units`): the fusion's kernels in one
//! module, or, apart, each by itself with the prelude sections it names,
//! renamed as the stages around matrix products rename them; attention's
//! units either way.

use fusebench_codegen::{plan, Device, Plan};

mod common;

fn planned(body: &str) -> Plan {
    let f = common::script(body);
    plan(&f, &common::declared_layouts(&f), Device::default()).unwrap()
}

/// Each unit holds the definitions of exactly its kernels.
fn check_units(p: &Plan, apart: bool) -> usize {
    let units = p.units(apart);
    for (src, names) in &units {
        assert_eq!(src.matches("__global__").count(), names.len(), "{names:?}");
        for n in names {
            assert!(src.contains(&format!(" {n}(")), "{n} is not defined in its unit");
        }
    }
    let mut all: Vec<&str> = units.iter().flat_map(|u| u.1.iter().copied()).collect();
    all.sort_unstable();
    all.dedup();
    let mut want: Vec<&str> = p.kernels.iter().map(|k| k.name.as_str()).collect();
    want.sort_unstable();
    want.dedup();
    assert_eq!(all, want, "every kernel in one unit");
    units.len()
}

#[test]
fn a_fusions_kernels_compile_in_one_module_or_each_by_itself() {
    // A row sum and a column sum of one input: two kernels.
    let p = planned(
        "    x = fd.define_tensor(shape=[64, 4096], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)
    r = fd.ops.sum(x, dims=[1])
    c = fd.ops.sum(x, dims=[0])
    fd.add_output(r)
    fd.add_output(c)
",
    );
    assert!(p.kernels.len() >= 2, "{:?}", p.kernels.iter().map(|k| &k.name).collect::<Vec<_>>());
    assert_eq!(check_units(&p, false), 1);
    assert_eq!(check_units(&p, true), p.kernels.len());
    // Apart, each unit is the prelude then its kernel's text as the module has it.
    for (src, names) in p.units(true) {
        let text = &src[src.find("// end of the fusebench prelude").unwrap()..];
        let body = text.split_once('\n').unwrap().1;
        assert!(p.source.contains(body.trim()), "{} differs from the module's", names[0]);
    }
}

#[test]
fn one_kernel_is_one_unit_either_way() {
    let p = planned(
        "    x = fd.define_tensor(shape=[64, 256], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)\n    y = fd.ops.exp(x)\n    fd.add_output(y)\n",
    );
    assert_eq!(p.units(true), p.units(false));
    assert_eq!(p.units(true)[0].0, p.source);
}

#[test]
fn kernels_of_later_stages_are_apart_under_their_new_names() {
    // Work before and after a matrix product: the later stage's kernel is renamed fb_s1_...
    let p = planned(
        "    x = fd.define_tensor(shape=[32, 64], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False)
    w = fd.define_tensor(shape=[48, 64], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False)
    xf = fd.ops.cast(x, dtype=DataType.Float)
    x2 = fd.ops.mul(xf, xf)
    xb = fd.ops.cast(x2, dtype=DataType.BFloat16)
    l = fd.ops.linear(xb, w)
    lf = fd.ops.cast(l, dtype=DataType.Float)
    s = fd.ops.sum(lf, dims=[1])
    fd.add_output(s)
",
    );
    let names: Vec<&str> = p.kernels.iter().map(|k| k.name.as_str()).collect();
    assert!(names.iter().any(|n| n.starts_with("fb_s1_")), "{names:?}");
    assert_eq!(check_units(&p, true), p.kernels.len());
    assert_eq!(check_units(&p, false), 1);
}

#[test]
fn attention_is_apart_either_way() {
    let qkv: String = ["q", "k", "v"]
        .iter()
        .map(|n| format!("    {n} = fd.define_tensor(shape=[1, 2, 96, 64], contiguity=[True, True, True, True], dtype=DataType.BFloat16, is_cpu=False)\n"))
        .collect();
    let p = planned(&format!(
        "{qkv}    qf = fd.ops.cast(q, dtype=DataType.Float)\n    q2 = fd.ops.mul(qf, 0.5)\n    q3 = fd.ops.cast(q2, dtype=DataType.BFloat16)\n    o, lse, seed, off = fd.ops.sdpfa_fwd(q3, k, v, is_causal=True)\n    of = fd.ops.cast(o, dtype=DataType.Float)\n    r = fd.ops.add(of, qf)\n    fd.add_output(r)\n"
    ));
    assert_eq!(p.kernels.len(), 3);
    // The two pointwise kernels in one module, or apart; the attention's unit in both.
    assert_eq!(check_units(&p, false), 2);
    assert_eq!(check_units(&p, true), 3);
}
