//! The encoder's linear layer in each [`Dtype`]: the one place where a matrix product of the
//! transformer changes arithmetic.
//!
//! - float32: `x W^T + b`, exactly `torch.nn.Linear` (the parity fixtures).
//! - bf16: inputs and weights in bfloat16 (weights converted once for inference by
//!   [`Linear::convert`], or cast per use in mixed-precision training, where the float32
//!   weights stay the master copy and get the gradients through the cast).
//! - int8 (inference only): dynamic quantisation. Weights int8 per output channel, symmetric
//!   (`s_w[o] = max_i |W[o, i]| / 127`, as `torch.ao.quantization.quantize_dynamic`'s
//!   per-channel weights). Activations int8 per row at run time, around the middle of the row's
//!   range: `m[r] = (max + min) / 2`, `s_x[r] = (max - min) / 254` (see
//!   [`QuantizedWeight::matmul`] for why not a symmetric scale). `int8 x int8 -> int32`
//!   products by libtorch's `_int_mm` (oneDNN, VNNI where the CPU has it), then
//!   `y = acc * s_x * s_w + m * rowsum(W_deq) + b` in float32.
//!   On a CPU without int8 dot-product instructions (no AVX512-VNNI / AVX-VNNI / AMX-INT8)
//!   libtorch's `_int_mm` falls back to a kernel ~20x slower than a float32 product (measured on
//!   an AVX2-only EPYC: 213 ms against 9.6 ms for `[480, 384] x [384, 1536]`), so there the
//!   dequantised operands are multiplied in float32 ([`Int8Kernel::Float32`]): the same
//!   quantised model, up to float32 rounding, at about float32's speed.

use tch::nn::{self, Module};
use tch::{Kind, Tensor};

use crate::dtype::Dtype;
use crate::row_blocks::in_row_blocks;

/// How the int8 operands are multiplied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Int8Kernel {
    /// libtorch's `_int_mm`: int8 x int8 -> int32 (GPUs, and CPUs with VNNI / AMX-INT8).
    IntMm,
    /// The dequantised operands (`q s`) multiplied in float32, the bias added by the same
    /// `addmm` (CPUs without int8 dot-product instructions).
    Float32,
}

impl Int8Kernel {
    /// `_int_mm` on a GPU or where the CPU has int8 dot-product instructions.
    fn for_device(device: tch::Device) -> Int8Kernel {
        static CPU_HAS_INT8: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        let fast = device != tch::Device::Cpu
            || *CPU_HAS_INT8
                .get_or_init(|| crate::dtype::probe(tch::Device::Cpu).int8_instructions);
        if fast {
            Int8Kernel::IntMm
        } else {
            Int8Kernel::Float32
        }
    }
}

/// A linear layer quantised per output channel, holding what its kernel's product needs.
#[derive(Debug)]
pub(crate) struct QuantizedWeight {
    product: Product,
    /// Output features.
    out: i64,
}

/// The operands of each [`Int8Kernel`], made once at conversion.
#[derive(Debug)]
enum Product {
    IntMm {
        /// int8 `W_q`, `[in, out]`, contiguous.
        wt: Tensor,
        /// `[out]` float32 scales `s_w`.
        scale: Tensor,
        /// `[2, out]`: the dequantised weight's row sums `s_w[o] sum_i W_q[o, i]` (the product
        /// of each activation row's offset with the weight) over the bias (zeros without one).
        /// (The float weight's sums would make the offset's product exact but leave the
        /// weight's rounding error multiplied by `x - m` instead of `x`; on one-sided rows that
        /// is larger, and measured worse.)
        offset_bias: Tensor,
    },
    Float32 {
        /// The dequantised weight `W_q[o, i] s_w[o]`, `[out, in]`: the layer's own storage,
        /// read transposed as `torch.nn.Linear` reads its weight.
        w: Tensor,
        bias: Option<Tensor>,
    },
}

impl QuantizedWeight {
    /// Quantises `w` and **overwrites it with its dequantised values** `W_q s_w` (the caller's
    /// float32 weight is done with: [`Linear::convert`] frees it, or, under
    /// [`Int8Kernel::Float32`], this keeps its storage as the product's operand). No copy of
    /// the weight's size is made: freed blocks that size would stay in glibc's heap, and in the
    /// RSS (docs/PRECISION.md, "Memory").
    ///
    /// # Shapes
    /// - `w`: `[out, in]` float32; `bias`: `[out]` float32
    pub(crate) fn new(w: &Tensor, bias: Option<&Tensor>) -> Self {
        Self::with_kernel(w, bias, Int8Kernel::for_device(w.device()))
    }

