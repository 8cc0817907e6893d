//! Nest training engine.
//!
//! CLI flags + recipe ([`recipe`]) -> data ([`data`]: readers, mixture, length-aware batches)
//! -> one encoder forward per column in train mode, all layers -> objective ([`objective`]:
//! one file per method, named loss terms; pure loss functions in [`losses`]) -> backward ->
//! [`optim::AdamW`] + the schedule -> checkpoint ([`checkpoint`], atomic, exact resume) ->
//! periodic grid evaluation -> final model in sentence-transformers layout (`nest_model::export`). The
//! loop is [`trainer::train`]; [`distill`] runs IBKD's two stages through it with a cached
//! teacher.
//!
//! # Public face
//!
//! What a user of the library calls; everything else is crate-private.
//!
//! - Recipes: [`Recipe::load`] (TOML plus typed [`recipe::Overrides`], validated),
//!   [`distill::DistillRecipe::load`]; a data source alone: [`data::read_source`].
//! - Training: [`trainer::train`], or [`trainer::train_with`] and an
//!   [`trainer::ObjectiveBuilder`] for an objective of one's own; [`trainer::TrainOptions`] in,
//!   [`trainer::Event`]s during, a [`trainer::Summary`] out; [`trainer::StepTimer`] times steps.
//! - Distillation: [`distill::run`]; the cached teacher alone: [`distill::teacher_vectors`].
//! - Mining hard negatives with a loaded model: [`mine::read_set`], [`mine::mine_rest`]
//!   (`nest mine`; the trainer's `[mine]` rounds).
//! - Checkpoints: [`checkpoint::list`], [`checkpoint::load`].
//! - Objectives, for extension: the [`objective::Objective`] trait with what it reads
//!   ([`objective::BatchOutput`], [`objective::StepContext`]) and returns
//!   ([`objective::Term`]); [`objective::Composite`] and [`objective::TaskLoss`] to combine it
//!   with the built-in ones.
//! - Errors: [`Error`], [`Result`].
//!
//! Also public, for the integration tests that check them against reference implementations:
//! the loss functions ([`losses`]), each objective's term functions and configuration
//! ([`objective::mic`], [`objective::mipic`], [`objective::hsic`], [`objective::distill`],
//! [`objective::TwoDMse`], [`objective::Ese`]), the teacher cache
//! ([`distill::cache::TeacherCache`]) and one step of the data path ([`data::load_sources`],
//! [`trainer::batch_output`], [`trainer::micro_step`]).

pub mod checkpoint;
pub mod data;
pub mod distill;
mod error;
pub mod losses;
pub mod mine;
pub mod objective;
/// The one AdamW, shared with `nest-compress`; it lives in `nest-model` (see its docs).
pub use nest_model::optim;
pub mod recipe;
mod schedule;
pub mod trainer;

pub use error::{Error, Result};
pub use recipe::Recipe;
