//! The schedule registry: its order is the one ARCHITECTURE.md documents,
//! every schedule says why it fits or not, and every kernel of a plan
//! records the schedule that built it, why, and what was tried before it.

use fusebench_codegen::kernel::Context;
use fusebench_codegen::reduction::Reduction;
use fusebench_codegen::schedule::{Candidate, Rows, Work, SCHEDULES};
use fusebench_codegen::{plan, Device, Plan};

mod common;
use common::script;

fn rmsnorm(rows: usize, cols: usize) -> fusebench_ir::Fusion {
    script(&format!(
        "    x0 = fd.define_tensor(shape=[{rows}, {cols}], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False)
    f0 = fd.ops.cast(x0, dtype=DataType.Float)
    q = fd.ops.mul(f0, f0)
    ss = fd.ops.sum(q, dims=[1], keepdim=True)
    rs = fd.ops.rsqrt(ss)
    rb = fd.ops.expand(rs, shape=[{rows}, {cols}])
    n = fd.ops.mul(f0, rb)
    o0 = fd.ops.cast(n, dtype=DataType.BFloat16)
    fd.add_output(o0)
"
    ))
}

fn sum(shape: &[usize], dims: &[usize]) -> fusebench_ir::Fusion {
    let contiguity = vec!["True"; shape.len()].join(", ");
    script(&format!(
        "    x0 = fd.define_tensor(shape={shape:?}, contiguity=[{contiguity}], dtype=DataType.Float, is_cpu=False)
    s = fd.ops.sum(x0, dims={dims:?}, keepdim=False)
    fd.add_output(s)
"
    ))
}

fn neg(shape: &[usize]) -> fusebench_ir::Fusion {
    let contiguity = vec!["True"; shape.len()].join(", ");
    script(&format!(
        "    x0 = fd.define_tensor(shape={shape:?}, contiguity=[{contiguity}], dtype=DataType.Float, is_cpu=False)
    y = fd.ops.neg(x0)
    fd.add_output(y)
"
    ))
}

fn planned(f: &fusebench_ir::Fusion) -> Plan {
    plan(f, &vec![None; f.inputs.len()], Device::default()).unwrap_or_else(|e| panic!("{e}"))
}

fn names() -> Vec<&'static str> {
    SCHEDULES.iter().map(|s| s.name()).collect()
}

#[test]
fn the_registry_order_is_the_documented_one() {
    assert_eq!(
        names(),
        ["contiguous", "grid", "rowwise", "persistent", "outer", "transpose", "pointwise"]
    );
    // ARCHITECTURE.md says the order in one line; it must say this one.
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/ARCHITECTURE.md"
    ))
    .unwrap();
    let line = names()
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(" → ");
    assert!(
        doc.contains(&line),
        "ARCHITECTURE.md lacks the order {line}"
    );
}

