//! The document and sentence readers (JSONL and plain text): `Ok` or an error naming the file.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nest_core::data::{read_documents, read_sentences};

fuzz_target!(|data: &[u8]| {
    let dir = std::env::temp_dir().join(format!("nest-fuzz-jsonl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for name in ["input.jsonl", "input.txt"] {
        let p = dir.join(name);
        std::fs::write(&p, data).unwrap();
        if let Err(e) = read_documents(&p) {
            assert!(e.to_string().contains(name), "{e}");
        }
        if let Err(e) = read_sentences(&p) {
            assert!(e.to_string().contains(name), "{e}");
        }
    }
});
