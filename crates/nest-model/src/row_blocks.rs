//! The row blocks every bf16 and int8 product runs in ([`in_row_blocks`]), so that oneDNN
//! sees a few product shapes instead of a new one per batch.

use tch::Tensor;

/// Rows per product in [`in_row_blocks`], and the multiple a shorter product is padded to.
const ROW_BLOCK: i64 = 512;
const ROW_ALIGN: i64 = 32;

/// `product` (row-wise: row `i` of its output depends on row `i` of its input only) over `x`'s
/// rows in products of at most [`ROW_BLOCK`] rows, the last one padded with zero rows to a
/// multiple of [`ROW_ALIGN`], so that a product's row count is one of 17 values whatever the
/// batch.
///
/// Why: oneDNN, which runs libtorch's bf16 and int8 products on CPU (inference and
/// mixed-precision training, forward and backward), compiles and caches a
/// kernel (and its buffers) per distinct shape, about 1.1-1.7 MB of memory each, up to 1,024
/// of them. A server's batches (and length-sorted encode batches) have a different token
/// count almost every time, so the cache, and the RSS, grew by a gigabyte: MiniLM's bf16
/// server went from 308 to 1,449 MiB in 30 s of load (BENCHMARKS.md, "Server against Infinity's configurations"). float32
/// products (MKL) keep no such cache and are not blocked.
///
/// On a GPU the product runs once on all the rows (a GPU wants one large product, and cuBLAS
/// keeps no per-shape cache); fewer than [`ROW_ALIGN`] rows are still padded, which keeps
/// `_int_mm` above its CUDA minimum of 17 rows.
///
/// # Shapes
/// - `x`: `[..., in]`; `product` maps `[rows, in]` to `[rows, out]`; returns `[..., out]`
pub(crate) fn in_row_blocks(x: &Tensor, product: impl Fn(&Tensor) -> Tensor) -> Tensor {
    let size = x.size();
    let inner = *size.last().expect("x has a feature axis");
    let x2 = x.reshape([-1, inner]);
    let rows = x2.size()[0];
    let y = match x.device() != tch::Device::Cpu && rows >= ROW_ALIGN {
        true => product(&x2),
        false => blocks(&x2, rows, product),
    };
    let mut out = size;
    *out.last_mut().expect("non-empty") = y.size()[1];
    y.reshape(out.as_slice())
}

/// `product` over the `rows` rows of `x2` (`[rows, in]`) in blocks of at most [`ROW_BLOCK`],
/// the last one padded to a multiple of [`ROW_ALIGN`].
fn blocks(x2: &Tensor, rows: i64, product: impl Fn(&Tensor) -> Tensor) -> Tensor {
    let mut outs = Vec::with_capacity((rows / ROW_BLOCK + 1) as usize);
    let mut start = 0;
    while rows - start >= ROW_BLOCK {
        outs.push(product(&x2.narrow(0, start, ROW_BLOCK)));
        start += ROW_BLOCK;
    }
    let rest = rows - start;
    if rest > 0 {
        let pad = (ROW_ALIGN - rest % ROW_ALIGN) % ROW_ALIGN;
        let part = x2.narrow(0, start, rest);
        outs.push(match pad {
            0 => product(&part),
            p => product(&part.constant_pad_nd([0, 0, 0, p])).narrow(0, 0, rest),
        });
    }
    match outs.len() {
        1 => outs.pop().expect("one part"),
        _ => Tensor::cat(&outs, 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::Kind;

    /// Row blocks give the one-product result, through products of the allowed row counts only
    /// (full blocks, or the rest padded to the alignment), for row counts below, at and past
    /// the block size.
    #[test]
    fn row_blocks_match_one_product() {
        tch::manual_seed(5);
        let opts = (Kind::Float, tch::Device::Cpu);
        let w = Tensor::randn([24, 16], opts);
        let b = Tensor::randn([24], opts);
        for rows in [1, 31, 32, 33, ROW_BLOCK, ROW_BLOCK + 1, 2 * ROW_BLOCK + 70] {
            let x = Tensor::randn([rows, 16], opts);
            let seen = std::cell::RefCell::new(Vec::new());
            let y = in_row_blocks(&x, |r| {
                seen.borrow_mut().push(r.size()[0]);
                r.linear(&w, Some(&b))
            });
            let diff = (&y - x.linear(&w, Some(&b))).abs().max().double_value(&[]);
            assert!(diff < 1e-5, "{rows} rows: max |diff| {diff}");
            assert_eq!(y.size(), vec![rows, 24]);
            let seen = seen.into_inner();
            assert!(
                seen.iter()
                    .all(|&r| r == ROW_BLOCK || (r < ROW_BLOCK && r % ROW_ALIGN == 0)),
                "{rows} rows: products of {seen:?}"
            );
            assert_eq!(
                seen.len() as i64,
                rows / ROW_BLOCK + i64::from(rows % ROW_BLOCK > 0)
            );
        }
        // a leading batch axis is kept
        let x3 = Tensor::randn([3, 7, 16], opts);
        let y3 = in_row_blocks(&x3, |r| r.linear::<Tensor>(&w, None));
        assert_eq!(y3.size(), vec![3, 7, 24]);
        assert!(
            (y3 - x3.linear::<Tensor>(&w, None))
                .abs()
                .max()
                .double_value(&[])
                < 1e-5
        );
    }
}
