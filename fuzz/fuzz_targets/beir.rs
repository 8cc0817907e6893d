//! A BEIR folder whose three files are the input cut at 0xFF bytes (corpus, queries, qrels):
//! `Ok` or an error naming one of the files.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let dir = std::env::temp_dir().join(format!("nest-fuzz-beir-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("qrels")).unwrap();
    let mut parts = data.splitn(3, |&b| b == 0xFF);
    for name in ["corpus.jsonl", "queries.jsonl", "qrels/test.tsv"] {
        std::fs::write(dir.join(name), parts.next().unwrap_or(&[])).unwrap();
    }
    if let Err(e) = nest_core::data::Beir::read(&dir, "test") {
        let m = e.to_string();
        assert!(
            ["corpus.jsonl", "queries.jsonl", "test.tsv"].iter().any(|f| m.contains(f)),
            "{m}"
        );
    }
});