    /// [`Self::new`] with the product's kernel chosen by the caller (tests compare the two).
    pub(crate) fn with_kernel(w: &Tensor, bias: Option<&Tensor>, kernel: Int8Kernel) -> Self {
        let _g = tch::no_grad_guard();
        let mut t = w.detach(); // the same storage
        let out = t.size()[0];
        let scale = t.abs().amax([1i64].as_slice(), true).clamp_min(1e-12) / 127.0; // [out, 1]
        let _ = t.g_div_(&scale).round_().clamp_(-127.0, 127.0);
        let product = match kernel {
            Int8Kernel::IntMm => {
                let wt = t.to_kind(Kind::Int8).transpose(0, 1).contiguous();
                let _ = t.g_mul_(&scale);
                let row_sum = t.sum_dim_intlist([1i64].as_slice(), false, Kind::Float);
                let b = bias.map_or_else(|| row_sum.zeros_like(), Tensor::shallow_clone);
                Product::IntMm {
                    wt,
                    scale: scale.squeeze_dim(1),
                    offset_bias: Tensor::stack(&[&row_sum, &b], 0),
                }
            }
            Int8Kernel::Float32 => {
                let _ = t.g_mul_(&scale);
                Product::Float32 {
                    w: t,
                    bias: bias.map(Tensor::shallow_clone),
                }
            }
        };
        QuantizedWeight { product, out }
    }

    /// `x W^T + b` with per-row dynamic activation scales and offsets.
    ///
    /// Each row is quantised around the middle of its range, `m = (max + min) / 2`, with the
    /// step `s = (max - min) / 254`: `x ~ m + s q`, `q = round((x - m) / s)` in `[-127, 127]`.
    /// The step is never coarser than the symmetric `max |x| / 127` and is up to twice as fine
    /// on one-sided rows (the FFN's GELU outputs lie in `[-0.17, inf)`), as ONNX Runtime's
    /// asymmetric uint8 activations are. Then `x W^T ~ s s_w (q W_q^T) + m rowsum(W_deq)`,
    /// exactly the product of the dequantised operands. On STS-B dev and SICK-R dev this halved
    /// the mean cosine error of int8 vectors against float32 over the symmetric scale
    /// (docs/PRECISION.md).
    ///
    /// # Shapes
    /// - `x`: `[..., in]` float; returns `[..., out]` float32
    pub(crate) fn matmul(&self, x: &Tensor) -> Tensor {
        match self.product {
            Product::IntMm { .. } => in_row_blocks(x, |rows| self.matmul_rows(rows)),
            Product::Float32 { .. } => self.matmul_rows(x),
        }
    }

    /// [`Self::matmul`] in one product.
    fn matmul_rows(&self, x: &Tensor) -> Tensor {
        let size = x.size();
        let inner = *size.last().expect("x has a feature axis");
        let x2 = x.to_kind(Kind::Float).reshape([-1, inner]);
        // two reductions: libtorch's fused `aminmax` measured 7x slower than both on [480, 384]
        let lo = x2.amin([1i64].as_slice(), true); // [rows, 1]
        let hi = x2.amax([1i64].as_slice(), true);
        let step = ((&hi - &lo) / 254.0).clamp_min(1e-12);
        let mid = (hi + lo) * 0.5;
        // q = (x - m) / s, in two passes; |x - m| <= 127 s, so no clamp is needed
        let inv = step.reciprocal();
        let mut q = &x2 * &inv;
        let _ = q.g_sub_(&(&mid * &inv)).round_();
        let y = match &self.product {
            Product::IntMm {
                wt,
                scale,
                offset_bias,
            } => {
                let mut y = q
                    .to_kind(Kind::Int8)
                    .internal_int_mm(wt)
                    .to_kind(Kind::Float); // [rows, out]
                let _ = y.g_mul_(&step).g_mul_(scale);
                // + m rowsum + b as one rank-2 update: [m, 1] x [rowsum; b]
                y.addmm_(&Tensor::cat(&[&mid, &mid.ones_like()], 1), offset_bias)
            }
            Product::Float32 { w, bias } => {
                let xd = q.g_mul_(&step).g_add_(&mid);
                match bias {
                    Some(b) => b.addmm(&xd, &w.tr()),
                    None => xd.matmul(&w.tr()),
                }
            }
        };
        let mut out = size;
        *out.last_mut().expect("non-empty") = self.out;
        y.view(out.as_slice())
    }
}

/// A linear layer whose arithmetic follows the encoder's [`Dtype`].
#[derive(Debug)]
pub(crate) struct Linear {
    inner: nn::Linear,
    int8: Option<QuantizedWeight>,
}

