//! Reading one golden case of shared/golden: the reader lives in
//! `fusebench_reference::golden`, shared with `fusebench check --data`.
//! Included by the reference's golden test and the engine's GPU test.

pub use fusebench_reference::golden::golden_case;
