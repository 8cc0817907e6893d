//! `precision=` of `Encoder.encode` and `nest.quantize_embeddings`: float32 rows to the quantized
//! types of sentence-transformers' `quantize_embeddings` (`int8`, `uint8`, `binary`,
//! `ubinary`), by the functions `nest index` stores its levels with and `nest serve` answers
//! `embedding_types` with (nest-index's `level::quantize_int8` and `level::pack_bits`):
//!
//! - `int8`: Nest's symmetric per-row codes `round(x / s)` (halves away from zero, within
//!   -127..=127), `s = max|x| / 127`, the scale returned beside them (`nest_core::vector::
//!   quantize_int8`). Not sentence-transformers' int8, whose per-dimension ranges come from a
//!   calibration set (by default the batch itself), so a vector would change with its batch.
//! - `uint8`: those codes + 128 (1..=255), as `nest serve`'s `uint8`.
//! - `ubinary`: the sign bits (`x > 0` is 1), 8 per byte, the first coordinate in the most
//!   significant bit, the last byte zero-padded: `numpy.packbits(x > 0, axis=-1)`, exactly
//!   sentence-transformers' `ubinary`.
//! - `binary`: those bytes - 128 as int8, exactly sentence-transformers' `binary`.

use nest_index::level::{pack_bits, quantize_int8};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyByteArray;

/// The precisions other than float32.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Precision {
    Int8,
    Uint8,
    Binary,
    Ubinary,
}

impl Precision {
    fn parse(s: &str) -> PyResult<Self> {
        Ok(match s {
            "int8" => Precision::Int8,
            "uint8" => Precision::Uint8,
            "binary" => Precision::Binary,
            "ubinary" => Precision::Ubinary,
            _ => {
                return Err(PyValueError::new_err(format!(
                    "precision: '{s}' is not one of float32, int8, uint8, binary, ubinary"
                )))
            }
        })
    }

    /// Bytes per row of `dim` coordinates.
    fn row_bytes(self, dim: usize) -> usize {
        match self {
            Precision::Int8 | Precision::Uint8 => dim,
            Precision::Binary | Precision::Ubinary => dim.div_ceil(8),
        }
    }
}

/// One row quantized into `out`; the int8 scale for int8 / uint8.
fn quantize_row(p: Precision, row: &[f32], out: &mut Vec<u8>) -> Option<f32> {
    match p {
        Precision::Int8 | Precision::Uint8 => {
            let (q, s) = quantize_int8(row);
            let shift: i16 = if p == Precision::Uint8 { 128 } else { 0 };
            out.extend(q.iter().map(|&c| (c as i16 + shift) as u8));
            Some(s)
        }
        Precision::Ubinary => {
            out.extend(pack_bits(row));
            None
        }
        Precision::Binary => {
            out.extend(pack_bits(row).iter().map(|&b| b.wrapping_sub(128)));
            None
        }
    }
}

/// Quantizes `rows` x `dim` float32 rows (native-endian bytes, row-major) to `precision`.
/// Returns `(codes, scales)`: the rows' bytes (int8 / uint8: `dim` a row; binary / ubinary:
/// `ceil(dim / 8)`), and the per-row int8 scales (empty for binary / ubinary).
#[pyfunction]
#[pyo3(signature = (data, rows, dim, precision))]
pub(crate) fn quantize_native<'py>(
    py: Python<'py>,
    data: &[u8],
    rows: usize,
    dim: usize,
    precision: &str,
) -> PyResult<(Bound<'py, PyByteArray>, Vec<f32>)> {
    let p = Precision::parse(precision)?;
    let want = rows
        .checked_mul(dim)
        .and_then(|n| n.checked_mul(4))
        .ok_or_else(|| PyValueError::new_err("rows x dim overflows"))?;
    if data.len() != want {
        return Err(PyValueError::new_err(format!(
            "{} bytes for {rows} rows of {dim} float32, expected {want}",
            data.len()
        )));
    }
    let mut out = Vec::with_capacity(rows * p.row_bytes(dim));
    let mut scales = Vec::new();
    let mut row = vec![0f32; dim];
    for r in 0..rows {
        let bytes = &data[r * dim * 4..(r + 1) * dim * 4];
        for (x, b) in row.iter_mut().zip(bytes.chunks_exact(4)) {
            *x = f32::from_ne_bytes([b[0], b[1], b[2], b[3]]);
        }
        if let Some(s) = quantize_row(p, &row, &mut out) {
            scales.push(s);
        }
    }
    Ok((PyByteArray::new(py, &out), scales))
}
