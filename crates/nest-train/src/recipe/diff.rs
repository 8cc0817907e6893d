//! What a resume compares: the keys a resume may change ([`RESUMABLE_KEYS`]), the recipe as
//! the TOML a run directory records, and the key-by-key differences of two recipes.

use super::Recipe;

/// Keys whose change does not alter the run's trajectory so far: a resume may change them.
/// `cuda_graph` too: recorded and eager steps run the same operations on the same draws, so a
/// resume that changes it (a recording that failed, out of memory) goes on from the same
/// checkpoint, equal up to float reordering rather than bit for bit (said at the resume).
pub(crate) const RESUMABLE_KEYS: [&str; 7] = [
    "epochs",
    "max_steps",
    "eval_every",
    "save_every",
    "keep_last",
    "eval_layers",
    "cuda_graph",
];

impl Recipe {
    /// The recipe as TOML (saved in the run directory).
    pub(crate) fn to_toml(&self) -> String {
        toml::to_string_pretty(self).unwrap_or_default()
    }

    /// Keys whose values differ from `other`, except the resumable ones.
    pub(crate) fn differences(&self, other: &Recipe) -> Vec<String> {
        self.differences_except(other, &RESUMABLE_KEYS)
    }

    /// Keys whose values differ from `other`, the resumable ones too (a finished run's).
    pub(crate) fn all_differences(&self, other: &Recipe) -> Vec<String> {
        self.differences_except(other, &[])
    }

    fn differences_except(&self, other: &Recipe, skip: &[&str]) -> Vec<String> {
        let a = toml::Value::try_from(self).unwrap_or(toml::Value::Boolean(false));
        let b = toml::Value::try_from(other).unwrap_or(toml::Value::Boolean(false));
        let (Some(a), Some(b)) = (a.as_table(), b.as_table()) else {
            return vec!["(unreadable)".into()];
        };
        let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
        keys.sort();
        keys.dedup();
        keys.into_iter()
            .filter(|k| !skip.contains(&k.as_str()) && a.get(*k) != b.get(*k))
            .map(|k| {
                format!(
                    "{k}: {} -> {}",
                    a.get(k).map(|v| v.to_string()).unwrap_or("-".into()),
                    b.get(k).map(|v| v.to_string()).unwrap_or("-".into())
                )
            })
            .collect()
    }
}
