//! `fd.add_output(out, alias_input=inp)` where `inp` is not dense row-major
//! (transposed, sliced, strided): nvFuser writes the output through the
//! input's own allocation, so the caller's tensor holds the result in its
//! elements and the storage between them is untouched. Here the kernels
//! write the output's dense buffer as for any output, and one more kernel,
//! after all of them (so every kernel reads the input as given, the CPU
//! reference's meaning), copies each element to its place in the input.
//! A dense row-major input needs no kernel: the engine copies the buffer.

use crate::plan::{code_hash, Kernel, KernelArg, OutputSource, Plan, Schedule};
use crate::{ctype, CodegenError};
use fusebench_ir::{recipe::row_major_strides, Fusion};

const BLOCK: u32 = 256;

/// Appends the kernels that write aliased outputs into strided inputs, and
/// records their outputs in `p.alias_writes`.
pub fn add(
    f: &Fusion,
    layouts: &[Option<(Vec<i64>, i64)>],
    p: &mut Plan,
) -> Result<(), CodegenError> {
    for a in &f.aliases {
        let Some(ipos) = f.inputs.iter().position(|&i| i == a.input) else {
            continue;
        };
        let Some((strides, offset)) = layouts.get(ipos).cloned().flatten() else {
            continue;
        };
        let o = &p.outputs[a.output];
        let input = f.value(a.input);
        let shape = input.shape.clone().unwrap_or_default();
        // Views, layouts and mismatches are the engine's to refuse.
        if !matches!(o.source, OutputSource::Written)
            || o.strides.is_some()
            || o.dtype != input.dtype
            || o.shape != shape
            || strides.len() != shape.len()
        {
            continue;
        }
        let dense = shape
            .iter()
            .zip(strides.iter().zip(row_major_strides(&shape)))
            .all(|(&e, (&s, r))| e == 1 || s == r);
        if dense && offset == 0 {
            continue;
        }
        if let Some(why) = overlap(&shape, &strides, offset) {
            return Err(CodegenError::Unsupported(format!(
                "output {} updates input {} in place (add_output alias), but the input's {why}: \
                 an in-place update of it is not defined",
                f.value(f.outputs[a.output]).name,
                input.name
            )));
        }
        let numel: usize = shape.iter().product();
        if numel > 0 {
            let name = format!("fb_alias{}", a.output);
            let src = kernel(
                &name,
                ctype::storage(o.dtype),
                a.output,
                ipos,
                &shape,
                &strides,
                offset,
            );
            // The prelude again: the copy may name a section the others did not.
            p.source = crate::prelude::module(&format!("{}\n{src}", crate::prelude::kernels_of(&p.source)));
            p.pieces.push(crate::plan::Module::alone(&name, &src));
            p.kernels.push(Kernel {
                code_hash: code_hash(&src),
                choice: Some(crate::plan::Choice::only(
                    "alias write",
                    "an output the script writes into its input's own strided elements",
                )),
                ..Kernel::new(
                    name,
                    Schedule::Pointwise,
                    [crate::launch::grid_dim(numel.div_ceil(BLOCK as usize)), 1, 1],
                    [BLOCK, 1, 1],
                    vec![KernelArg::Output(a.output), KernelArg::Input(ipos)],
                    format!(
                        "writes {} into input {}'s own elements (strides {strides:?}, offset {offset})",
                        f.value(f.outputs[a.output]).name,
                        input.name
                    ),
                )
            });
        }
        p.alias_writes.push(a.output);
    }
    Ok(())
}

/// Why two elements of the view share storage, if they do (a dim of extent
/// > 1 at stride 0, say): then the update would depend on the write order.
fn overlap(shape: &[usize], strides: &[i64], offset: i64) -> Option<String> {
    if offset < 0 || strides.iter().any(|&s| s < 0) {
        return Some(format!(
            "strides {strides:?} or offset {offset} are negative"
        ));
    }
    let mut dims: Vec<usize> = (0..shape.len()).filter(|&d| shape[d] > 1).collect();
    dims.sort_by_key(|&d| strides[d]);
    // Sorted by stride, each dim must step past everything the inner ones reach.
    let mut reach = 0i64;
    for d in dims {
        if strides[d] <= reach {
            return Some(format!(
                "elements overlap (strides {strides:?} for shape {shape:?})"
            ));
        }
        reach += strides[d] * (shape[d] as i64 - 1);
    }
    None
}

/// One thread per element: the dense element `e` goes to the input's
/// storage index `offset + sum(index[d] * strides[d])`.
fn kernel(
    name: &str,
    ty: &str,
    out: usize,
    input: usize,
    shape: &[usize],
    strides: &[i64],
    offset: i64,
) -> String {
    let numel: usize = shape.iter().product();
    let mut body = String::new();
    for d in (0..shape.len()).rev() {
        if shape[d] > 1 {
            body.push_str(&format!(
                "  at += (r % {e}LL) * {s}LL; r /= {e}LL;\n",
                e = shape[d],
                s = strides[d]
            ));
        }
    }
    format!(
        "extern \"C\" __global__ void __launch_bounds__({BLOCK}) {name}(const {ty}* __restrict__ out{out}, {ty}* in{input}) {{\n\
         \x20 long long e = (long long)blockIdx.x * {BLOCK} + threadIdx.x;\n\
         \x20 if (e >= {numel}LL) return;\n\
         \x20 long long r = e, at = {offset}LL;\n\
         {body}\
         \x20 in{input}[at] = out{out}[e];\n\
         }}\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlap_is_found_and_gaps_are_not_overlap() {
        // A [3, 5] slice of a [3, 8] tensor: row stride 8, gaps of 3.
        assert_eq!(overlap(&[3, 5], &[8, 1], 2), None);
        // Transposed, dense.
        assert_eq!(overlap(&[3, 5], &[1, 3], 0), None);
        // Every other element, size-1 dims at any stride.
        assert_eq!(overlap(&[4, 1, 3], &[6, 0, 2], 0), None);
        // Expanded: stride 0 on extent 4.
        assert!(overlap(&[4, 3], &[0, 1], 0).is_some());
        // Rows of 5 at stride 3 overlap.
        assert!(overlap(&[3, 5], &[3, 1], 0).is_some());
    }

    #[test]
    fn kernel_indexes_through_the_strides() {
        let k = kernel("k", "float", 1, 0, &[3, 5], &[8, 1], 2);
        assert!(k.contains("at = 2LL"), "{k}");
        assert!(k.contains("at += (r % 5LL) * 1LL; r /= 5LL;"), "{k}");
        assert!(k.contains("at += (r % 3LL) * 8LL; r /= 3LL;"), "{k}");
        assert!(k.contains("in0[at] = out1[e];"), "{k}");
        assert!(k.contains("e >= 15LL"), "{k}");
    }
}
