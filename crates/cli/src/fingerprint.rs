//! Fingerprints that say whether two measurements measured the same thing:
//! the fusion's definition, its inputs' layout, the kernels' code, the GPU.

use fusebench_ir::Fusion;
use fusebench_reference::Arg;
use sha2::{Digest, Sha256};

fn hex(bytes: &[u8]) -> String {
    bytes.iter().take(12).map(|b| format!("{b:02x}")).collect()
}

pub fn hash(text: &str) -> String {
    hex(&Sha256::digest(text.as_bytes()))
}

/// The fusion's definition: its JSON form without the script's header and
/// input recipe (a saved script of the same fusion hashes the same).
pub fn definition(f: &Fusion) -> String {
    let mut g = f.clone();
    g.script = Default::default();
    g.recipe = None;
    hash(&g.to_json())
}

/// Shapes, strides, dtypes and byte offset of every input; scalars by value.
pub fn inputs(args: &[Arg]) -> String {
    let mut s = String::new();
    for a in args {
        match a {
            Arg::Tensor(t) => s.push_str(&format!(
                "{}:{:?}:{:?}:{};",
                t.dtype(),
                t.shape(),
                t.strides(),
                t.offset() * t.dtype().size_bytes()
            )),
            Arg::Scalar(l) => s.push_str(&format!("scalar:{l};")),
        }
    }
    hash(&s)
}
