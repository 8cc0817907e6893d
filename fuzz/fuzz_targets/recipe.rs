//! Training and distillation recipes (TOML): `Ok` or an error naming the file, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let dir = std::env::temp_dir().join(format!("nest-fuzz-recipe-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("recipe.toml");
    std::fs::write(&p, data).unwrap();
    if let Err(e) = nest_train::Recipe::load(Some(&p), &[]) {
        assert!(e.to_string().contains("recipe.toml"), "{e}");
    }
    if let Err(e) = nest_train::distill::DistillRecipe::load(&p, &[]) {
        assert!(e.to_string().contains("recipe.toml"), "{e}");
    }
});
