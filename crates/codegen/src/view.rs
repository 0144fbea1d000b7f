//! Index maps of the ops that only move values: given the index of an
//! element of the op's output, the index of the element it reads.

use crate::ix::Ix;
use std::ops::{Add, Mul};

/// Index into an operand broadcast numpy-style against an output of rank `out_rank`.
pub fn broadcast_operand(idx: &[Ix], operand_shape: &[usize]) -> Vec<Ix> {
    let off = idx.len() - operand_shape.len();
    operand_shape
        .iter()
        .enumerate()
        .map(|(j, &e)| {
            if e == 1 {
                Ix::c(0)
            } else {
                idx[off + j].clone()
            }
        })
        .collect()
}

/// Row-major decomposition of a linear index into `shape`; `bound` is an
/// exclusive bound on `lin`.
pub fn delinearize(lin: Ix, shape: &[usize]) -> Vec<Ix> {
    let mut out = vec![Ix::c(0); shape.len()];
    let total: i64 = shape.iter().map(|&e| e as i64).product();
    // A shape with a zero extent has no index to decompose (and would divide by zero below).
    if total == 0 {
        return out;
    }
    let mut inner = 1i64;
    for d in (0..shape.len()).rev() {
        let e = shape[d] as i64;
        if e == 1 {
            continue;
        }
        let q = lin.clone().div(inner, Some(total));
        // The outermost dim with extent > 1 needs no remainder.
        let outer_rest = total / (inner * e);
        out[d] = if outer_rest == 1 { q } else { q.rem(e, None) };
        inner *= e;
    }
    out
}

/// Row-major linear index of `idx` in `shape`.
pub fn linearize(idx: &[Ix], shape: &[usize]) -> Ix {
    let mut lin = Ix::c(0);
    let mut stride = 1i64;
    for d in (0..shape.len()).rev() {
        lin = lin.add(idx[d].clone().mul(stride));
        stride *= shape[d] as i64;
    }
    lin
}

/// Groups of dims (input dims, output dims) whose extents multiply to the
/// same number, ignoring extent-1 dims. Splits and merges stay local to their
/// group, so an innermost dim that a reshape keeps stays a plain index.
pub fn reshape_groups(input: &[usize], output: &[usize]) -> Vec<(Vec<usize>, Vec<usize>)> {
    let a: Vec<usize> = (0..input.len()).filter(|&d| input[d] != 1).collect();
    let b: Vec<usize> = (0..output.len()).filter(|&d| output[d] != 1).collect();
    // No elements: products of extents do not meet, and no index is ever
    // computed; one group of everything.
    if input.contains(&0) || output.contains(&0) {
        return if a.is_empty() && b.is_empty() { vec![] } else { vec![(a, b)] };
    }
    let (mut i, mut j) = (0, 0);
    let mut groups = Vec::new();
    while i < a.len() && j < b.len() {
        let (mut ga, mut gb) = (vec![a[i]], vec![b[j]]);
        let (mut pa, mut pb) = (input[a[i]], output[b[j]]);
        i += 1;
        j += 1;
        while pa != pb {
            if pa < pb {
                ga.push(a[i]);
                pa *= input[a[i]];
                i += 1;
            } else {
                gb.push(b[j]);
                pb *= output[b[j]];
                j += 1;
            }
        }
        groups.push((ga, gb));
    }
    groups
}

/// Index into a reshape's input from an index of its output.
pub fn reshape_input_index(idx: &[Ix], input: &[usize], output: &[usize]) -> Vec<Ix> {
    let mut out = vec![Ix::c(0); input.len()];
    for (ga, gb) in reshape_groups(input, output) {
        if ga.len() == 1 && gb.len() == 1 {
            out[ga[0]] = idx[gb[0]].clone();
            continue;
        }
        let gshape_b: Vec<usize> = gb.iter().map(|&d| output[d]).collect();
        let gidx: Vec<Ix> = gb.iter().map(|&d| idx[d].clone()).collect();
        let lin = linearize(&gidx, &gshape_b);
        let gshape_a: Vec<usize> = ga.iter().map(|&d| input[d]).collect();
        for (k, v) in delinearize(lin, &gshape_a).into_iter().enumerate() {
            out[ga[k]] = v;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reshape_keeps_inner_dim_plain() {
        let idx = vec![Ix::var("a"), Ix::var("b")];
        let got = reshape_input_index(&idx, &[2, 1024, 2048], &[2048, 2048]);
        assert_eq!(got[2], Ix::var("b"));
        assert_eq!(got[0].to_string(), "(a / 1024)");
        assert_eq!(got[1].to_string(), "(a % 1024)");
        let groups = reshape_groups(&[2, 1, 6], &[12]);
        assert_eq!(groups, vec![(vec![0, 2], vec![0])]);
    }

    #[test]
    fn delinearize_skips_unit_dims() {
        let got = delinearize(Ix::var("r"), &[2, 1024, 1]);
        assert_eq!(got[2], Ix::c(0));
        assert_eq!(got[0].to_string(), "(r / 1024)");
        assert_eq!(got[1].to_string(), "(r % 1024)");
    }
}
