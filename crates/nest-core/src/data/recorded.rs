//! How an index's documents were embedded, as its source record keeps it: what decides whether
//! vectors made now match them (documents added to the index, a new build that keeps them,
//! queries against a pgvector table exported from it).

use serde_json::Value;

/// The keys of a source record that fix how its vectors were embedded.
pub const POINT_KEYS: [&str; 4] = ["model", "layer", "max_length", super::DOCUMENT_PROMPT];

/// Whether two recorded model paths name the same model: the same folder however written (both
/// resolved), or the same hub id as written.
pub fn same_model(a: &str, b: &str) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => a == b,
    }
}

/// The key of a source record holding [`weights_sha256`] of the model that embedded it.
pub const WEIGHTS_KEY: &str = "weights_sha256";

/// The start of the source record of vectors embedded by `model` (a folder or a hub id, as
/// given) at `layer`, cut at `max_length` tokens: a local folder as its absolute path (so that
/// the record names it from any folder), and its weights' [`weights_sha256`] (so that the folder
/// retrained in place is noticed: [`weights_note`]).
pub fn point_record(model: &str, layer: usize, max_length: usize) -> Value {
    let local = std::path::Path::new(model);
    let name = match local.is_dir() {
        true => crate::fsutil::absolute_in(std::path::Path::new("."), local)
            .display()
            .to_string(),
        false => model.to_string(),
    };
    let mut v = serde_json::json!({"model": name, "layer": layer, "max_length": max_length});
    if let Some(w) = weights_sha256(local) {
        v[WEIGHTS_KEY] = w.into();
    }
    v
}

/// Bytes of each end of a weights file that [`weights_sha256`] reads.
const SAMPLE: u64 = 4 << 20;

/// A sha256 of a model folder's weight files (`*.safetensors`, `*.bin`, in its folder and one
/// level down, sorted): each file's name, length, and first and last 4 MiB, which training
/// changes throughout (reading every byte of a large model at each search would not pay).
/// `None` for a hub id or a folder without weights.
pub fn weights_sha256(model: &std::path::Path) -> Option<String> {
    use sha2::Digest;
    use std::io::{Read, Seek, SeekFrom};
    let mut files: Vec<std::path::PathBuf> = Vec::new();
    let mut look = |dir: &std::path::Path| {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let p = e.path();
            let weights = p
                .extension()
                .is_some_and(|x| x == "safetensors" || x == "bin");
            if weights && p.is_file() {
                files.push(p);
            }
        }
    };
    look(model);
    for e in std::fs::read_dir(model).ok()?.flatten() {
        if e.path().is_dir() {
            look(&e.path());
        }
    }
    files.sort();
    if files.is_empty() {
        return None;
    }
    let mut h = sha2::Sha256::new();
    for f in &files {
        let mut file = std::fs::File::open(f).ok()?;
        let len = file.metadata().ok()?.len();
        let rel = f.strip_prefix(model).unwrap_or(f);
        h.update(format!("{} {len}\n", rel.display()).as_bytes());
        let mut buf = Vec::new();
        file.by_ref().take(SAMPLE).read_to_end(&mut buf).ok()?;
        if len > 2 * SAMPLE {
            file.seek(SeekFrom::End(-(SAMPLE as i64))).ok()?;
            file.read_to_end(&mut buf).ok()?;
        } else {
            file.read_to_end(&mut buf).ok()?;
        }
        h.update(&buf);
    }
    Some(format!("{:x}", h.finalize()))
}

/// A warning when the model folder a source record names holds other weights now than those
/// that embedded its vectors (retrained or replaced in place): the queries embedded now would
/// not match them. `None` when they agree, or the record (an older index) or folder says
/// nothing to compare.
pub fn weights_note(source: &Value) -> Option<String> {
    let recorded = source.get(WEIGHTS_KEY)?.as_str()?;
    let model = source.get("model")?.as_str()?;
    let now = weights_sha256(std::path::Path::new(model))?;
    (now != recorded).then(|| {
        format!(
            "the model {model} holds other weights than those that embedded these documents \
             (retrained or replaced since): queries embedded now may not match them; rebuild \
             the index with the model as it is, or put the old weights back"
        )
    })
}

