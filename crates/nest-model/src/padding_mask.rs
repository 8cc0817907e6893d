//! The additive padding mask of the encoder-only backbones (BERT, MPNet, XLM-R): 0 where a key
//! is a token, the float minimum at padding, added to the attention scores.
//!
//! A pass makes it from the batch's mask ([`additive_mask`]: two or three operators, each a
//! kernel on a GPU). An encode batch's host knows the mask already, so it writes the finished
//! mask into the buffer that carries the ids up ([`host_additive`]) and the pass takes it from
//! there ([`with_host_made`]): the same values, bit for bit, without the kernels.

use std::cell::RefCell;
use tch::{Kind, Tensor};

/// The additive attention mask: -0.0 where attended, the float minimum at padding (rounded to
/// `kind`), or the one the host made for this `mask` ([`with_host_made`]).
///
/// # Shapes
/// - `mask`: `[batch, seq]` (1 = token); returns `[batch, 1, 1, seq]` of `kind`
pub(crate) fn additive_mask(mask: &Tensor, kind: Kind) -> Tensor {
    if let Some(made) = host_made_for(mask, kind) {
        return made;
    }
    // `(1 - m) * MIN` in two operators (three in another kind than float32), not four (on a
    // GPU each is a kernel): -0.0 where attended, as `0 * MIN` gave, MIN rounded to `kind`
    let m = Tensor::where_scalar(&mask.ne(0), -0.0, f64::from(f32::MIN));
    let m = match kind {
        Kind::Float => m,
        k => m.to_kind(k),
    };
    m.unsqueeze(1).unsqueeze(1)
}

/// Writes the additive mask of rows with `lengths` real tokens (left-aligned) padded to `len`
/// into `out` (`lengths.len() * len` values), in float32 (the kind the backbones' embeddings,
/// and so their masks, have): [`additive_mask`]'s values, row by row.
pub(crate) fn host_additive(lengths: &[usize], len: usize, out: &mut [f32]) {
    for (&n, row) in lengths.iter().zip(out.chunks_exact_mut(len.max(1))) {
        let n = n.min(len);
        row[..n].fill(-0.0);
        row[n..].fill(f32::MIN);
    }
}

/// A mask made on the host and the padding mask it was made from.
struct Made {
    /// The `[batch, seq]` mask it stands for (compared by storage and shape).
    mask: Tensor,
    /// `[batch, 1, 1, seq]`
    additive: Tensor,
}

thread_local! {
    static MADE: RefCell<Option<Made>> = const { RefCell::new(None) };
}

/// Runs `f` with `additive` (`[batch, 1, 1, seq]`) standing for [`additive_mask`] of `mask`
/// (`[batch, seq]`, the very tensor the pass reads: its storage, offset and shape) on this
/// thread. Any other mask, or another kind, is made as before.
pub(crate) fn with_host_made<R>(mask: &Tensor, additive: &Tensor, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<Made>);
    impl Drop for Restore {
        fn drop(&mut self) {
            MADE.with(|m| *m.borrow_mut() = self.0.take());
        }
    }
    let made = Made {
        mask: mask.shallow_clone(),
        additive: additive.shallow_clone(),
    };
    let _restore = Restore(MADE.with(|m| m.borrow_mut().replace(made)));
    f()
}

fn host_made_for(mask: &Tensor, kind: Kind) -> Option<Tensor> {
    MADE.with(|m| {
        let m = m.borrow();
        let made = m.as_ref()?;
        let same = made.mask.data_ptr() == mask.data_ptr()
            && made.mask.size() == mask.size()
            && made.mask.stride() == mask.stride()
            && made.additive.kind() == kind;
        same.then(|| made.additive.shallow_clone())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The host's values are the device's bit for bit, and the pass takes them only for the
    /// mask they were made for, in float32.
    #[test]
    fn the_host_writes_the_masks_values() {
        let lengths = [3usize, 1, 4];
        let mask = Tensor::from_slice(&[1i64, 1, 1, 0, 1, 0, 0, 0, 1, 1, 1, 1]).view([3, 4]);
        let mut values = vec![0f32; 12];
        host_additive(&lengths, 4, &mut values);
        let host = Tensor::from_slice(&values).view([3, 1, 1, 4]);
        let bits = |t: &Tensor| {
            Vec::<i32>::try_from(t.view_dtype(Kind::Int).contiguous().view([-1])).unwrap()
        };
        let device = additive_mask(&mask, Kind::Float);
        assert_eq!(bits(&host), bits(&device));
        let marker = host.ones_like();
        let made = with_host_made(&mask, &marker, || additive_mask(&mask, Kind::Float));
        assert!(made.equal(&marker));
        // another mask, or another kind, is made as before
        let other = mask.copy();
        let own = with_host_made(&mask, &marker, || additive_mask(&other, Kind::Float));
        assert_eq!(bits(&own), bits(&device));
        let bf16 = with_host_made(&mask, &marker, || additive_mask(&mask, Kind::BFloat16));
        assert!(bf16.equal(&additive_mask(&mask, Kind::BFloat16)));
        assert!(
            MADE.with(|m| m.borrow().is_none()),
            "the context ends with its scope"
        );
    }
}
