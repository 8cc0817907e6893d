//! The one place a network plugs into Nest: the [`Backbone`] trait every architecture
//! implements, and [`REGISTRY`], one line per architecture (as text-embeddings-inference's
//! `Model` trait and candle's per-model files). A new backbone is its module file (a serde
//! config of its own keys, `new` registering the weights under Hugging Face's names, a
//! `forward` whose loop over layers stops at the requested one), one registry line and a tiny
//! fixture (`tiny.rs`).

use tch::nn::VarStore;

use crate::bert::Bert;
use crate::config::{Architecture, ModelConfig};
use crate::dtype::Dtype;
use crate::gemma3::{Gemma3, Gemma3Config};
use crate::io::{ClsAttention, EncoderInput, EncoderOutput, Exits};
use crate::modernbert::{ModernBert, ModernBertConfig};
use crate::mpnet::Mpnet;
use crate::qwen3::{Qwen3, Qwen3Config};
use crate::xlm_roberta::XlmRoberta;

/// A transformer that runs up to any of its layers.
pub trait Backbone: std::fmt::Debug + Send {
    /// Layers in the stack.
    fn num_layers(&self) -> usize;
    /// Overrides every dropout probability (hidden, attention, embedding) with `p`.
    fn set_dropout(&mut self, p: f64);
    /// The arithmetic of the products (`convert`: weights converted for inference; `rest`: the
    /// type of what is not a product).
    fn set_dtype(&mut self, dtype: Dtype, convert: bool, rest: Dtype);
    /// Runs the first `exits.depth()` layers.
    ///
    /// # Shapes
    /// - `input.ids`, `input.mask`: `[batch, seq]`
    /// - output `hidden_states`: the kept states `[batch, seq, hidden]` ([`Exits`]: all
    ///   `layers + 1`, index 0 the embeddings, or the asked ones in layer order)
    fn forward(
        &self,
        input: &EncoderInput,
        exits: Exits<'_>,
        train: bool,
        capture: ClsAttention,
    ) -> EncoderOutput;
}

/// Builds one architecture's network with its weights registered in `vs` (not loaded); an
/// error is a message about `config.json`'s keys.
pub type Build = fn(&VarStore, &ModelConfig) -> Result<Box<dyn Backbone>, String>;

/// Every architecture Nest runs, and how to build it.
pub const REGISTRY: [(Architecture, Build); 6] = [
    (Architecture::Bert, |vs, c| {
        Ok(Box::new(Bert::new(vs.root(), c)))
    }),
    (Architecture::Mpnet, |vs, c| {
        Ok(Box::new(Mpnet::new(vs.root(), c)))
    }),
    (Architecture::XlmRoberta, |vs, c| {
        Ok(Box::new(XlmRoberta::new(vs.root(), c)))
    }),
    (Architecture::Qwen3, |vs, c| {
        Ok(Box::new(Qwen3::new(
            vs.root(),
            c,
            &Qwen3Config::from_model(c)?,
        )))
    }),
    (Architecture::ModernBert, |vs, c| {
        Ok(Box::new(ModernBert::new(
            vs.root(),
            c,
            &ModernBertConfig::from_model(c)?,
        )))
    }),
    (Architecture::Gemma3, |vs, c| {
        Ok(Box::new(Gemma3::new(
            vs.root(),
            c,
            &Gemma3Config::from_model(c)?,
        )))
    }),
];

/// Implements [`Backbone`] by the architecture's own methods of the same names.
macro_rules! backbone {
    ($($t:ty),*) => {$(
        impl Backbone for $t {
            fn num_layers(&self) -> usize {
                <$t>::num_layers(self)
            }
            fn set_dropout(&mut self, p: f64) {
                <$t>::set_dropout(self, p)
            }
            fn set_dtype(&mut self, dtype: Dtype, convert: bool, rest: Dtype) {
                <$t>::set_dtype(self, dtype, convert, rest)
            }
            fn forward(
                &self,
                input: &EncoderInput,
                exits: Exits<'_>,
                train: bool,
                capture: ClsAttention,
            ) -> EncoderOutput {
                <$t>::forward(self, input, exits, train, capture)
            }
        }
    )*};
}

backbone!(Bert, Mpnet, XlmRoberta, Qwen3, ModernBert, Gemma3);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_architecture_is_registered_once() {
        let all = [
            Architecture::Bert,
            Architecture::Mpnet,
            Architecture::XlmRoberta,
            Architecture::Qwen3,
            Architecture::ModernBert,
            Architecture::Gemma3,
        ];
        for a in all {
            assert_eq!(REGISTRY.iter().filter(|(r, _)| *r == a).count(), 1, "{a:?}");
        }
    }
}
