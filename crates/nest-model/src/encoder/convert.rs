//! Converting an encoder's arithmetic ([`crate::dtype`]): once for inference, or the products
//! only for mixed-precision training.

use super::ElasticEncoder;
use crate::dtype::Dtype;
use crate::{Error, Result};

impl ElasticEncoder {
    /// The arithmetic the forward pass runs in ([`crate::dtype`]).
    pub fn dtype(&self) -> Dtype {
        self.dtype
    }

    pub(super) fn refuse_converted(&self, what: &str) -> Result<()> {
        if self.converted {
            return Err(Error::Core(nest_core::Error::value(
                "dtype",
                format!(
                    "{what} needs float32 weights; this encoder was converted to {} for inference",
                    self.dtype
                ),
            )));
        }
        Ok(())
    }

    /// Converts the encoder for inference in `dtype`, once, from float32: bf16 replaces the
    /// linear weights by bfloat16 copies, int8 quantises them (per output channel) and frees the
    /// float32 ones. Embeddings, LayerNorms, pooling and any Dense head stay float32.
    pub fn convert_for_inference(&mut self, dtype: Dtype) -> Result<()> {
        if dtype == self.dtype {
            return Ok(());
        }
        self.refuse_converted("converting again")?;
        // int8 leaves the value projection unquantised: in bf16 where `auto` would pick bf16 on
        // this machine (measured, cached), else float32
        let rest = match dtype {
            Dtype::Int8 => crate::dtype::auto(self.device()).dtype,
            _ => Dtype::Float32,
        };
        self.set_net_dtype(dtype, true, rest);
        self.converted = dtype != Dtype::Float32;
        Ok(())
    }

    /// Mixed precision for training: the products in `dtype` (float32 or bf16), the float32
    /// weights kept as the master copy (AdamW and checkpoints stay float32). int8 is refused: it
    /// is for inference only.
    pub fn set_training_dtype(&mut self, dtype: Dtype) -> Result<()> {
        self.refuse_converted("training")?;
        if dtype == Dtype::Int8 {
            return Err(Error::Core(nest_core::Error::value(
                "dtype",
                "int8 is for inference only; train in float32 or bf16",
            )));
        }
        self.set_net_dtype(dtype, false, Dtype::Float32);
        Ok(())
    }

    fn set_net_dtype(&mut self, dtype: Dtype, convert: bool, rest: Dtype) {
        self.net.set_dtype(dtype, convert, rest);
        self.dtype = dtype;
    }
}
