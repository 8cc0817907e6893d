//! What an embedding job that is cut (Ctrl-C, a lost machine) keeps: each chunk of vectors,
//! written atomically into `.<output>.embedded/` beside the output as it is embedded, with a
//! `state.json` naming what they are the vectors of (model and its weights' fingerprint, layer,
//! prompt, texts, arithmetic, ...). The same command again embeds only the chunks missing; the
//! folder goes once the output is in place. Vectors of another job are dropped (the caller
//! says so). Used by `nest index build`, `nest encode` and `nest compress --model --beir`.

use std::path::{Path, PathBuf};

use crate::Result;

const STATE: &str = "state.json";

/// What [`Embedded::open`] found beside the output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Found {
    /// Chunks kept by a cut run of the same job.
    pub chunks: usize,
    /// A cut run of another job had left vectors there: they were dropped.
    pub dropped: bool,
}

/// The embedded chunks of one job.
pub struct Embedded {
    dir: PathBuf,
    dim: usize,
}

fn dir_for(out: &Path) -> PathBuf {
    let name = out.file_name().unwrap_or_default().to_string_lossy();
    out.with_file_name(format!(".{name}.embedded"))
}

impl Embedded {
    /// Opens (or starts) the chunks of the job `key` describes, `dim` floats a vector, kept
    /// beside `out`. Returns it with what it found: the number of chunks already there, and
    /// whether a cut job of another key left vectors that were dropped.
    pub fn open(out: &Path, key: serde_json::Value, dim: usize) -> Result<(Self, Found)> {
        let dir = dir_for(out);
        let state = dir.join(STATE);
        let found = std::fs::read_to_string(&state)
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok());
        let dropped = found.as_ref().is_some_and(|f| *f != key);
        if found.as_ref() != Some(&key) {
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).map_err(|e| crate::Error::io(&dir, e))?;
            crate::fsutil::write_atomic(&state, key.to_string().as_bytes())?;
        }
        let e = Embedded { dir, dim };
        let chunks = std::fs::read_dir(&e.dir)
            .map(|d| d.flatten().filter(|f| f.file_name() != STATE).count())
            .unwrap_or(0);
        Ok((e, Found { chunks, dropped }))
    }

    /// The folder the chunks are kept in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn chunk(&self, c: usize) -> PathBuf {
        self.dir.join(format!("chunk-{c:06}.f32"))
    }

    /// Chunk `c`'s vectors (`rows` of them, row-major), if a cut build embedded it.
    pub fn get(&self, c: usize, rows: usize) -> Option<Vec<f32>> {
        let bytes = std::fs::read(self.chunk(c)).ok()?;
        // a chunk of another length is no chunk of this job (written atomically: never torn)
        (bytes.len() == rows * self.dim * 4).then(|| {
            let floats = bytes.chunks_exact(4);
            floats
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect()
        })
    }

    /// Keeps chunk `c`'s vectors.
    pub fn put(&self, c: usize, v: &[f32]) -> Result<()> {
        let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        crate::fsutil::write_atomic(&self.chunk(c), &bytes)
    }

    /// The output is in place: the chunks go.
    pub fn remove(self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// What tells a model's weights apart at one path (a run's `final/` overwritten by a new run):
/// each file's name, length and modification time, without reading gigabytes. A hub id or a
/// missing folder gives null.
pub fn fingerprint(model: &str) -> serde_json::Value {
    let Ok(entries) = std::fs::read_dir(model) else {
        return serde_json::Value::Null;
    };
    let mut files: Vec<String> = entries
        .flatten()
        .filter_map(|e| {
            let m = e.metadata().ok().filter(|m| m.is_file())?;
            let t = m
                .modified()
                .ok()?
                .duration_since(std::time::UNIX_EPOCH)
                .ok()?;
            let name = e.file_name().to_string_lossy().into_owned();
            Some(format!("{name} {} {}", m.len(), t.as_nanos()))
        })
        .collect();
    files.sort();
    files.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_come_back_for_the_same_build_only() {
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join("idx");
        let key = serde_json::json!({"model": "m", "documents_sha256": "a"});
        let (e, found) = Embedded::open(&out, key.clone(), 2).unwrap();
        assert_eq!((found.chunks, found.dropped), (0, false));
        e.put(0, &[1.0, -2.5, 3.0, 0.25]).unwrap();
        assert_eq!(e.get(0, 2), Some(vec![1.0, -2.5, 3.0, 0.25]));
        assert_eq!(e.get(0, 3), None, "another length");
        assert_eq!(e.get(1, 2), None);
        let (e, found) = Embedded::open(&out, key, 2).unwrap();
        assert_eq!((found.chunks, e.get(0, 2).is_some()), (1, true));
        let other = serde_json::json!({"model": "m", "documents_sha256": "b"});
        let (e, found) = Embedded::open(&out, other, 2).unwrap();
        assert_eq!(
            (found, e.get(0, 2)),
            (
                Found {
                    chunks: 0,
                    dropped: true
                },
                None
            )
        );
        e.remove();
        assert!(!d.path().join(".idx.embedded").exists());
    }
}
