//! Fingerprints that say whether two measurements measured the same thing:
//! the fusion's definition, its inputs' layout, the kernels' code, the GPU.

use fusebench_ir::Fusion;
use fusebench_measure::InputLayout;
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
    g.input_facts = None;
    hash(&g.to_json())
}

/// Layout of every input (scalars by value) and its hash.
pub fn inputs(args: &[Arg]) -> (String, Vec<InputLayout>) {
    let layouts: Vec<InputLayout> = args
        .iter()
        .map(|a| match a {
            Arg::Tensor(t) => InputLayout {
                dtype: t.dtype().torch_name().into(),
                shape: t.shape().to_vec(),
                strides: t.strides().to_vec(),
                byte_offset: t.offset() * t.dtype().size_bytes(),
            },
            Arg::Scalar(l) => InputLayout {
                dtype: format!("scalar {l}"),
                shape: vec![],
                strides: vec![],
                byte_offset: 0,
            },
        })
        .collect();
    let text: String = layouts
        .iter()
        .map(|l| {
            format!(
                "{}:{:?}:{:?}:{};",
                l.dtype, l.shape, l.strides, l.byte_offset
            )
        })
        .collect();
    (hash(&text), layouts)
}
