//! What the codegen tests share: a fusion from the body of an nvFuser
//! repro script's definition function (direct syntax), the layouts its
//! definitions declare, and a plan's kernels without the device prelude every
//! plan starts with.

// Each test file uses the helpers it needs.
#![allow(dead_code)]

/// Parses `body` (the indented lines of `def f(fd)`) as a repro script.
pub fn script(body: &str) -> fusebench_ir::Fusion {
    let src = format!(
        "import torch\nfrom nvfuser_direct import FusionDefinition, DataType\ndef f(fd : FusionDefinition) -> None :\n{body}with FusionDefinition() as fd:\n    f(fd)\n"
    );
    fusebench_frontend::parse_script("t.py", &src).unwrap_or_else(|e| panic!("{e}"))
}

/// The plan's CUDA from its first kernel on: the prelude is the same for
/// every fusion.
pub fn kernels(p: &fusebench_codegen::Plan) -> &str {
    p.source.find("extern \"C\"").map_or("", |i| &p.source[i..])
}

/// Each input's layout as its define_tensor declares it (contiguity and
/// stride order: a `None` contiguity is stride 0), offset 0.
pub fn declared_layouts(f: &fusebench_ir::Fusion) -> Vec<Option<(Vec<i64>, i64)>> {
    f.inputs
        .iter()
        .map(|&v| match &f.value(v).def {
            fusebench_ir::ValueDef::TensorInput(d) => Some((d.dense_strides(f.value(v).shape.as_ref().unwrap()), 0)),
            _ => None,
        })
        .collect()
}
