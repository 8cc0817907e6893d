//! The defaults of the recipe keys a recipe may leave out (serde's `default = "..."` on
//! [`super::Recipe`] and [`super::DataSource`]).

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
