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
}