/// Every schedule answers every kind of work with a reason; a schedule that
/// fits quotes the numbers that decided.
#[test]
fn every_schedule_gives_a_reason_for_every_kind_of_work() {
    let dev = Device::default();
    let norm = rmsnorm(33, 4096);
    let col_sum = sum(&[2048, 4096], &[0]);
    let row_sum = sum(&[64, 1000], &[1]);
    let all = sum(&[1 << 20], &[0]);
    let ew = neg(&[8, 96]);
    // A written permute: read across the output's innermost dim.
    let tr = script(
        "    x0 = fd.define_tensor(shape=[64, 96], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)
    t0 = fd.ops.permute(x0, dims=[1, 0])
    y = fd.ops.neg(t0)
    fd.add_output(y)
",
    );
    let reds = |f: &fusebench_ir::Fusion| -> Vec<Reduction> {
        (0..f.nodes.len())
            .filter_map(|n| Reduction::of(f, n))
            .collect()
    };
    let (rn, rc, rr, ra) = (reds(&norm), reds(&col_sum), reds(&row_sum), reds(&all));
    let rows = |inner: Vec<usize>, outer: Vec<usize>| {
        Work::Rows(Rows {
            rows_shape: vec![33],
            inner_shape: vec![4096],
            inner,
            outer,
            ..Rows::default()
        })
    };
    let cands = vec![
        (&norm, &rn, rows(vec![0], vec![])),
        (&norm, &rn, rows(vec![], vec![0])),
        (
            &col_sum,
            &rc,
            Work::Stored {
                red: 0,
                before_rows: false,
                siblings: vec![],
                epilogue: vec![],
                joined: false,
                full: vec![],
            },
        ),
        (
            &col_sum,
            &rc,
            Work::Stored {
                red: 0,
                before_rows: true,
                siblings: vec![],
                epilogue: vec![],
                joined: false,
                full: vec![],
            },
        ),
        (
            &row_sum,
            &rr,
            Work::Stored {
                red: 0,
                before_rows: false,
                siblings: vec![],
                epilogue: vec![],
                joined: false,
                full: vec![],
            },
        ),
        (
            &all,
            &ra,
            Work::Stored {
                red: 0,
                before_rows: false,
                siblings: vec![],
                epilogue: vec![],
                joined: false,
                full: vec![],
            },
        ),
        (
            &ew,
            &ra,
            Work::Elementwise {
                shape: vec![8, 96],
                outputs: vec![(ew.outputs[0], 0)],
            },
        ),
        (
            &tr,
            &ra,
            Work::Elementwise {
                shape: vec![96, 64],
                outputs: vec![(tr.outputs[0], 0)],
            },
        ),
    ];
    // A column sum of a column-major matrix: its columns lie contiguous.
    let cm = vec![Some((vec![1, 2048], 0))];
    let cands: Vec<_> = cands
        .into_iter()
        .map(|(f, r, w)| (f, r, w, vec![None; f.inputs.len()]))
        .chain([(
            &col_sum,
            &rc,
            Work::Stored {
                red: 0,
                before_rows: false,
                siblings: vec![],
                epilogue: vec![],
                joined: false,
                full: vec![],
            },
            cm,
        )])
        .collect();
    let mut fitted = std::collections::BTreeSet::new();
    for (f, reds, work, layouts) in cands {
        let c = Candidate {
            f,
            reds,
            name: "k".into(),
            work,
        };
        let cx = Context {
            f,
            layouts,
            stored: Default::default(),
            temps: vec![],
            idx_type: "int",
            dev,
        };
        let mut takers = 0;
        for s in SCHEDULES {
            let (ok, why) = match s.fits(&c, &cx, &dev) {
                Ok(w) => (true, w),
                Err(w) => (false, w),
            };
            assert!(!why.trim().is_empty(), "{} gave no reason", s.name());
            if ok {
                assert!(s.takes(&c.work), "{} fits work it does not take", s.name());
                assert!(
                    why.chars().any(|ch| ch.is_ascii_digit()),
                    "{}: {why}",
                    s.name()
                );
                fitted.insert(s.name());
            }
            takers += s.takes(&c.work) as usize;
        }
        assert!(takers > 0);
        // Some schedule fits every candidate: the registry never runs dry.
        assert!(fusebench_codegen::schedule::choose(&c, &cx, &dev).is_ok());
    }
    // Each schedule fits at least one of these.
    assert_eq!(fitted.len(), SCHEDULES.len(), "{fitted:?}");
}

/// The schedule of each kernel of `p` by name, checking that every rejected
/// schedule comes before the chosen one in the registry.
fn chosen(p: &Plan) -> Vec<(String, String)> {
    let order = names();
    p.kernels
        .iter()
        .map(|k| {
            let c = k
                .choice
                .as_ref()
                .unwrap_or_else(|| panic!("{} has no choice", k.name));
            assert!(!c.reason.is_empty());
            if let Some(at) = order.iter().position(|n| *n == c.schedule) {
                for r in &c.rejected {
                    let before = order.iter().position(|n| *n == r.schedule).unwrap();
                    assert!(
                        before < at,
                        "{}: {} tried after {}",
                        k.name,
                        r.schedule,
                        c.schedule
                    );
                }
            }
            (k.name.clone(), c.schedule.clone())
        })
        .collect()
}

