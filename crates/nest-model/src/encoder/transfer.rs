//! Moving an encode's tensors between host and device without making either wait: inputs go up
//! through pinned memory ([`upload`]), a batch's ids and mask in one buffer ([`pack_input`]),
//! pooled vectors come down in few large copies ([`Collected`]).

use tch::{Device, Kind, Tensor};

use crate::pooling::Pooling;
use crate::EncoderInput;

/// Pooled vectors on a GPU stay there until this many bytes pile up (or the encode ends).
const FLUSH_BYTES: usize = 64 << 20;

/// The padded ids and mask of `seqs` (at least `min_len` tokens, `pad` for the padding) in one
/// host tensor, ids first, so that a batch goes to a GPU in one copy ([`unpack_input`] gives
/// the two back).
///
/// # Shapes
/// - returns `[2, seqs.len(), len]` int64 on the CPU, `len` the longest of `seqs` and `min_len`
pub(crate) fn pack_input(seqs: &[&[i64]], min_len: usize, pad: i64) -> Tensor {
    let len = padded_len(seqs, min_len);
    let mut both = vec![0i64; 2 * seqs.len() * len];
    ids_and_mask(seqs, len, pad, &mut both);
    Tensor::from_slice(&both).view([2, seqs.len() as i64, len as i64])
}

/// The length `seqs` are padded to: the longest of them and `min_len`, at least 1.
fn padded_len(seqs: &[&[i64]], min_len: usize) -> usize {
    let longest = seqs.iter().map(|s| s.len()).max().unwrap_or(0);
    longest.max(min_len).max(1)
}

/// Writes the ids (`pad` after each sequence) then the mask (1 on tokens, 0 on padding), row
/// by row, into `out` (`2 * seqs.len() * len` zeros).
fn ids_and_mask(seqs: &[&[i64]], len: usize, pad: i64, out: &mut [i64]) {
    let (ids, mask) = out.split_at_mut(seqs.len() * len);
    for ((s, ids), mask) in seqs
        .iter()
        .zip(ids.chunks_exact_mut(len))
        .zip(mask.chunks_exact_mut(len))
    {
        ids[..s.len()].copy_from_slice(s);
        ids[s.len()..].fill(pad);
        mask[..s.len()].fill(1);
    }
}

/// The ids and the mask (views) of a [`pack_input`] tensor, wherever it lies.
///
/// # Shapes
/// - `both`: `[2, rows, len]`; returns `ids` and `mask`, each `[rows, len]`
pub(crate) fn unpack_input(both: &Tensor) -> EncoderInput {
    EncoderInput {
        ids: both.get(0),
        mask: both.get(1),
    }
}

/// What the host makes for an encode batch besides its ids and mask: tensors a pass would
/// otherwise make from the mask with a few operators each (on a GPU, a kernel each).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Extras {
    /// The means' per-token weights ([`Pooling::host_weights`]), a prompt's first `skip`
    /// tokens left out.
    pub(super) weights: Option<Pooling>,
    pub(super) skip: usize,
    /// The additive padding mask ([`crate::host_made`]), for the backbones that add one.
    pub(super) additive: bool,
    /// RoBERTa's position ids (the pad id is the batch's), for the backbones that count them.
    pub(super) positions: bool,
}

/// Where [`pack_batch`]'s parts lie in its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Layout {
    pub(super) rows: usize,
    pub(super) len: usize,
    pub(super) weights: bool,
    pub(super) additive: bool,
    pub(super) positions: bool,
}

/// A batch as the device reads it, views of one [`pack_batch`] buffer.
///
/// # Shapes
/// - `input`: ids and mask `[rows, len]` int64; `positions`: `[rows, len]` int64;
///   `weights`: `[rows, 1, len]` float32; `additive`: `[rows, 1, 1, len]` float32
pub(super) struct Unpacked {
    pub(super) input: EncoderInput,
    pub(super) positions: Option<Tensor>,
    pub(super) weights: Option<Tensor>,
    pub(super) additive: Option<Tensor>,
}