impl Linear {
    pub(crate) fn new(p: nn::Path, i: usize, o: usize) -> Self {
        Self::with_bias(p, i, o, true)
    }

    /// A linear layer with or without a bias (Qwen3's projections have none).
    pub(crate) fn with_bias(p: nn::Path, i: usize, o: usize, bias: bool) -> Self {
        let cfg = nn::LinearConfig {
            bias,
            ..Default::default()
        };
        Linear {
            inner: nn::linear(p, i as i64, o as i64, cfg),
            int8: None,
        }
    }

    /// `x W^T + b` with the products in `compute` (float32 or bf16; the output is in that kind),
    /// or quantised when [`Self::convert`] made it int8 (float32 output).
    pub(crate) fn forward(&self, x: &Tensor, compute: Kind) -> Tensor {
        if let Some(q) = &self.int8 {
            return q.matmul(x).to_kind(x.kind());
        }
        // weights converted to bf16 for inference compute in bf16 whatever the layer's kind
        if self.inner.ws.kind() == Kind::BFloat16 {
            let x = x.to_kind(Kind::BFloat16);
            let (w, b) = (&self.inner.ws, self.inner.bs.as_ref());
            return in_row_blocks(&x, |rows| rows.linear(w, b));
        }
        if compute == Kind::Float && x.kind() == Kind::Float {
            return self.inner.forward(x);
        }
        let w = self.inner.ws.to_kind(compute);
        let b = self.inner.bs.as_ref().map(|b| b.to_kind(compute));
        in_row_blocks(&x.to_kind(compute), |rows| rows.linear(&w, b.as_ref()))
    }

    /// `x [W_1; W_2; ...]^T + [b_1; b_2; ...]` in `compute`, on the parts' own (float32, trainable)
    /// weights: one product where there would be several.
    pub(crate) fn concat_forward(parts: &[&Linear], x: &Tensor, compute: Kind) -> Tensor {
        let ws: Vec<&Tensor> = parts.iter().map(|l| &l.inner.ws).collect();
        let bs: Option<Vec<&Tensor>> = parts.iter().map(|l| l.inner.bs.as_ref()).collect();
        let w = Tensor::cat(&ws, 0).to_kind(compute);
        let b = bs.map(|b| Tensor::cat(&b, 0).to_kind(compute));
        match compute {
            Kind::Float => x.to_kind(compute).linear(&w, b.as_ref()),
            _ => in_row_blocks(&x.to_kind(compute), |rows| rows.linear(&w, b.as_ref())),
        }
    }

    /// One linear whose output is the concatenation of `parts`' outputs (one product instead of
    /// several, and for int8 one quantisation of the input), converted for inference in
    /// `dtype`. The parts' own weights are freed.
    pub(crate) fn fuse(parts: &mut [&mut Linear], dtype: Dtype) -> Linear {
        let _g = tch::no_grad_guard();
        let ws: Vec<&Tensor> = parts.iter().map(|l| &l.inner.ws).collect();
        let bs: Option<Vec<&Tensor>> = parts.iter().map(|l| l.inner.bs.as_ref()).collect();
        let mut fused = Linear {
            inner: nn::Linear {
                ws: Tensor::cat(&ws, 0),
                bs: bs.map(|b| Tensor::cat(&b, 0)),
            },
            int8: None,
        };
        fused.convert(dtype);
        for p in parts.iter_mut() {
            let empty = Tensor::empty([0i64], (Kind::Float, p.inner.ws.device()));
            p.inner.ws.set_data(&empty);
            if let Some(b) = &mut p.inner.bs {
                b.set_data(&empty);
            }
        }
        fused
    }

