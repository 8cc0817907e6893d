//! Per-item scores kept in `report.json` so that two reports can be compared item by item
//! (see [`crate::significance`]): what a paired bootstrap resamples, and what it needs to
//! recompute a task's main metric on every resample.
//!
//! | task kind | per task (`gold`)         | per cell (`items`)                      | main metric from them |
//! |-----------|---------------------------|-----------------------------------------|-----------------------|
//! | sts       | each pair's gold score    | each pair's cosine similarity           | Spearman x100         |
//! | pair      | each pair's label (0 / 1) | each pair's cosine similarity           | AP x100               |
//! | cls       | each test example's class | each test example's predicted class     | accuracy x100         |
//! | retrieval | none                      | each query's nDCG@10                    | mean x100             |
//!
//! Stored compactly as base64 of little-endian float32 (5.3 characters per item).

use base64::Engine as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::family::family;
use crate::tasks::TaskKind;

/// A vector of per-item values, serialised as base64 of little-endian f32.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Items(pub Vec<f32>);

impl Items {
    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn from_f64(v: &[f64]) -> Self {
        Items(v.iter().map(|&x| x as f32).collect())
    }
}

impl Serialize for Items {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let bytes: Vec<u8> = self.0.iter().flat_map(|x| x.to_le_bytes()).collect();
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(bytes))
    }
}

impl<'de> Deserialize<'de> for Items {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(text.as_bytes())
            .map_err(|e| serde::de::Error::custom(format!("per-item scores: not base64: {e}")))?;
        if bytes.len() % 4 != 0 {
            return Err(serde::de::Error::custom(format!(
                "per-item scores: {} bytes is not a whole number of float32 values",
                bytes.len()
            )));
        }
        Ok(Items(
            bytes
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
        ))
    }
}

/// A task's main metric (x100) recomputed on the items `idx` (a resample, with repeats) from
/// the per-item scores of one cell and the task's gold (its family's statistic).
///
/// Corpus-level statistics (Spearman, AP) are recomputed on the resample, not averaged.
pub fn statistic(kind: TaskKind, gold: &[f32], items: &[f32], idx: &[usize]) -> f64 {
    family(kind).statistic(gold, items, idx)
}

/// Whether a task kind needs a per-task gold vector beside its per-cell items.
pub fn needs_gold(kind: TaskKind) -> bool {
    family(kind).needs_gold()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_round_trip_exactly() {
        let v = Items(vec![0.1, -2.5, f32::MIN_POSITIVE, 1e30, 0.0]);
        let json = serde_json::to_string(&v).unwrap();
        let back: Items = serde_json::from_str(&json).unwrap();
        assert_eq!(back, v);
        // 5 floats = 20 bytes = 28 base64 characters (+2 quotes)
        assert_eq!(json.len(), 30);
    }

    #[test]
    fn items_reject_bad_text() {
        let e = serde_json::from_str::<Items>("\"AAA\"").unwrap_err();
        assert!(e.to_string().contains("per-item scores"), "{e}");
        let e = serde_json::from_str::<Items>("\"AAA=\"").unwrap_err();
        assert!(e.to_string().contains("whole number"), "{e}");
    }

    #[test]
    fn statistic_on_all_items_is_the_metric() {
        let gold = [0.0f32, 1.0, 2.0, 3.0];
        let sims = [0.1f32, 0.3, 0.2, 0.9];
        let all = [0, 1, 2, 3];
        assert!((statistic(TaskKind::Sts, &gold, &sims, &all) - 80.0).abs() < 1e-9);
        let pred = [0.0f32, 1.0, 1.0, 3.0];
        assert_eq!(statistic(TaskKind::Cls, &gold, &pred, &all), 75.0);
        assert_eq!(
            statistic(TaskKind::Retrieval, &[], &sims, &[3, 3]),
            100.0 * 0.9f32 as f64
        );
    }
}
