//! Property tests of the shape rules: random shapes through each op give the
//! shapes the rules promise, and invalid combinations are errors, not panics.

use fusebench_ir::{DType, FusionBuilder, Literal, ReduceOp};
use proptest::prelude::*;

fn shape() -> impl Strategy<Value = Vec<i64>> {
    prop::collection::vec(1i64..6, 1..5)
}

fn shape_of(fd: &FusionBuilder, v: fusebench_ir::ValueId) -> Vec<i64> {
    fd.fusion()
        .value(v)
        .shape
        .as_ref()
        .unwrap()
        .iter()
        .map(|&e| e as i64)
        .collect()
}

proptest! {
    #[test]
    fn broadcasting_against_ones_gives_the_full_shape(s in shape(), mask in prop::collection::vec(any::<bool>(), 4), drop in 0usize..3) {
        let mut fd = FusionBuilder::new();
        let a = fd.tensor(&s, DType::Float).unwrap();
        let mut t: Vec<i64> = s.iter().zip(mask.iter().cycle()).map(|(&e, &m)| if m { 1 } else { e }).collect();
        let drop = drop.min(t.len() - 1);
        t.drain(..drop);
        let b = fd.tensor(&t, DType::Float).unwrap();
        let c = fd.add(a, b).unwrap();
        prop_assert_eq!(shape_of(&fd, c), s.clone());
        let c2 = fd.add(b, a).unwrap();
        prop_assert_eq!(shape_of(&fd, c2), s);
    }

    #[test]
    fn reshape_there_and_back(s in shape()) {
        let mut fd = FusionBuilder::new();
        let x = fd.tensor(&s, DType::BFloat16).unwrap();
        let n: i64 = s.iter().product();
        let flat = fd.reshape(x, &[n]).unwrap();
        prop_assert_eq!(shape_of(&fd, flat), vec![n]);
        let back = fd.reshape(flat, &s).unwrap();
        prop_assert_eq!(shape_of(&fd, back), s.clone());
        let inferred = fd.reshape(x, &[-1, *s.last().unwrap()]).unwrap();
        prop_assert_eq!(shape_of(&fd, inferred), vec![n / s.last().unwrap(), *s.last().unwrap()]);
        prop_assert!(fd.reshape(x, &[n + 1]).is_err());
    }

    #[test]
    fn permute_then_inverse(s in shape(), seed in any::<u64>()) {
        let mut perm: Vec<i64> = (0..s.len() as i64).collect();
        let mut r = seed;
        for i in (1..perm.len()).rev() {
            r = r.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            perm.swap(i, (r >> 33) as usize % (i + 1));
        }
        let mut inv = vec![0i64; perm.len()];
        for (i, &p) in perm.iter().enumerate() {
            inv[p as usize] = i as i64;
        }
        let mut fd = FusionBuilder::new();
        let x = fd.tensor(&s, DType::Float).unwrap();
        let p = fd.permute(x, &perm).unwrap();
        let expect: Vec<i64> = perm.iter().map(|&d| s[d as usize]).collect();
        prop_assert_eq!(shape_of(&fd, p), expect);
        let back = fd.permute(p, &inv).unwrap();
        prop_assert_eq!(shape_of(&fd, back), s);
    }

    #[test]
    fn reductions_drop_or_keep_dims(s in shape(), pick in prop::collection::vec(any::<bool>(), 4)) {
        let dims: Vec<i64> = (0..s.len() as i64).filter(|&d| pick[d as usize % pick.len()]).collect();
        prop_assume!(!dims.is_empty());
        let mut fd = FusionBuilder::new();
        let x = fd.tensor(&s, DType::Float).unwrap();
        let r = fd.reduce(ReduceOp::Sum, x, &dims, false).unwrap();
        let kept: Vec<i64> = (0..s.len()).filter(|d| !dims.contains(&(*d as i64))).map(|d| s[d]).collect();
        prop_assert_eq!(shape_of(&fd, r), kept);
        let k = fd.reduce(ReduceOp::Max, x, &dims, true).unwrap();
        let ones: Vec<i64> = (0..s.len()).map(|d| if dims.contains(&(d as i64)) { 1 } else { s[d] }).collect();
        prop_assert_eq!(shape_of(&fd, k), ones);
        // Negative dims name the same dims.
        let neg: Vec<i64> = dims.iter().map(|&d| d - s.len() as i64).collect();
        let r2 = fd.reduce(ReduceOp::Sum, x, &neg, false).unwrap();
        prop_assert_eq!(shape_of(&fd, r2), shape_of(&fd, r));
    }

    #[test]
    fn pad_then_slice_restores(s in shape(), before in 0i64..4, after in 0i64..4) {
        let mut fd = FusionBuilder::new();
        let x = fd.tensor(&s, DType::Float).unwrap();
        let p = fd.pad(x, &[before, after], Some(Literal::Float(0.0))).unwrap();
        let mut grown = s.clone();
        *grown.last_mut().unwrap() += before + after;
        prop_assert_eq!(shape_of(&fd, p), grown.clone());
        let start: Vec<i64> = s.iter().enumerate().map(|(d, _)| if d == s.len() - 1 { before } else { 0 }).collect();
        let end: Vec<i64> = s.iter().enumerate().map(|(d, &e)| if d == s.len() - 1 { before + e } else { e }).collect();
        let back = fd.slice(p, &start, &end).unwrap();
        prop_assert_eq!(shape_of(&fd, back), s);
    }

    #[test]
    fn cat_adds_extents_and_checks_the_rest(s in shape(), extra in 1i64..5) {
        let mut fd = FusionBuilder::new();
        let a = fd.tensor(&s, DType::Float).unwrap();
        let mut t = s.clone();
        t[0] = extra;
        let b = fd.tensor(&t, DType::Float).unwrap();
        let c = fd.cat(&[a, b], 0, false).unwrap();
        let mut expect = s.clone();
        expect[0] += extra;
        prop_assert_eq!(shape_of(&fd, c), expect);
        if s.len() > 1 {
            let mut u = s.clone();
            u[1] += 1;
            let bad = fd.tensor(&u, DType::Float).unwrap();
            prop_assert!(fd.cat(&[a, bad], 0, false).is_err());
        }
    }

    #[test]
    fn expand_only_grows_unit_dims(s in shape(), grow in 2i64..5) {
        let mut fd = FusionBuilder::new();
        let mut t = s.clone();
        t[0] = 1;
        let x = fd.tensor(&t, DType::Float).unwrap();
        let mut big = t.clone();
        big[0] = grow;
        let e = fd.expand(x, &big).unwrap();
        prop_assert_eq!(shape_of(&fd, e), big);
        if s.len() > 1 && t[1] > 1 {
            let mut wrong = t.clone();
            wrong[1] = t[1] + 1;
            prop_assert!(fd.expand(x, &wrong).is_err());
        }
    }
}