    /// Converts the weights for inference in `dtype`: bf16 replaces them by bfloat16 copies,
    /// int8 quantises them and frees the float32 weight (the bias stays float32).
    pub(crate) fn convert(&mut self, dtype: Dtype) {
        let _g = tch::no_grad_guard();
        match dtype {
            Dtype::Float32 => {}
            Dtype::Bf16 => {
                self.inner
                    .ws
                    .set_data(&self.inner.ws.to_kind(Kind::BFloat16));
                if let Some(b) = &mut self.inner.bs {
                    b.set_data(&b.to_kind(Kind::BFloat16));
                }
            }
            Dtype::Int8 => {
                self.int8 = Some(QuantizedWeight::new(&self.inner.ws, self.inner.bs.as_ref()));
                // the variable lets go of the storage (kept by the float32 kernel, else freed)
                let empty = Tensor::empty([0i64], (Kind::Float, self.inner.ws.device()));
                self.inner.ws.set_data(&empty);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The int8 product against a float64 reference of the same quantisation, and against the
    /// float32 product within the quantisation error bound.
    #[test]
    fn int8_product_matches_reference() {
        tch::manual_seed(3);
        let w = Tensor::randn([96, 64], (Kind::Float, tch::Device::Cpu));
        let x = Tensor::randn([2, 17, 64], (Kind::Float, tch::Device::Cpu));
        let b = Tensor::randn([96], (Kind::Float, tch::Device::Cpu));
        // the weight is overwritten by its dequantised values, within half a step of its own
        let wd = w.copy();
        let q = QuantizedWeight::with_kernel(&wd, Some(&b), Int8Kernel::IntMm);
        let step = w.abs().amax([1i64].as_slice(), true) / 127.0;
        let off = ((&wd - &w).abs() - &step * 0.5).max().double_value(&[]);
        assert!(off <= 1e-6 && !wd.equal(&w), "dequantised in place: {off}");
        let y = q.matmul(&x);
        assert_eq!(y.size(), vec![2, 17, 96]);
        // the float32 kernel of CPUs without VNNI multiplies the same operands dequantised
        // (|y| ~ 10 here, so float32 rounding stays under 1e-4)
        let yf = QuantizedWeight::with_kernel(&w.copy(), Some(&b), Int8Kernel::Float32).matmul(&x);
        let gap = (&yf - &y).abs().max().double_value(&[]);
        assert!(gap < 1e-4, "float32 kernel vs _int_mm: max |diff| {gap}");
        // reference in float64: dequantised operands, the same rounding rule (each row
        // around the middle of its range, 254 steps across it)
        let x2 = x.reshape([-1, 64]).to_kind(Kind::Double);
        let (lo, hi) = x2.aminmax(1, true);
        let (mid, sx) = ((&hi + &lo) / 2.0, (&hi - &lo) / 254.0);
        let xq = ((&x2 - &mid) / &sx).round().clamp(-127.0, 127.0) * &sx + &mid;
        // the step is the range / 254, at most the symmetric max |x| / 127
        let sym = x2.abs().amax([1i64].as_slice(), true) / 127.0;
        assert!(bool::try_from((&sx - &sym).le(1e-12).all()).unwrap());
        let w64 = w.to_kind(Kind::Double);
        let sw = w64.abs().amax([1i64].as_slice(), true) / 127.0;
        let wq = (&w64 / &sw).round().clamp(-127.0, 127.0) * &sw;
        let reference =
            (xq.matmul(&wq.transpose(0, 1)) + b.to_kind(Kind::Double)).view([2, 17, 96]);
        let err = (y.to_kind(Kind::Double) - &reference)
            .abs()
            .max()
            .double_value(&[]);
        assert!(
            err < 1e-4,
            "int8 product vs float64 reference: max |diff| {err}"
        );
        // and close to the float32 product (quantisation error, not a bug)
        let exact = (x.matmul(&w.transpose(0, 1)) + &b).to_kind(Kind::Double);
        let rel = ((&reference - &exact).norm().double_value(&[])) / exact.norm().double_value(&[]);
        assert!(rel < 0.02, "int8 vs float32 relative error {rel}");
    }

    /// On one-sided rows (GELU outputs, the FFN's second product's input) the offset halves the
    /// step: the product's error must be well under the symmetric scheme's.
    #[test]
    fn int8_offsets_help_one_sided_rows() {
        tch::manual_seed(5);
        let w = Tensor::randn([128, 256], (Kind::Float, tch::Device::Cpu));
        let x = Tensor::randn([64, 256], (Kind::Float, tch::Device::Cpu)).gelu("none");
        let exact = x.matmul(&w.transpose(0, 1)).to_kind(Kind::Double);
        let rel = |y: &Tensor| {
            (y.to_kind(Kind::Double) - &exact).norm().double_value(&[])
                / exact.norm().double_value(&[])
        };
        let ours =
            rel(&QuantizedWeight::with_kernel(&w.copy(), None, Int8Kernel::Float32).matmul(&x));
        // the symmetric scheme in float64 (per-row max |x| / 127), same weights
        let x64 = x.to_kind(Kind::Double);
        let sx = x64.abs().amax([1i64].as_slice(), true) / 127.0;
        let xq = (&x64 / &sx).round() * &sx;
        let w64 = w.to_kind(Kind::Double);
        let sw = w64.abs().amax([1i64].as_slice(), true) / 127.0;
        let wq = (&w64 / &sw).round() * &sw;
        let symmetric = rel(&xq.matmul(&wq.transpose(0, 1)));
        assert!(
            ours < 0.85 * symmetric,
            "relative error with offsets {ours} vs symmetric {symmetric}"
        );
    }
}
