//! A model folder's JSON configs (`config.json`, `config_sentence_transformers.json`): `Ok` or an
//! error naming the file, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let dir = std::env::temp_dir().join(format!("nest-fuzz-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("config.json");
    std::fs::write(&p, data).unwrap();
    match nest_model::config::ModelConfig::read(&p) {
        Ok(c) => {
            // a config that parses either names a supported architecture or says which it lacks
            let _ = c.architecture();
        }
        Err(e) => assert!(e.to_string().contains("config.json"), "{e}"),
    }
    let st = dir.join("config_sentence_transformers.json");
    std::fs::write(&st, data).unwrap();
    if let Err(e) = nest_model::prompt::Prompts::read(Some(&st)) {
        assert!(e.to_string().contains("config_sentence_transformers.json"), "{e}");
    }
});