/// `seqs` padded (at least `min_len` tokens, `pad` for the padding) with `extras`, in one host
/// buffer that goes to a GPU in one copy: the ids and mask (int64), the position ids (int64),
/// then the means' weights and the additive mask (float32), each `[rows, len]`, where made
/// ([`Extras`]).
///
/// # Shapes
/// - returns `[bytes]` uint8 on the CPU and its [`Layout`]
pub(super) fn pack_batch(
    seqs: &[&[i64]],
    min_len: usize,
    pad: i64,
    extras: Extras,
) -> (Tensor, Layout) {
    let len = padded_len(seqs, min_len);
    let lengths: Vec<usize> = seqs.iter().map(|s| s.len()).collect();
    let n = seqs.len() * len;
    let weights = extras.weights.is_some_and(|p| p.is_mean());
    let floats = n * (usize::from(weights) + usize::from(extras.additive));
    // int64 words: the float32 parts after the ids and mask stay aligned, and the bytes are
    // written once in place
    let ints = n * (2 + usize::from(extras.positions));
    let mut words = vec![0i64; ints + floats.div_ceil(2)];
    let (ints_part, rest) = words.split_at_mut(ints);
    let (both, positions) = ints_part.split_at_mut(2 * n);
    ids_and_mask(seqs, len, pad, both);
    if extras.positions {
        crate::host_made::host_positions(seqs, len, pad, positions);
    }
    let rest: &mut [f32] = bytemuck::cast_slice_mut(rest);
    let (w, additive) = rest.split_at_mut(if weights { n } else { 0 });
    if let Some(p) = extras.weights {
        p.host_weights(&lengths, len, extras.skip, w);
    }
    if extras.additive {
        crate::host_made::host_additive(&lengths, len, &mut additive[..n]);
    }
    let bytes: &[u8] = bytemuck::cast_slice(&words);
    let layout = Layout {
        rows: seqs.len(),
        len,
        weights,
        additive: extras.additive,
        positions: extras.positions,
    };
    (Tensor::from_slice(&bytes[..8 * ints + 4 * floats]), layout)
}

/// The parts of a [`pack_batch`] buffer (wherever it lies), as views.
pub(super) fn unpack_batch(bytes: &Tensor, layout: &Layout) -> Unpacked {
    let (rows, len) = (layout.rows as i64, layout.len as i64);
    let n = rows * len;
    let mut at = 0;
    let mut part = |elt: i64, kind: Kind, shape: &[i64]| {
        let t = bytes.narrow(0, at, n * elt).view_dtype(kind).view(shape);
        at += n * elt;
        t
    };
    let both = part(16, Kind::Int64, &[2, rows, len]);
    let positions = layout.positions.then(|| part(8, Kind::Int64, &[rows, len]));
    let weights = layout
        .weights
        .then(|| part(4, Kind::Float, &[rows, 1, len]));
    let additive = layout
        .additive
        .then(|| part(4, Kind::Float, &[rows, 1, 1, len]));
    Unpacked {
        input: unpack_input(&both),
        positions,
        weights,
        additive,
    }
}

/// `host` (a CPU tensor) on `dev`. On a GPU through pinned memory and without waiting: a plain
/// copy from the host waits for all the work queued on the device (libtorch synchronises a
/// blocking copy's stream), which would idle the GPU while the host prepares each batch. The
/// pinned block is not reused before the copy is done (libtorch's pinned allocator records it).
/// On the CPU, `host` itself.
pub(super) fn upload(host: &Tensor, dev: Device) -> Tensor {
    if !dev.is_cuda() {
        return host.to_device(dev);
    }
    let pinned = pinned::pin(host).unwrap_or_else(|_| host.shallow_clone());
    pinned.to_device_(dev, pinned.kind(), true, false)
}

/// Copies `host` (a CPU tensor) into `dst` (same shape, on any device), keeping `dst`'s
/// storage: a recorded graph's static input. On a GPU one copy straight from pinned memory,
/// without waiting (what [`upload`] then a device copy did in two launches and an allocation);
/// a plain copy elsewhere.
pub(super) fn upload_into(dst: &Tensor, host: &Tensor) {
    let mut dst = dst.shallow_clone();
    if !dst.device().is_cuda() {
        dst.copy_(host);
        return;
    }
    match pinned::pin(host).and_then(|p| pinned::copy_into(&mut dst, &p)) {
        Ok(()) => {}
        // a failed pin or copy: the plain path, which waits but copies
        Err(_) => dst.copy_(&host.to_device(dst.device())),
    }
}

/// `Tensor::pin_memory()` through nest-sys's `shim/pinned.cpp` (tch's wrapper passes a device,
/// which libtorch deprecates with a warning at every call).
#[allow(unsafe_code)]
mod pinned {
    use std::ffi::c_char;

    use tch::Tensor;

    pub(super) fn pin(t: &Tensor) -> Result<Tensor, String> {
        let mut err: *mut c_char = std::ptr::null_mut();
        // SAFETY: `t.as_ptr()` is a live `at::Tensor*` for the call; the shim catches every C++
        // exception and returns either a new `at::Tensor*` or null with `err` set.
        let out = unsafe { nest_sys::nest_pin_memory(t.as_ptr().cast(), &mut err) };
        if out.is_null() {
            // SAFETY: `err` is null or the message the shim wrote.
            return Err(unsafe { nest_sys::take_message(err, "pin_memory failed (no message)") });
        }
        // SAFETY: a fresh heap `at::Tensor*` that nothing else owns: tch frees it on drop.
        Ok(unsafe { Tensor::from_ptr(out.cast()) })
    }

