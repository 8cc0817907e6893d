//! Embedding writers. The format follows the output file's extension.

use std::io::Write;
use std::path::Path;

use crate::fsutil::write_atomic_with;
use crate::{Error, Result};

/// How embeddings are written, chosen from the file extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputFormat {
    /// NumPy `.npy`, float32, shape `[n, dim]`, C order.
    Npy,
    /// safetensors with one F32 tensor `embeddings` of shape `[n, dim]`.
    Safetensors,
    /// One JSON object per line: `{"index": i, "embedding": [...]}`.
    Jsonl,
}

impl OutputFormat {
    pub fn from_path(path: &Path) -> Result<Self> {
        if crate::fsutil::is_std_stream(path) {
            return Ok(Self::Jsonl); // standard output: text
        }
        match path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase)
            .as_deref()
        {
            Some("npy") => Ok(Self::Npy),
            Some("safetensors") => Ok(Self::Safetensors),
            Some("jsonl") => Ok(Self::Jsonl),
            _ => Err(Error::value(
                "--output",
                format!(
                    "{}: unknown extension, expected .npy, .safetensors or .jsonl",
                    path.display()
                ),
            )),
        }
    }
}

/// A row-major `[rows, dim]` float32 matrix.
#[derive(Debug, Clone)]
pub struct Matrix {
    pub rows: usize,
    pub dim: usize,
    pub data: Vec<f32>,
}

impl Matrix {
    pub fn row(&self, i: usize) -> &[f32] {
        &self.data[i * self.dim..(i + 1) * self.dim]
    }
}

/// Writes `m` to `path` atomically in the format its extension names.
pub fn write_embeddings(path: &Path, m: &Matrix) -> Result<()> {
    write_embeddings_from(path, m, 0)
}

/// [`write_embeddings`] for a part of a larger output whose first row is row `first` of the
/// whole (JSONL's `index` counts from it; the other formats hold no row numbers).
pub fn write_embeddings_from(path: &Path, m: &Matrix, first: usize) -> Result<()> {
    assert_eq!(m.data.len(), m.rows * m.dim, "matrix data length");
    match OutputFormat::from_path(path)? {
        OutputFormat::Npy => {
            let arr = ndarray::ArrayView2::from_shape((m.rows, m.dim), &m.data)
                .map_err(|e| Error::value("--output", e.to_string()))?;
            write_atomic_with(path, |w| {
                ndarray_npy::WriteNpyExt::write_npy(&arr, w).map_err(std::io::Error::other)
            })
        }
        OutputFormat::Safetensors => {
            let bytes: Vec<u8> = m.data.iter().flat_map(|v| v.to_le_bytes()).collect();
            let view = safetensors::tensor::TensorView::new(
                safetensors::Dtype::F32,
                vec![m.rows, m.dim],
                &bytes,
            )
            .map_err(|e| Error::value("--output", e.to_string()))?;
            let out = safetensors::serialize([("embeddings", view)], None)
                .map_err(|e| Error::value("--output", e.to_string()))?;
            write_atomic_with(path, |w| w.write_all(&out))
        }
        OutputFormat::Jsonl if crate::fsutil::is_std_stream(path) => {
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            jsonl_rows(&mut out, m, first)
                .and_then(|_| out.flush())
                .map_err(|e| Error::io(path, e))
        }
        OutputFormat::Jsonl => write_atomic_with(path, |w| jsonl_rows(w, m, first)),
    }
}

/// `m`'s rows as JSON lines, `{"index": first + i, "embedding": [...]}`.
fn jsonl_rows(w: &mut dyn Write, m: &Matrix, first: usize) -> std::io::Result<()> {
    for i in 0..m.rows {
        let line = serde_json::json!({ "index": first + i, "embedding": m.row(i) });
        writeln!(w, "{line}")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_all_formats() {
        let d = tempfile::tempdir().unwrap();
        let m = Matrix {
            rows: 2,
            dim: 3,
            data: vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.5],
        };
        let p = d.path().join("e.npy");
        write_embeddings(&p, &m).unwrap();
        let arr: ndarray::Array2<f32> = ndarray_npy::read_npy(&p).unwrap();
        assert_eq!(arr.shape(), &[2, 3]);
        assert_eq!(arr[[1, 2]], 6.5);
        let p = d.path().join("e.safetensors");
        write_embeddings(&p, &m).unwrap();
        let bytes = std::fs::read(&p).unwrap();
        let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
        let t = st.tensor("embeddings").unwrap();
        assert_eq!(t.shape(), &[2, 3]);
        let p = d.path().join("e.jsonl");
        write_embeddings(&p, &m).unwrap();
        let s = std::fs::read_to_string(&p).unwrap();
        assert_eq!(s.lines().count(), 2);
        assert!(s.lines().nth(1).unwrap().contains("6.5"));
        assert!(write_embeddings(&d.path().join("e.csv"), &m).is_err());
    }
}
