//! What the fuzz targets share: the input formats that are not plain bytes (a stream's
//! request sequence, a Kubernetes watch event script) with their encoders for the seed
//! writer, and the chain of push contexts the stream target pushes.
//!
//! Each format is read with [`arbitrary`]'s `Unstructured` one byte-level field at a time, so
//! that an encoder can write the same structure back: the seeds of `fuzz/seeds/` are the unit
//! tests' scenarios written in these formats (`examples/write-seeds.rs`).

pub mod contexts;
pub mod kube_script;
pub mod stream_input;
