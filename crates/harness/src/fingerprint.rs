//! Fingerprints that say whether two measurements measured the same thing:
//! a fusion's definition and its inputs' layout.

use fusebench_ir::Fusion;
use fusebench_measure::InputLayout;
use sha2::{Digest, Sha256};

/// The first 12 bytes of the SHA-256 of `text`, in hex.
pub fn hash(text: &str) -> String {
    hash_bytes(text.as_bytes())
}

/// The first 12 bytes of the SHA-256 of `bytes`, in hex.
pub fn hash_bytes(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .take(12)
        .map(|b| format!("{b:02x}"))
        .collect()
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

/// The hash of the inputs' layouts (dtype, shape, strides, alignment).
pub fn inputs(layouts: &[InputLayout]) -> String {
    let text: String = layouts
        .iter()
        .map(|l| {
            format!(
                "{}:{:?}:{:?}:{};",
                l.dtype, l.shape, l.strides, l.byte_offset
            )
        })
        .collect();
    hash(&text)
}
