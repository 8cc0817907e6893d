//! TSV readers (STS, triplets, labelled, pairs): `Ok` or an error naming the file, never a panic (body in `src/targets.rs`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| nest_fuzz::targets::tsv(data));
