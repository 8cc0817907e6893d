//! Embedding matrices (`.npy`, `.safetensors`) as `nest compress` and `nest index` read them:
//! `Ok` or an error naming the file, never a panic, an abort or a huge allocation.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let dir = std::env::temp_dir().join(format!("nest-fuzz-matrix-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for name in ["m.npy", "m.safetensors"] {
        let p = dir.join(name);
        std::fs::write(&p, data).unwrap();
        if let Err(e) = nest_compress::data::read_matrix(&p) {
            assert!(e.to_string().contains(name), "{e}");
        }
    }
});
