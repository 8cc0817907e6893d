//! What a method's config provides to the registry ([`super::registry`]): its value checks and
//! how it is built for one model.

use std::rc::Rc;

use super::teacher::TeacherTable;
use super::{Objective, TaskLoss};

/// What every method's config provides to the registry.
pub(crate) trait Component {
    /// The component's weight in the sum.
    fn weight(&self) -> f64;
    /// Whether it scores the recipe's task loss (and so needs one: not `loss = "none"`).
    fn uses_task_loss(&self) -> bool {
        false
    }
    /// Value checks that need no model.
    fn validate(&self) -> Result<(), String>;
    /// The objective for the model [`BuildContext`] describes; the message names what is wrong
    /// (the caller adds the recipe key).
    fn build(&self, cx: &BuildContext) -> Result<Box<dyn Objective>, String>;
    /// Where this method was measured to hurt (against MRL on the same budget), in one line
    /// with the doc that holds the evidence: `nest train` prints it when it starts.
    fn evidence(&self) -> Option<&'static str> {
        None
    }
}

/// The model and recipe-wide settings a component is built for.
pub(crate) struct BuildContext<'a> {
    pub(crate) task: TaskLoss,
    /// Width of the model's output vectors.
    pub(crate) hidden: usize,
    pub(crate) num_layers: usize,
    /// The recipe-wide `matryoshka_dims` and `matryoshka_weights`, for components that name no
    /// dims of their own (empty: the full width).
    pub(crate) default_dims: &'a [usize],
    pub(crate) default_weights: &'a [f64],
    /// Where this component's trainable parameters go (its own prefix).
    pub(crate) params: tch::nn::Path<'a>,
    /// A teacher's vectors of the training texts (`nest distill`).
    pub(crate) teacher: Option<Rc<TeacherTable>>,
}

impl BuildContext<'_> {
    /// A component's dims and weights, else the recipe's, else the full width; checked against
    /// the model.
    pub(crate) fn dims(
        &self,
        dims: &[usize],
        weights: &[f64],
    ) -> Result<(Vec<usize>, Vec<f64>), String> {
        let (d, w) = if !dims.is_empty() {
            (dims.to_vec(), weights.to_vec())
        } else if !self.default_dims.is_empty() {
            (self.default_dims.to_vec(), self.default_weights.to_vec())
        } else {
            (vec![self.hidden], Vec::new())
        };
        self.in_range(&d)?;
        Ok((d, w))
    }

    /// Every dim within the model's width.
    pub(crate) fn in_range(&self, dims: &[usize]) -> Result<(), String> {
        nest_core::spec::check_dims("dims", dims, self.hidden).map_err(|e| match e {
            nest_core::Error::Value { message, .. } => message,
            e => e.to_string(),
        })
    }
}

/// The value check of a component's prefix dims (and their weights, when given).
pub(crate) fn increasing(dims: &[usize], weights: &[f64]) -> Result<(), String> {
    if dims.windows(2).any(|w| w[0] >= w[1]) || dims.contains(&0) {
        return Err(format!("dims {dims:?} must be increasing and >= 1"));
    }
    if !weights.is_empty() && weights.len() != dims.len() {
        return Err(format!("{} weights for {} dims", weights.len(), dims.len()));
    }
    Ok(())
}
