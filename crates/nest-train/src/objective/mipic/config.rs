//! The keys of a `[[objective]]` table with `kind = "mipic"`, each with its default.

use serde::{Deserialize, Serialize};

fn one() -> f64 {
    1.0
}
fn yes() -> bool {
    true
}
fn eight() -> usize {
    8
}
fn simcse_tau() -> f64 {
    0.05
}

/// The keys of a `[[objective]]` table with `kind = "mipic"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MipicConfig {
    /// Weight of the component: `1 - alpha` of eq. 18.
    #[serde(default = "one")]
    pub weight: f64,
    /// Nested dims `d_1 < ... < d_n = D`; empty = the recipe's `matryoshka_dims`.
    #[serde(default)]
    pub dims: Vec<usize>,
    /// The SIA terms (eq. 4-14); `false` = the "MIPIC w/o SIA" ablation (Table 3).
    #[serde(default = "yes")]
    pub sia: bool,
    /// The PIC terms (eq. 15-17); `false` = "MIPIC w/o PIC".
    #[serde(default = "yes")]
    pub pic: bool,
    /// Layers where SIA applies (the set `L` of eq. 14); empty = the checkpoint layers.
    #[serde(default)]
    pub sia_layers: Vec<usize>,
    /// Layer `l_i` of each checkpoint `(l_i, d_i)`; empty =
    /// [`checkpoint_layers`](super::checkpoint_layers)'s rule.
    #[serde(default)]
    pub checkpoint_layers: Vec<usize>,
    /// `gamma_i` of `k_i = max(min_k, ceil(gamma_i * m))` for each prefix dim below `D`;
    /// empty = 0.2, 0.3, ... (Appendix A.5).
    #[serde(default)]
    pub top_k_ratios: Vec<f64>,
    /// The floor of `k_i` (Appendix A.5: 8).
    #[serde(default = "eight")]
    pub min_k: usize,
    /// `tau` of the \[CLS\]-attention softmax (eq. 4-5). The paper gives no value for it (Table
    /// 7's 0.05 is SimCSE's); 1 keeps the `1/sqrt(D)`-scaled scores as they are.
    #[serde(default = "one")]
    pub attention_temperature: f64,
    /// `tau` of the chain's InfoNCE (eq. 16): Table 7's 0.05.
    #[serde(default = "simcse_tau")]
    pub pic_temperature: f64,
    /// Detach each link's deeper checkpoint `z_{i+1}`, so that PIC only moves the earlier one
    /// ("propagates task-relevant cues from deeper layers to earlier ones", section 3.3), as
    /// SIA's full-dimensional side is a fixed teacher. `false` = eq. 16 with gradient to both.
    /// Chosen on STS-B dev (docs/STRUCTURE.md): 76.4 detached vs 68.3 at d = 384.
    #[serde(default = "yes")]
    pub pic_detach_target: bool,
    /// The sentence vector PIC chains (eq. 16 pools \[CLS\]): unset = the model's own pooling
    /// (the vector the model is trained and served with; mean for all-MiniLM-L6-v2), or a
    /// pooling mode such as `"cls"` for the paper's reading.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pic_pooling: Option<nest_model::Pooling>,
}

impl Default for MipicConfig {
    fn default() -> Self {
        toml::Value::Table(Default::default())
            .try_into()
            .expect("every key has a default")
    }
}
