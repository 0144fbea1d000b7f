//! The device prelude a module starts with: `prelude/core.cu` always, each
//! other section only where the kernels, or a section already taken, name an
//! identifier the section brings (an `fb_` name it writes that neither the
//! core nor an earlier section does). NVRTC spent time on every helper of
//! the whole prelude, used or not: the seed RMSNorm compiled in 154-204 ms
//! with all of it and in 128-145 ms with the sections it uses (NVRTC 12.9,
//! two cores), and the kernels' machine code is the same either way.

use std::collections::BTreeSet;

const CORE: &str = include_str!("prelude/core.cu");

/// Flash attention's section, also part of its kernels' fingerprint
/// (attention.rs): the wrapper alone does not say what the template does.
pub const ATTENTION: &str = include_str!("prelude/attention.cu");
/// Flash attention's backward section (after the forward's, whose helpers it uses).
pub const ATTENTION_BWD: &str = include_str!("prelude/attention_bwd.cu");
/// The grouped product's section (after attention's, whose helpers it uses).
pub const GROUPED_MM: &str = include_str!("prelude/grouped_mm.cu");

/// The optional sections in the order they are written: a section may use
/// names of the core and of the sections before it.
const SECTIONS: &[&str] = &[
    include_str!("prelude/lgamma.cu"),
    include_str!("prelude/fp8.cu"),
    include_str!("prelude/complex.cu"),
    include_str!("prelude/rng.cu"),
    include_str!("prelude/ops.cu"),
    include_str!("prelude/complex_prod.cu"),
    ATTENTION,
    ATTENTION_BWD,
    GROUPED_MM,
];

/// The last line of every prelude: where the kernels begin.
const END: &str = "// end of the fusebench prelude\n";

/// The `fb_` identifiers in `text`.
fn names(text: &str) -> BTreeSet<&str> {
    let mut out = BTreeSet::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while let Some(at) = text[i..].find("fb_") {
        let start = i + at;
        let starts_word = start == 0 || !(bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == b'_');
        let mut end = start + 3;
        while end < bytes.len() && (bytes[end].is_ascii_alphanumeric() || bytes[end] == b'_') {
            end += 1;
        }
        if starts_word {
            out.insert(&text[start..end]);
        }
        i = end;
    }
    out
}

/// What each section brings: its names less the core's and the earlier
/// sections'. The same for every module (a plan makes one per kernel too,
/// `plan::Module::alone`), so found once.
fn brings() -> &'static [BTreeSet<&'static str>] {
    static BRINGS: std::sync::OnceLock<Vec<BTreeSet<&'static str>>> = std::sync::OnceLock::new();
    BRINGS.get_or_init(|| {
        let mut seen = names(CORE);
        SECTIONS
            .iter()
            .map(|s| {
                let own: BTreeSet<&str> = names(s).difference(&seen).copied().collect();
                seen.extend(own.iter().copied());
                own
            })
            .collect()
    })
}

/// The module source for `kernels` (each kernel's source, joined with a
/// newline before each): the prelude they need, then the kernels.
pub fn module(kernels: &str) -> String {
    let brings = brings();
    // Sections taken until none more is named (a later section may name an
    // earlier one's names: complex products name the complex type).
    let mut wanted = names(kernels);
    let mut taken = vec![false; SECTIONS.len()];
    loop {
        let more: Vec<usize> = (0..SECTIONS.len())
            .filter(|&i| !taken[i] && !brings[i].is_disjoint(&wanted))
            .collect();
        if more.is_empty() {
            break;
        }
        for i in more {
            taken[i] = true;
            wanted.extend(names(SECTIONS[i]));
        }
    }
    let mut out = String::from(CORE);
    for (i, s) in SECTIONS.iter().enumerate() {
        if taken[i] {
            out.push_str(s);
        }
    }
    out.push_str(END);
    out.push_str(kernels);
    out
}

/// The kernels of a module `module` wrote (everything after its prelude).
pub fn kernels_of(module: &str) -> &str {
    module.find(END).map_or(module, |i| &module[i + END.len()..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_whole_identifiers() {
        let n = names("x = fb_philox(a); y = my_fb_x; fb_u4 r; // fb_rng_uniformf_r");
        assert_eq!(n.into_iter().collect::<Vec<_>>(), ["fb_philox", "fb_rng_uniformf_r", "fb_u4"]);
    }

    #[test]
    fn a_plain_kernel_takes_the_core_only() {
        let m = module("\nextern \"C\" __global__ void k(float* o) { o[0] = fb_bf2f(1); }\n");
        assert!(m.starts_with(CORE));
        assert!(!m.contains("fb_philox") && !m.contains("fb_cf") && !m.contains("fb_lgamma"), "{m}");
        assert_eq!(kernels_of(&m), "\nextern \"C\" __global__ void k(float* o) { o[0] = fb_bf2f(1); }\n");
    }

    #[test]
    fn a_section_comes_with_the_sections_it_names() {
        // A complex product names the complex type: both sections, in order.
        let m = module("\n... fb_block_prod_cd(v, s) ...\n");
        let complex = m.find("struct __align__(8) fb_cf").expect("the complex section");
        let prod = m.find("fb_block_prod_cd(fb_cd v").expect("the complex products");
        assert!(complex < prod);
        assert!(!m.contains("fb_philox"));
        // Random numbers alone.
        let m = module("\n... fb_philox(0ull, 1, 0ull) ...\n");
        assert!(m.contains("fb_rng_uniformf_r") && !m.contains("fb_cf"), "{m}");
    }

    #[test]
    fn every_section_brings_a_name() {
        let mut seen = names(CORE);
        for s in SECTIONS {
            let own: BTreeSet<&str> = names(s).difference(&seen).copied().collect();
            assert!(!own.is_empty(), "a section no kernel could ask for:\n{s}");
            seen.extend(own);
        }
    }
}
