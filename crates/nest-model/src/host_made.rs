//! What an encode batch's host makes for the pass from what it knows, so that the pass does
//! not make it from the batch on the device (a few operators each, each a kernel on a GPU):
//! the additive padding mask of the encoder-only backbones (BERT, MPNet, XLM-R; 0 where a key
//! is a token, the float minimum at padding, added to the attention scores) and RoBERTa-style
//! position ids (MPNet, XLM-R).
//!
//! The host writes them into the buffer that carries the ids up ([`host_additive`],
//! [`host_positions`]; `encoder/transfer.rs`), and the pass takes them through a scoped context
//! ([`with_host_made`]) where it would make them ([`additive_mask`],
//! [`crate::xlm_roberta::position_ids`]), for the very ids and mask tensors they were made for:
//! the same values, bit for bit.

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

/// Writes RoBERTa's position ids of the padded ids `seqs` (each padded with `pad` to `len`)
/// into `out` (`seqs.len() * len` values): what [`crate::xlm_roberta::position_ids`] computes
/// (`pad + 1, pad + 2, ...` over the tokens that are not `pad`, `pad` on the others).
pub(crate) fn host_positions(seqs: &[&[i64]], len: usize, pad: i64, out: &mut [i64]) {
    for (s, row) in seqs.iter().zip(out.chunks_exact_mut(len.max(1))) {
        let mut count = 0;
        for (p, &id) in row.iter_mut().zip(s.iter()) {
            count += i64::from(id != pad);
            *p = if id != pad { pad + count } else { pad };
        }
        row[s.len().min(len)..].fill(pad);
    }
}

/// Tensors made on the host for one batch, and the batch's tensors they were made from.
pub(crate) struct Made {
    /// `[batch, seq]` int64: the ids and the mask the pass reads (compared by storage, offset
    /// and shape).
    pub(crate) ids: Tensor,
    pub(crate) mask: Tensor,
    /// `[batch, 1, 1, seq]` float32, [`additive_mask`] of `mask`.
    pub(crate) additive: Option<Tensor>,
    /// `[batch, seq]` int64 and the pad id: RoBERTa's position ids of `ids`.
    pub(crate) positions: Option<(Tensor, i64)>,
}

thread_local! {
    static MADE: RefCell<Option<Made>> = const { RefCell::new(None) };
}

/// Runs `f` with `made` standing, on this thread, for what the pass would make from its ids and
/// mask. Any other tensor, kind or pad id is made as before.
pub(crate) fn with_host_made<R>(made: Made, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<Made>);
    impl Drop for Restore {
        fn drop(&mut self) {
            MADE.with(|m| *m.borrow_mut() = self.0.take());
        }
    }
    let _restore = Restore(MADE.with(|m| m.borrow_mut().replace(made)));
    f()
}

/// Whether `a` and `b` are the same tensor: one storage, offset and shape.
fn same(a: &Tensor, b: &Tensor) -> bool {
    a.data_ptr() == b.data_ptr() && a.size() == b.size() && a.stride() == b.stride()
}

fn host_made_for(mask: &Tensor, kind: Kind) -> Option<Tensor> {
    MADE.with(|m| {
        let m = m.borrow();
        let made = m.as_ref()?;
        let additive = made.additive.as_ref()?;
        (kind == Kind::Float && same(&made.mask, mask)).then(|| additive.shallow_clone())
    })
}

/// The position ids the host made for `ids` with `pad`, if it made them.
pub(crate) fn host_positions_for(ids: &Tensor, pad: i64) -> Option<Tensor> {
    MADE.with(|m| {
        let m = m.borrow();
        let made = m.as_ref()?;
        let (positions, made_pad) = made.positions.as_ref()?;
        (*made_pad == pad && same(&made.ids, ids)).then(|| positions.shallow_clone())
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
        let made = || Made {
            ids: mask.shallow_clone(),
            mask: mask.shallow_clone(),
            additive: Some(marker.shallow_clone()),
            positions: None,
        };
        let taken = with_host_made(made(), || additive_mask(&mask, Kind::Float));
        assert!(taken.equal(&marker));
        // another mask, or another kind, is made as before
        let other = mask.copy();
        let own = with_host_made(made(), || additive_mask(&other, Kind::Float));
        assert_eq!(bits(&own), bits(&device));
        let bf16 = with_host_made(made(), || additive_mask(&mask, Kind::BFloat16));
        assert!(bf16.equal(&additive_mask(&mask, Kind::BFloat16)));
        assert!(
            MADE.with(|m| m.borrow().is_none()),
            "the context ends with its scope"
        );
    }

    /// RoBERTa's position ids from the host are the device's, pad tokens inside a text
    /// included, and are taken for their own ids and pad id only.
    #[test]
    fn the_host_writes_robertas_positions() {
        let rows: [&[i64]; 3] = [&[0, 7, 1, 8, 2], &[0, 9, 2], &[5]];
        let ids =
            Tensor::from_slice(&[0i64, 7, 1, 8, 2, 0, 9, 2, 1, 1, 5, 1, 1, 1, 1]).view([3, 5]);
        let mut out = vec![0i64; 15];
        host_positions(&rows, 5, 1, &mut out);
        let device = crate::xlm_roberta::position_ids(&ids, 1);
        assert_eq!(out, Vec::<i64>::try_from(device.view([-1])).unwrap());
        let marker = ids.zeros_like();
        let made = || Made {
            ids: ids.shallow_clone(),
            mask: ids.shallow_clone(),
            additive: None,
            positions: Some((marker.shallow_clone(), 1)),
        };
        let taken = with_host_made(made(), || crate::xlm_roberta::position_ids(&ids, 1));
        assert!(taken.equal(&marker));
        let other_pad = with_host_made(made(), || crate::xlm_roberta::position_ids(&ids, 0));
        assert!(other_pad.equal(&crate::xlm_roberta::position_ids(&ids, 0)));
    }
}
