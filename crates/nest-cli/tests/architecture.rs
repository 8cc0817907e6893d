//! ARCHITECTURE.md stays true to the code where it names it: every source file it names in
//! backticks (`point.rs`, `objective/registry.rs`) exists under the workspace, and every crate
//! of the workspace has its paragraph (`**nest-x**`), no more and no fewer.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn sources(dir: &Path, out: &mut Vec<String>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if p.is_dir()
            && !matches!(
                name.as_str(),
                "target" | ".git" | ".deps" | "models" | "runs"
            )
        {
            sources(&p, out);
        } else if name.ends_with(".rs") {
            out.push(p.to_string_lossy().replace('\\', "/"));
        }
    }
}

#[test]
fn architecture_names_only_files_and_crates_that_exist() {
    let doc = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let mut files = Vec::new();
    for d in ["crates", "fuzz", "python/src"] {
        sources(&root().join(d), &mut files);
    }
    let named: Vec<&str> = doc
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|s| s.ends_with(".rs") && !s.contains(' '))
        .collect();
    assert!(named.len() > 40, "only {} file names found", named.len());
    for n in &named {
        assert!(
            files.iter().any(|f| f.ends_with(&format!("/{n}"))),
            "ARCHITECTURE.md names `{n}`, which no source file is"
        );
    }
    let manifest = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    let members: Vec<String> = manifest
        .split('"')
        .filter_map(|s| s.strip_prefix("crates/").map(str::to_string))
        .collect();
    assert!(members.len() >= 9, "{members:?}");
    for m in &members {
        assert!(
            doc.contains(&format!("**{m}**")),
            "ARCHITECTURE.md has no paragraph on {m}"
        );
    }
    for para in doc.split("**nest-").skip(1) {
        let name = format!("nest-{}", para.split("**").next().unwrap());
        assert!(
            members.contains(&name),
            "ARCHITECTURE.md describes {name}, not a workspace crate"
        );
    }
}

/// scripts/README.md is the index of scripts/: every script in a purpose folder is listed under
/// its folder, and every script it lists exists (a moved or new script cannot go unindexed).
#[test]
fn the_scripts_index_lists_every_script_where_it_is() {
    let scripts = root().join("scripts");
    let index = std::fs::read_to_string(scripts.join("README.md")).unwrap();
    let mut on_disk = Vec::new();
    for dir in std::fs::read_dir(&scripts).unwrap().flatten() {
        let path = dir.path();
        if !path.is_dir() || path.ends_with("__pycache__") {
            continue;
        }
        let folder = dir.file_name().to_string_lossy().into_owned();
        for f in std::fs::read_dir(&path).unwrap().flatten() {
            let name = f.file_name().to_string_lossy().into_owned();
            if name.ends_with(".sh") || name.ends_with(".py") {
                on_disk.push(format!("{folder}/{name}"));
            }
        }
    }
    assert!(on_disk.len() > 40, "{on_disk:?}");
    let missing: Vec<_> = on_disk
        .iter()
        .filter(|s| !index.contains(&format!("`{s}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "scripts/README.md does not list {missing:?}"
    );
    for listed in index.split('`').skip(1).step_by(2) {
        if listed.contains('/') && (listed.ends_with(".sh") || listed.ends_with(".py")) {
            let path = scripts.join(listed);
            assert!(
                path.is_file() || root().join(listed).is_file(),
                "scripts/README.md lists {listed}, which is not there"
            );
        }
    }
}

/// Every `NEST_*` variable the code reads by hand (`env::var("NEST_...")`; a flag's `env =`
/// fallback is shown by `--help`) is named in the README or a page of docs/, so a knob a
/// newcomer meets in a log or a benchmark can be looked up.
#[test]
fn every_environment_knob_is_documented() {
    let mut files = Vec::new();
    sources(&root().join("crates"), &mut files);
    sources(&root().join("python/src"), &mut files);
    let mut read = std::collections::BTreeSet::new();
    for f in files.iter().filter(|f| f.contains("/src/")) {
        let text = std::fs::read_to_string(f).unwrap();
        for call in ["env::var(\"", "env::var_os(\""] {
            for part in text.split(call).skip(1) {
                let name: String = part
                    .chars()
                    .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                    .collect();
                if name.starts_with("NEST_") && part[name.len()..].starts_with('"') {
                    read.insert(name);
                }
            }
        }
    }
    assert!(read.contains("NEST_CUDA_GRAPHS"), "the scan found {read:?}");
    let mut docs = std::fs::read_to_string(root().join("README.md")).unwrap();
    for e in std::fs::read_dir(root().join("docs")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "md") {
            docs += &std::fs::read_to_string(&p).unwrap();
        }
    }
    let missing: Vec<_> = read.iter().filter(|v| !docs.contains(v.as_str())).collect();
    assert!(
        missing.is_empty(),
        "read by the code, named in no doc: {missing:?}"
    );
}

/// The names of every `NEST_*` variable in `text` (a token `NEST_` plus capitals, digits and
/// underscores, not inside a longer word).
fn nest_vars(text: &str, out: &mut std::collections::BTreeSet<String>) {
    for (i, _) in text.match_indices("NEST_") {
        let before = text[..i].chars().next_back();
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
            continue;
        }
        let name: String = text[i..]
            .chars()
            .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
            .collect();
        if name.len() > "NEST_".len() && !name.ends_with('_') {
            out.insert(name);
        }
    }
}

/// `nest_core::env_vars::KNOWN`, the names a command's start checks the environment against
/// (a misspelt one is warned about), is exactly the `NEST_*` names the repository's code,
/// scripts and tests use: a new knob cannot be warned about as unknown, nor an old name kept.
#[test]
fn the_known_environment_variables_are_those_the_repository_uses() {
    fn walk(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let p = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            if p.is_dir() && !matches!(name.as_str(), "target" | ".deps" | "models" | "runs") {
                walk(&p, out);
            } else if [".rs", ".py", ".sh", ".cpp", ".h", ".toml"]
                .iter()
                .any(|x| name.ends_with(x))
                || name == "run"
            {
                out.push(p);
            }
        }
    }
    let mut files = Vec::new();
    for d in [
        "crates",
        "python/src",
        "python/nest",
        "python/tests",
        "scripts",
        "fuzz",
        ".ci",
    ] {
        walk(&root().join(d), &mut files);
    }
    let mut used = std::collections::BTreeSet::new();
    for f in files
        .iter()
        .filter(|f| !f.ends_with("nest-core/src/env_vars.rs"))
    {
        nest_vars(&std::fs::read_to_string(f).unwrap_or_default(), &mut used);
    }
    assert!(
        used.contains("NEST_CUDA_GRAPHS") && used.contains("NEST_GPU_DRY"),
        "{used:?}"
    );
    let known: std::collections::BTreeSet<String> = nest_core::env_vars::KNOWN
        .iter()
        .map(|s| s.to_string())
        .collect();
    let unlisted: Vec<_> = used.difference(&known).collect();
    let unused: Vec<_> = known.difference(&used).collect();
    assert!(
        unlisted.is_empty() && unused.is_empty(),
        "used but not in nest_core::env_vars::KNOWN: {unlisted:?}; listed but used nowhere: {unused:?}"
    );
}
