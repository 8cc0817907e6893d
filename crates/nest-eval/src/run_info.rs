//! What a report says about how it was made: the model (architecture, dtype, prompts) and
//! what each point costs (encode latency per layer, measured in the same run).

use std::collections::BTreeMap;
use std::time::Instant;

use nest_model::{ElasticEncoder, EncodeOptions};
use serde::{Deserialize, Serialize};

use crate::tasks::Task;
use crate::Result;

/// JSON has no NaN: serde_json writes a non-finite number as `null`; read `null` back as NaN
/// (e.g. a Spearman over constant similarities), so every report round-trips.
pub(crate) fn nullable_map<'de, D, K>(d: D) -> Result<BTreeMap<K, f64>, D::Error>
where
    D: serde::Deserializer<'de>,
    K: Deserialize<'de> + Ord,
{
    let m: BTreeMap<K, Option<f64>> = Deserialize::deserialize(d)?;
    Ok(m.into_iter()
        .map(|(k, v)| (k, v.unwrap_or(f64::NAN)))
        .collect())
}

/// The model a report describes.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ModelInfo {
    pub path: String,
    pub architecture: String,
    pub num_layers: usize,
    pub hidden_size: usize,
    pub pooling: String,
    pub max_seq_length: usize,
    /// The arithmetic the model ran in (`--dtype`); reports written before it existed were
    /// float32.
    #[serde(default = "float32")]
    pub dtype: String,
    /// The prompt of each side (`nest eval --prompt*`); reports written before it existed
    /// used the model's default prompt, if any, everywhere.
    #[serde(default)]
    pub prompts: nest_model::prompt::TaskPrompts,
    /// The model's training objective and seed as its `nest.json` records them (none for
    /// models Nest did not train, and in reports from before they were recorded): what
    /// `nest eval seeds` checks its runs by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub objective: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
}

fn float32() -> String {
    "float32".into()
}

/// What each point costs: encode latency per layer, bytes per vector per (dim, precision).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Costs {
    /// Milliseconds per text at each layer (batch `latency_batch`, `latency_texts` texts,
    /// `libtorch_threads` threads).
    #[serde(deserialize_with = "nullable_map")]
    pub latency_ms: BTreeMap<usize, f64>,
    pub latency_texts: usize,
    pub latency_batch: usize,
    pub libtorch_threads: i32,
    /// What the latencies were measured on (reports written before it existed: unknown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<nest_model::machine::Machine>,
}

impl ModelInfo {
    /// The model as `path` names it, read off the loaded encoder (no prompts: the caller
    /// records the ones its run used).
    pub fn of(path: &str, model: &ElasticEncoder) -> ModelInfo {
        ModelInfo {
            path: path.to_string(),
            architecture: model.config.model_type.clone(),
            num_layers: model.num_layers(),
            hidden_size: model.hidden_size(),
            pooling: format!("{:?}", model.pooling).to_lowercase(),
            max_seq_length: model.tokenizer.max_length(),
            dtype: model.dtype().name().into(),
            prompts: Default::default(),
            objective: model.meta.objective.clone(),
            seed: model.meta.seed,
        }
    }
}

impl Costs {
    /// Encode latency per layer on the first `n` texts of the tasks (the default when `n` is 0:
    /// nothing measured).
    pub fn measure(
        model: &ElasticEncoder,
        tasks: &[Task],
        layers: &[usize],
        n: usize,
        opts: EncodeOptions,
    ) -> Result<Costs> {
        let mut texts: Vec<&str> = Vec::new();
        for t in tasks {
            texts.extend(t.data.timing_texts());
            if texts.len() >= n {
                break;
            }
        }
        texts.truncate(n);
        if texts.is_empty() {
            return Ok(Costs::default());
        }
        Ok(Costs {
            latency_ms: measure_latency(model, &texts, layers, opts)?,
            latency_texts: texts.len(),
            latency_batch: opts.batch_size,
            libtorch_threads: tch::get_num_threads(),
            machine: Some(nest_model::machine::Machine::this(model.device())),
        })
    }
}

/// Encode latency per layer in milliseconds per text: the best of 2 timed passes over `texts`
/// after a warm-up, batch size from `opts`.
pub fn measure_latency(
    encoder: &ElasticEncoder,
    texts: &[&str],
    layers: &[usize],
    opts: EncodeOptions,
) -> Result<BTreeMap<usize, f64>> {
    let mut out = BTreeMap::new();
    if texts.is_empty() {
        return Ok(out);
    }
    for &l in layers {
        encoder.embed_layers(&texts[..texts.len().min(64)], &[l], opts, &mut |_| {})?;
        let mut best = f64::INFINITY;
        for _ in 0..2 {
            let t = Instant::now();
            encoder.embed_layers(texts, &[l], opts, &mut |_| {})?;
            best = best.min(t.elapsed().as_secs_f64());
        }
        out.insert(l, 1000.0 * best / texts.len() as f64);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A report written before the machine record existed still reads (machine unknown), and
    /// one with it reads back whole.
    #[test]
    fn costs_read_with_and_without_the_machine() {
        let old = r#"{"latency_ms": {"3": 0.5}, "latency_texts": 4, "latency_batch": 32,
                      "libtorch_threads": 2}"#;
        let c: Costs = serde_json::from_str(old).unwrap();
        assert_eq!((c.latency_ms[&3], c.machine), (0.5, None));
        let with = Costs {
            machine: Some(nest_model::machine::Machine::this(tch::Device::Cpu)),
            ..c
        };
        let back: Costs = serde_json::from_str(&serde_json::to_string(&with).unwrap()).unwrap();
        assert_eq!(back, with);
    }
}
