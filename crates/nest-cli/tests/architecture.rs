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
    for d in ["crates", "fuzz", "python/src", "build-support"] {
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