    /// `dst.copy_(src, non_blocking = true)` (tch's `copy_` always blocks).
    pub(super) fn copy_into(dst: &mut Tensor, src: &Tensor) -> Result<(), String> {
        // SAFETY: both are live `at::Tensor*` for the call; the shim writes into `dst`'s storage
        // (shared with every shallow clone of it, as any in-place op does) and catches every C++
        // exception.
        nest_sys::call(|err| unsafe {
            nest_sys::nest_copy_into(dst.as_mut_ptr().cast(), src.as_ptr().cast(), 1, err)
        })
    }
}

/// The pooled vectors of an encode's batches per requested layer, in batch order. On a GPU they
/// stay on the device until [`FLUSH_BYTES`] pile up or the encode ends: a copy to the host waits
/// for everything queued before it (stream order), so a copy per batch would make the host wait
/// for each batch before queueing the next, the idle time this saves.
pub(super) struct Collected {
    /// Per layer: parts already on the host, then parts still where they were computed.
    host: Vec<Vec<Tensor>>,
    pending: Vec<Vec<Tensor>>,
    pending_bytes: usize,
}

impl Collected {
    pub(super) fn new(layers: usize) -> Collected {
        Collected {
            host: (0..layers).map(|_| Vec::new()).collect(),
            pending: (0..layers).map(|_| Vec::new()).collect(),
            pending_bytes: 0,
        }
    }

    /// Adds one batch's vectors (one tensor per layer, float32).
    pub(super) fn push(&mut self, batch: Vec<Tensor>) {
        let on_gpu = batch.first().is_some_and(|t| t.device().is_cuda());
        for (k, t) in batch.into_iter().enumerate() {
            self.pending_bytes += t.numel() * 4;
            self.pending[k].push(t);
        }
        if on_gpu && self.pending_bytes >= FLUSH_BYTES {
            self.flush();
        }
    }

    /// Brings the pending parts to the host: one copy per layer (on the CPU, one `cat`).
    fn flush(&mut self) {
        for (host, pending) in self.host.iter_mut().zip(&mut self.pending) {
            if !pending.is_empty() {
                host.push(Tensor::cat(pending, 0).to_device(Device::Cpu));
                pending.clear();
            }
        }
        self.pending_bytes = 0;
    }

    /// Every layer's vectors back in input order (`order[pos]` = the input index of the
    /// `pos`-th vector): on the device where they all still are (one `cat` and one gather
    /// there, so that the host's share of an encode's end is one copy down), else on the host.
    ///
    /// # Shapes
    /// - returns one tensor `[order.len(), output_dim]` per layer
    pub(super) fn finish(mut self, order: &[usize]) -> Vec<Tensor> {
        if self.host.iter().any(|h| !h.is_empty()) {
            self.flush();
        }
        let mut inv = vec![0i64; order.len()];
        for (pos, &i) in order.iter().enumerate() {
            inv[i] = pos as i64;
        }
        let parts: Vec<Vec<Tensor>> = self
            .host
            .into_iter()
            .zip(self.pending)
            .map(|(h, p)| match h.is_empty() {
                true => p,
                false => h,
            })
            .collect();
        // every layer's parts lie on one device: the order goes there once
        let dev = parts
            .iter()
            .flatten()
            .next()
            .map_or(Device::Cpu, Tensor::device);
        let inverse = upload(&Tensor::from_slice(&inv), dev);
        parts
            .into_iter()
            .map(|mut parts| match parts.len() {
                1 => parts.pop().expect("one part"),
                _ => Tensor::cat(&parts, 0),
            })
            .map(|t| t.index_select(0, &inverse))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use tch::{Device, Kind, Tensor};

    /// The shim's copy writes into the destination's own storage (what a recorded graph reads),
    /// seen through every shallow clone; `upload_into` on the CPU likewise.
    #[test]
    fn copies_land_in_the_static_tensor() {
        let dst = Tensor::zeros([2, 3], (Kind::Int64, Device::Cpu));
        let seen = dst.shallow_clone();
        let src = Tensor::from_slice(&[1i64, 2, 3, 4, 5, 6]).view([2, 3]);
        super::pinned::copy_into(&mut dst.shallow_clone(), &src).unwrap();
        assert_eq!(
            Vec::<i64>::try_from(seen.view([-1])).unwrap(),
            [1, 2, 3, 4, 5, 6]
        );
        let wrong = Tensor::from_slice(&[1i64, 2]);
        let e = super::pinned::copy_into(&mut dst.shallow_clone(), &wrong).unwrap_err();
        assert!(
            !e.is_empty(),
            "a shape mismatch is libtorch's error, not a crash"
        );
        super::upload_into(&dst, &(src * 10));
        assert_eq!(
            Vec::<i64>::try_from(seen.view([-1])).unwrap(),
            [10, 20, 30, 40, 50, 60]
        );
    }
}