#[test]
fn a_row_that_fits_one_block_is_rowwise_and_says_so() {
    let p = planned(&rmsnorm(264, 4096));
    assert_eq!(chosen(&p), [("fb_n0".to_string(), "rowwise".to_string())]);
    let c = p.kernels[0].choice.as_ref().unwrap();
    assert_eq!(
        c.reason,
        "row of 4096 bfloat16 = 512 vectors of 8 held by 128 of 128 threads x 4 vectors; 264 rows"
    );
    assert!(c.rejected.is_empty());
    // Fewer rows than SMs, one reduction: a block each, each row over more threads.
    let p = planned(&rmsnorm(33, 4096));
    let c = p.kernels[0].choice.as_ref().unwrap();
    assert_eq!(
        c.reason,
        "row of 4096 bfloat16 = 512 vectors of 8 held by 512 of 512 threads x 1 vectors; 33 rows, \
         fewer than the 132 SMs and one reduction: each row spread over the most threads"
    );
    assert_eq!(p.kernels[0].grid, [33, 1, 1]);
}

#[test]
fn a_long_row_is_persistent_and_says_why_not_rowwise() {
    let p = planned(&rmsnorm(200, 100000));
    assert_eq!(
        chosen(&p),
        [("fb_n0".to_string(), "persistent".to_string())]
    );
    let c = p.kernels[0].choice.as_ref().unwrap();
    assert_eq!(c.rejected.len(), 1);
    assert_eq!(c.rejected[0].schedule, "rowwise");
    assert!(c.rejected[0].reason.contains("12500 vectors of 8"), "{c:?}");
}

#[test]
fn sums_over_rows_grid_sums_and_pointwise_say_their_schedule() {
    // A column sum: the outer schedule's partials and its combine, after
    // rowwise said why not (FUSEBENCH_COLUMN_SUMS).
    let p = planned(&sum(&[2048, 4096], &[0]));
    let s: Vec<String> = chosen(&p).into_iter().map(|(_, s)| s).collect();
    assert!(s.iter().all(|s| s == "outer"), "{s:?}");
    let c = p.kernels[0].choice.as_ref().unwrap();
    assert!(c.rejected.iter().any(|r| r.schedule == "rowwise" && r.reason.contains("FUSEBENCH_COLUMN_SUMS")), "{c:?}");
    // One result over a million elements: split over blocks (the partials
    // and their combine, which writes the output).
    let p = planned(&sum(&[1 << 20], &[0]));
    let s: Vec<String> = chosen(&p).into_iter().map(|(_, s)| s).collect();
    assert_eq!(s, ["grid", "grid"]);
    // A row sum, stored: persistent, after contiguous, grid and rowwise said why not.
    let p = planned(&sum(&[64, 1000], &[1]));
    let c = p.kernels[0].choice.as_ref().unwrap();
    assert_eq!(c.schedule, "persistent", "{c:?}");
    let tried: Vec<&str> = c.rejected.iter().map(|r| r.schedule.as_str()).collect();
    assert_eq!(tried, ["contiguous", "grid", "rowwise"]);
    assert!(
        c.rejected[1].reason.contains("64 results of 1000 elements"),
        "{c:?}"
    );
    let p = planned(&neg(&[8, 96]));
    assert_eq!(chosen(&p), [("fb_p0".to_string(), "pointwise".to_string())]);
    // A column sum of a column-major matrix: a group of lanes per result
    // reading its contiguous column, one kernel.
    let f = sum(&[2048, 4096], &[0]);
    let p = plan(&f, &[Some((vec![1, 2048], 0))], Device::default()).unwrap();
    assert_eq!(chosen(&p), [("fb_r0".to_string(), "contiguous".to_string())]);
    assert!(p.kernels[0].summary.contains("4096 results, 128 lanes each"), "{}", p.kernels[0].summary);
}
