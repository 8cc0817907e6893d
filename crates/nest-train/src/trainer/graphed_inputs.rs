//! What a recorded training step keeps and is given: its static tensors ([`Static`]: the
//! inputs a replay reads, the outputs it writes) and a batch's inputs made on the host
//! ([`Host`]), copied into them before each replay. Shared by the whole-step graphs
//! (`graphed.rs`) and GradCache's chunk graphs (`graphed_chunks.rs`).

use nest_model::{ElasticEncoder, EncoderInput};
use tch::{Device, Kind, Tensor};

use super::graphed::BUCKET;
use super::step::MicroResult;
use crate::data::{Batch, Source};

/// One shape's static tensors.
pub(super) struct Static {
    /// Per column: token ids and attention mask `[rows, padded]`, pooling mask (a prompt's
    /// tokens zeroed).
    pub(super) inputs: Vec<(EncoderInput, Tensor)>,
    /// Gold scores `[rows]`, when the source has them.
    pub(super) scores: Option<Tensor>,
    /// The objective's targets `[rows, width]` ([`Objective::targets`]), when it reads some.
    pub(super) targets: Option<Tensor>,
    /// The summed loss and the gradient norm before clipping (float64 scalars).
    pub(super) loss: Tensor,
    pub(super) norm: Tensor,
    /// The objective's terms and then its diagnostics (float64, the first `names.len()` of
    /// [`MAX_TERMS`]), named at the first pass.
    pub(super) terms: Tensor,
    pub(super) names: std::cell::RefCell<Vec<String>>,
}

/// Terms a recorded step reports at most (beyond: summed into the loss, not logged one by one).
pub(super) const MAX_TERMS: usize = 64;

/// A replay's loss and named terms, read back (one synchronisation).
pub(super) fn read(s: &Static) -> MicroResult {
    let names = s.names.borrow();
    let values = Vec::<f64>::try_from(
        s.terms
            .narrow(0, 0, names.len() as i64)
            .to_device(Device::Cpu),
    )
    .unwrap_or_default();
    let terms = names.iter().cloned().zip(values).collect();
    MicroResult {
        loss: s.loss.double_value(&[]),
        terms,
    }
}

/// Each encoded column's padded ids and masks on the host (`cols`: the source column each
/// reads), lengths rounded up to [`BUCKET`].
pub(super) fn host_inputs(
    enc: &ElasticEncoder,
    src: &Source,
    b: &Batch,
    cols: &[usize],
) -> Vec<(EncoderInput, Tensor)> {
    cols.iter()
        .map(|&col| {
            let seqs: Vec<&[i64]> = b
                .examples
                .iter()
                .map(|&i| src.ids[i][col].as_slice())
                .collect();
            let longest = seqs.iter().map(|s| s.len()).max().unwrap_or(1);
            let padded = longest.div_ceil(BUCKET) * BUCKET;
            let input = enc.make_input_on(&seqs, padded, Device::Cpu);
            let pool_mask = super::step::pool_mask(src, col, &input.mask);
            (input, pool_mask)
        })
        .collect()
}

pub(super) fn scores(src: &Source, b: &Batch) -> Option<Tensor> {
    (!src.scores.is_empty()).then(|| {
        let s: Vec<f32> = b.examples.iter().map(|&i| src.scores[i] as f32).collect();
        Tensor::from_slice(&s)
    })
}

/// Zeroed device tensors of the host inputs' shapes (a recording's static inputs).
pub(super) fn inputs_like(
    host: &[(EncoderInput, Tensor)],
    dev: Device,
) -> Vec<(EncoderInput, Tensor)> {
    host.iter()
        .map(|(i, m)| {
            let input = EncoderInput {
                ids: i.ids.zeros_like().to_device(dev),
                mask: i.mask.zeros_like().to_device(dev),
            };
            (input, m.zeros_like().to_device(dev))
        })
        .collect()
}

/// Copies host inputs into a recording's static inputs.
pub(super) fn copy_inputs(dst: &[(EncoderInput, Tensor)], host: &[(EncoderInput, Tensor)]) {
    for ((d, d_mask), (h, h_mask)) in dst.iter().zip(host) {
        d.ids.shallow_clone().copy_(&h.ids);
        d.mask.shallow_clone().copy_(&h.mask);
        d_mask.shallow_clone().copy_(h_mask);
    }
}

/// One batch's inputs on the host: each column's ids, masks and pooling masks, the gold scores
/// and the objective's targets.
pub(super) struct Host {
    pub(super) inputs: Vec<(EncoderInput, Tensor)>,
    pub(super) scores: Option<Tensor>,
    pub(super) targets: Option<Tensor>,
}

/// Device tensors of the host inputs' shapes, and the outputs.
pub(super) fn static_like(host: &Host, dev: Device) -> Static {
    let like = |t: &Option<Tensor>| t.as_ref().map(|t| t.zeros_like().to_device(dev));
    Static {
        inputs: inputs_like(&host.inputs, dev),
        scores: like(&host.scores),
        targets: like(&host.targets),
        loss: Tensor::zeros([], (Kind::Double, dev)),
        norm: Tensor::zeros([], (Kind::Double, dev)),
        terms: Tensor::zeros([MAX_TERMS as i64], (Kind::Double, dev)),
        names: std::cell::RefCell::new(Vec::new()),
    }
}

/// Copies a batch into a graph's static inputs.
pub(super) fn fill(s: &Static, host: &Host) {
    copy_inputs(&s.inputs, &host.inputs);
    for (d, h) in [(&s.scores, &host.scores), (&s.targets, &host.targets)] {
        if let (Some(d), Some(h)) = (d, h) {
            d.shallow_clone().copy_(h);
        }
    }
}