/// The [`POINT_KEYS`] on which `before` and `after` differ, each as `key before -> after` (a
/// key one record lacks differs from any value the other has).
pub fn point_differences(before: &Value, after: &Value) -> Vec<String> {
    POINT_KEYS
        .iter()
        .filter(|k| {
            let (a, b) = (&before[**k], &after[**k]);
            match (**k, a.as_str(), b.as_str()) {
                ("model", Some(a), Some(b)) => !same_model(a, b),
                _ => a != b,
            }
        })
        .map(|k| format!("{k} {} -> {}", before[*k], after[*k]))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn differences_name_each_key_and_resolve_model_folders() {
        let dir = std::env::temp_dir().join(format!("nest-recorded-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("m")).unwrap();
        let (plain, dotted) = (dir.join("m"), dir.join("m/../m"));
        let a = json!({"model": plain.to_str().unwrap(), "layer": 6, "max_length": 128,
                       "document_prompt": null});
        let mut b = a.clone();
        b["model"] = dotted.to_str().unwrap().into();
        assert!(
            point_differences(&a, &b).is_empty(),
            "one folder, written twice"
        );
        b["document_prompt"] = "passage: ".into();
        b["layer"] = 3.into();
        assert_eq!(
            point_differences(&a, &b),
            ["layer 6 -> 3", "document_prompt null -> \"passage: \""]
        );
        b.as_object_mut().unwrap().remove("max_length");
        assert_eq!(point_differences(&a, &b).len(), 3, "a missing key differs");
        assert!(!same_model("org/a", "org/b") && same_model("org/a", "org/a"));
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// The record names a folder absolutely with its weights' hash; a copy of the folder (new
    /// times) hashes the same, weights of the same length changed in place do not, and only
    /// then is there a note. A hub id is kept as given, without a hash.
    #[test]
    fn a_record_notices_weights_changed_in_place() {
        let d = tempfile::tempdir().unwrap();
        let m = d.path().join("m");
        std::fs::create_dir_all(m.join("2_Dense")).unwrap();
        let big: Vec<u8> = (0..(9u32 << 20)).map(|i| (i % 251) as u8).collect();
        std::fs::write(m.join("model.safetensors"), &big).unwrap();
        std::fs::write(m.join("2_Dense/model.safetensors"), [1u8, 2, 3]).unwrap();
        let r = point_record(m.to_str().unwrap(), 3, 128);
        assert_eq!(r["model"], m.display().to_string());
        assert_eq!(
            (r["layer"].as_u64(), r["max_length"].as_u64()),
            (Some(3), Some(128))
        );
        assert_eq!(weights_note(&r), None);
        let copy = d.path().join("copy");
        std::fs::create_dir_all(copy.join("2_Dense")).unwrap();
        for f in ["model.safetensors", "2_Dense/model.safetensors"] {
            std::fs::copy(m.join(f), copy.join(f)).unwrap();
        }
        assert_eq!(
            weights_sha256(&copy),
            weights_sha256(&m),
            "a copy is the same model"
        );
        // retrained: the same length, other bytes (at the start; and then in the Dense head)
        let mut changed = big.clone();
        changed[100] ^= 1;
        std::fs::write(m.join("model.safetensors"), &changed).unwrap();
        let note = weights_note(&r).expect("other weights");
        assert!(
            note.contains("holds other weights than those that embedded"),
            "{note}"
        );
        std::fs::write(m.join("model.safetensors"), &big).unwrap();
        std::fs::write(m.join("2_Dense/model.safetensors"), [1u8, 2, 4]).unwrap();
        assert!(weights_note(&r).is_some(), "a head's weights count too");
        let hub = point_record("org/model", 6, 512);
        assert!(hub["model"] == "org/model" && hub.get(WEIGHTS_KEY).is_none());
    }
}
