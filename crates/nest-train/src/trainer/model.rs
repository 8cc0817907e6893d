//! The model a run trains and the objective it trains it with.

use nest_model::ElasticEncoder;
use tch::nn::VarStore;

use super::types::{Event, ObjectiveBuilder, TrainOptions};
use crate::objective::Objective;
use crate::recipe::Recipe;
use crate::Result;

/// Loads the recipe's model (dtype, dropout, projection head) and builds its objective, whose
/// parameters start from the recipe's seed (a resume then overwrites them).
pub(crate) fn load_model(
    r: &Recipe,
    o: &TrainOptions,
    build: &ObjectiveBuilder,
    events: &mut dyn FnMut(Event),
) -> Result<(ElasticEncoder, VarStore, Box<dyn Objective>)> {
    // a missing data file fails now, not after the model loads
    crate::data::check_inputs(&r.data, &r.eval_data)?;
    build_model(r, o.device, build, events)
}

/// [`load_model`] without checking the data: the model and objective alone (what a checkpoint
/// is written out with, `super::export`).
pub(crate) fn build_model(
    r: &Recipe,
    device: tch::Device,
    build: &ObjectiveBuilder,
    events: &mut dyn FnMut(Event),
) -> Result<(ElasticEncoder, VarStore, Box<dyn Objective>)> {
    let model_dir = nest_model::hub::resolve(&r.model)?;
    let max_len = (r.max_length > 0).then_some(r.max_length);
    let mut enc = ElasticEncoder::load(&model_dir, device, max_len)?;
    let dtype = nest_model::dtype::resolve(r.dtype, device);
    enc.set_training_dtype(dtype.dtype)?;
    if let Some(p) = r.dropout {
        enc.set_dropout(p);
    }
    events(Event::Message(format!(
        "dtype {} ({})",
        dtype.dtype, dtype.reason
    )));
    if r.projection > 0 {
        match enc.head.out_features() {
            // a resumed or continued run whose model already has its head
            Some(out) if out == r.projection => {}
            _ => enc.add_projection(r.projection)?,
        }
    }
    let obj_vs = VarStore::new(device);
    tch::manual_seed(r.seed as i64);
    let objective = build(r, &enc, &(obj_vs.root() / "objective"))?;
    Ok((enc, obj_vs, objective))
}
