//! A fusion prepared by fusebench's engine, as the harness measures it.

use crate::fingerprint;
use crate::subject::{KernelFacts, Launch, Subject};
use crate::HarnessError;
use fusebench_engine::Prepared;
use fusebench_ir::Fusion;
use std::collections::BTreeMap;

pub struct FusionSubject<'a> {
    prep: &'a Prepared,
    id: fusebench_measure::Subject,
}

impl<'a> FusionSubject<'a> {
    /// `name` is for people (the script's file name).
    pub fn new(name: &str, fusion: &Fusion, prep: &'a Prepared) -> FusionSubject<'a> {
        let inputs = prep.input_layouts().to_vec();
        FusionSubject {
            id: fusebench_measure::Subject {
                name: name.to_string(),
                definition_hash: fingerprint::definition(fusion),
                inputs_hash: fingerprint::inputs(&inputs),
                inputs,
            },
            prep,
        }
    }
}

impl Subject for FusionSubject<'_> {
    fn identity(&self) -> fusebench_measure::Subject {
        self.id.clone()
    }

    fn launches(&self) -> Option<Vec<Launch>> {
        self.prep.launch_list()
    }

    fn launch(&self, k: usize) -> Result<(), HarnessError> {
        Ok(self.prep.launch(k)?)
    }

    /// A plan with matrix products runs whole: the library picks its kernels.
    fn call(&self) -> Result<(), HarnessError> {
        Ok(self.prep.launch_all()?)
    }

    fn libraries(&self) -> String {
        let plan = &self.prep.plan;
        let mut libs = vec![];
        if !plan.products.is_empty() {
            libs.push(format!("cuBLASLt {}", fusebench_runtime::blas_version().unwrap_or(0)));
        }
        if !plan.attention.is_empty() {
            libs.push(format!("cuDNN {}", fusebench_runtime::dnn_version().unwrap_or(0)));
        }
        libs.join(", ")
    }

    fn kernel_facts(&self) -> Vec<KernelFacts> {
        // The library's kernels are not known before they run.
        if self.prep.plan.runs_library() {
            return Vec::new();
        }
        self.prep
            .plan
            .kernels
            .iter()
            .zip(&self.prep.kernels)
            .map(|(pk, k)| KernelFacts {
                code_hash: pk.code_hash.clone(),
                shared_bytes: k.attributes().static_shared_bytes,
                registers: k.attributes().registers_per_thread,
            })
            .collect()
    }

    fn bytes(&self) -> Option<(u64, String)> {
        let (bytes, how) = self.prep.bytes_moved();
        Some((bytes as u64, how))
    }

    fn device_bytes(&self) -> Option<u64> {
        Some(self.prep.device_bytes() as u64)
    }

    fn input_bytes(&self) -> u64 {
        self.prep.input_bytes() as u64
    }

    fn make_placements(&self, n: usize) -> Result<usize, HarnessError> {
        self.prep.make_input_copies(n)?;
        Ok(self.prep.input_sets())
    }

    fn use_placement(&self, i: usize) {
        self.prep.use_input_set(i);
    }

    fn knobs(&self) -> BTreeMap<String, String> {
        fusebench_knobs::get()
            .map(|k| k.affecting(&[fusebench_knobs::Affects::Kernels]))
            .unwrap_or_default()
    }
}
