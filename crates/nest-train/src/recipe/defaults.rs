//! The defaults of the recipe keys a recipe may leave out (serde's `default = "..."` on
//! [`super::Recipe`] and [`super::DataSource`]), and the forms a layer or dim list key takes
//! ([`list_text`]).

use serde::Deserialize;

use super::Decay;

pub(super) fn one() -> f64 {
    1.0
}

pub(super) fn d_dtype() -> nest_model::DtypeChoice {
    nest_model::DtypeChoice::Fixed(nest_model::Dtype::Float32)
}

pub(super) fn d_scale() -> f64 {
    20.0
}
pub(super) fn d_epochs() -> usize {
    1
}
pub(super) fn d_batch() -> usize {
    32
}
pub(super) fn d_accum() -> usize {
    1
}
pub(super) fn d_lr() -> f64 {
    2e-5
}
pub(super) fn d_wd() -> f64 {
    0.01
}
pub(super) fn d_warmup() -> f64 {
    0.1
}
pub(super) fn d_decay() -> Decay {
    Decay::Linear
}
pub(super) fn d_clip() -> f64 {
    1.0
}
pub(super) fn d_seed() -> u64 {
    42
}
pub(super) fn d_true() -> bool {
    true
}
pub(super) fn d_save() -> u64 {
    500
}
pub(super) fn d_keep() -> usize {
    3
}

/// A list of layers or dims as its text (`"1-6"`, `"2,4,6"`), written as that text, one
/// number (`eval_layers = 6`, `--eval-layers 6`) or an array of numbers (`[2, 4, 6]`,
/// `--eval-dims 64,384`): every form a user writes for such a key.
pub(super) fn list_text<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    #[derive(serde::Deserialize)]
    #[serde(untagged)]
    enum Form {
        Text(String),
        One(u64),
        Many(Vec<u64>),
    }
    let expected = "a list of numbers: \"1-6\", \"2,4,6\", 6 or [2, 4, 6]";
    let form = Form::deserialize(d).map_err(|_| serde::de::Error::custom(expected))?;
    Ok(match form {
        Form::Text(t) => t,
        Form::One(n) => n.to_string(),
        Form::Many(v) => v.iter().map(u64::to_string).collect::<Vec<_>>().join(","),
    })
}
