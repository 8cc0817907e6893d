//! Every TSV reader of nest-core over the same bytes: `Ok` or an error naming the file.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nest_core::data::{read_classification, read_pairs, read_sts, TsvTable};

fn names<T>(r: nest_core::Result<T>, file: &str) {
    if let Err(e) = r {
        assert!(e.to_string().contains(file), "{e}");
    }
}

fuzz_target!(|data: &[u8]| {
    let dir = std::env::temp_dir().join(format!("nest-fuzz-tsv-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("input.tsv");
    std::fs::write(&p, data).unwrap();
    names(read_sts(&p), "input.tsv");
    names(TsvTable::read(&p, &["anchor", "positive", "negative"]), "input.tsv");
    names(read_classification(&p), "input.tsv");
    names(read_pairs(&p), "input.tsv");
});
