//! Nest's fuzz targets: the bodies live in `targets.rs`, which the workspace's corpus replay
//! test (`crates/nest-cli/tests/fuzz_corpus.rs`) includes too.
pub mod targets;
