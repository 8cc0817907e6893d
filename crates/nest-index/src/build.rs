//! [`IndexBuilder`]: writes every level of an index in one pass over the vectors.
//!
//! Files are written into `<out>.partial-<pid>/` with a running CRC32 each; `finish` syncs them,
//! writes `index.json` (counts, byte lengths and checksums) last, and renames the folder into
//! place, so a crash or an error leaves no half-built index where a reader would open it.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::level::{pack_bits, prefix_normalized, quantize_int8, Level, Precision};
use crate::{Error, Result};

/// The manifest's file name.
pub const MANIFEST: &str = "index.json";
/// The format tag and version written into every manifest.
pub const FORMAT: &str = "nest-index";
pub const VERSION: u32 = 1;

/// A file of the index with its expected length and checksum.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileSum {
    pub name: String,
    pub bytes: u64,
    pub crc32: u32,
}

/// One level's files.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LevelFiles {
    pub precision: Precision,
    pub dim: usize,
    pub data: FileSum,
    /// Per-row f32 scales (int8 levels).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scales: Option<FileSum>,
}

impl LevelFiles {
    pub fn level(&self) -> Level {
        Level {
            precision: self.precision,
            dim: self.dim,
        }
    }
}

/// `index.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub format: String,
    pub version: u32,
    /// Number of vectors.
    pub count: usize,
    /// Length of the vectors given to the builder.
    pub full_dim: usize,
    /// Where the vectors came from (model, layer, adaptor), for `nest search` to embed queries
    /// the same way.
    #[serde(default)]
    pub source: serde_json::Value,
    pub levels: Vec<LevelFiles>,
    /// One id per line, UTF-8.
    pub ids: FileSum,
    /// One JSON value per line, when payloads were stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<FileSum>,
}

#[derive(Debug)]
struct SumWriter {
    name: String,
    w: BufWriter<File>,
    crc: crc32fast::Hasher,
    bytes: u64,
}

impl SumWriter {
    fn create(dir: &Path, name: &str) -> Result<Self> {
        let path = dir.join(name);
        let f = File::create(&path).map_err(|e| Error::io(&path, e))?;
        Ok(SumWriter {
            name: name.to_string(),
            w: BufWriter::with_capacity(1 << 20, f),
            crc: crc32fast::Hasher::new(),
            bytes: 0,
        })
    }

    fn write(&mut self, dir: &Path, b: &[u8]) -> Result<()> {
        self.crc.update(b);
        self.bytes += b.len() as u64;
        self.w
            .write_all(b)
            .map_err(|e| Error::io(dir.join(&self.name), e))
    }

    fn finish(self, dir: &Path) -> Result<FileSum> {
        let path = dir.join(&self.name);
        let f = self
            .w
            .into_inner()
            .map_err(|e| Error::io(&path, e.into_error()))?;
        f.sync_all().map_err(|e| Error::io(&path, e))?;
        Ok(FileSum {
            name: self.name,
            bytes: self.bytes,
            crc32: self.crc.finalize(),
        })
    }
}

#[derive(Debug)]
struct LevelWriter {
    level: Level,
    data: SumWriter,
    scales: Option<SumWriter>,
}

/// Removes the partial folder unless the build finished (an error or a dropped builder leaves
/// nothing behind).
#[derive(Debug)]
struct PartialDir {
    path: PathBuf,
    keep: bool,
}

impl Drop for PartialDir {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// Builds an index folder in one pass: `push` each vector, then `finish`.
#[derive(Debug)]
pub struct IndexBuilder {
    out: PathBuf,
    tmp: PathBuf,
    guard: PartialDir,
    full_dim: usize,
    overwrite: bool,
    source: serde_json::Value,
    levels: Vec<LevelWriter>,
    ids: SumWriter,
    payload: Option<SumWriter>,
    count: usize,
    /// What to do with the documents a server added to the index this build replaces:
    /// keep (`true`) or drop them; `None`: not chosen, and `finish` refuses to drop any.
    keep_added: Option<bool>,
}

impl IndexBuilder {
    /// Starts an index at `out` for vectors of length `full_dim`, storing each of `levels`.
    /// Refuses an existing `out` unless `overwrite` (which replaces it only at `finish`).
    pub fn create(
        out: &Path,
        full_dim: usize,
        levels: &[Level],
        with_payload: bool,
        source: serde_json::Value,
        overwrite: bool,
    ) -> Result<Self> {
        if full_dim == 0 {
            return Err(Error::invalid(
                "dim",
                "vectors must have at least one dimension",
            ));
        }
        if levels.is_empty() {
            return Err(Error::invalid("levels", "no level to store"));
        }
        let mut levels = levels.to_vec();
        levels.sort();
        levels.dedup();
        if let Some(l) = levels.iter().find(|l| l.dim > full_dim) {
            return Err(Error::invalid(
                "dims",
                format!("level {l} is wider than the {full_dim}-dim vectors"),
            ));
        }
        if out.exists() && !overwrite {
            return Err(Error::invalid(
                "out",
                format!(
                    "{} exists; pass --overwrite (Python: overwrite=True) to replace it",
                    out.display()
                ),
            ));
        }
        let name = out
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .ok_or_else(|| {
                Error::invalid("out", format!("{} has no folder name", out.display()))
            })?;
        let tmp = out.with_file_name(format!(".{name}.partial-{}", std::process::id()));
        if tmp.exists() {
            std::fs::remove_dir_all(&tmp).map_err(|e| Error::io(&tmp, e))?;
        }
        std::fs::create_dir_all(&tmp).map_err(|e| Error::io(&tmp, e))?;
        let writers = levels
            .iter()
            .map(|&level| {
                Ok(LevelWriter {
                    level,
                    data: SumWriter::create(&tmp, &level.file_name())?,
                    scales: level
                        .scale_file_name()
                        .map(|n| SumWriter::create(&tmp, &n))
                        .transpose()?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(IndexBuilder {
            out: out.to_path_buf(),
            ids: SumWriter::create(&tmp, "ids.txt")?,
            payload: with_payload
                .then(|| SumWriter::create(&tmp, "payload.jsonl"))
                .transpose()?,
            guard: PartialDir {
                path: tmp.clone(),
                keep: false,
            },
            tmp,
            full_dim,
            overwrite,
            source,
            levels: writers,
            count: 0,
            keep_added: None,
        })
    }

    /// Chooses what this build does with the documents added through a server to the index it
    /// replaces ([`crate::rebuild`]): carry them into the new index (`true`: refused here
    /// unless this build embeds as the old one did) or drop them.
    pub fn keep_added(&mut self, keep: bool) -> Result<()> {
        if keep && crate::rebuild::added_rows(&self.out) > 0 {
            crate::rebuild::check_keep(&self.out, &self.source, self.full_dim)?;
        }
        self.keep_added = Some(keep);
        Ok(())
    }

    /// Number of vectors pushed so far.
    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Adds one vector (any norm; each level normalises its prefix) with its id and, when the
    /// index stores payloads, a JSON value (`None` stores `null`).
    pub fn push(&mut self, id: &str, payload: Option<&serde_json::Value>, v: &[f32]) -> Result<()> {
        let row = self.count;
        if v.len() != self.full_dim {
            return Err(Error::invalid(
                format!("vector {row} ('{id}')"),
                format!("has {} dims, expected {}", v.len(), self.full_dim),
            ));
        }
        if let Some(j) = v.iter().position(|x| !x.is_finite()) {
            return Err(Error::invalid(
                format!("vector {row} ('{id}')"),
                format!("coordinate {j} is not finite"),
            ));
        }
        if let Some(problem) = nest_core::data::id_problem(id) {
            return Err(Error::invalid(format!("id of vector {row}"), problem));
        }
        let tmp = self.tmp.clone();
        for lw in &mut self.levels {
            let p = prefix_normalized(v, lw.level.dim);
            match lw.level.precision {
                Precision::Float32 => lw.data.write(&tmp, bytemuck::cast_slice(&p))?,
                Precision::Int8 => {
                    let (q, s) = quantize_int8(&p);
                    lw.data.write(&tmp, bytemuck::cast_slice(&q))?;
                    if let Some(sw) = &mut lw.scales {
                        sw.write(&tmp, &s.to_le_bytes())?;
                    }
                }
                Precision::Binary => lw.data.write(&tmp, &pack_bits(&p))?,
            }
        }
        self.ids.write(&tmp, id.as_bytes())?;
        self.ids.write(&tmp, b"\n")?;
        if let Some(pw) = &mut self.payload {
            let line = match payload {
                Some(p) => serde_json::to_string(p)
                    .map_err(|e| Error::invalid(format!("payload of '{id}'"), e.to_string()))?,
                None => "null".to_string(),
            };
            pw.write(&tmp, line.as_bytes())?;
            pw.write(&tmp, b"\n")?;
        }
        self.count += 1;
        Ok(())
    }

    /// Syncs every file, writes `index.json` and moves the folder into place.
    pub fn finish(self) -> Result<Manifest> {
        if self.count == 0 {
            return Err(Error::invalid(
                "input",
                "no vectors were given; nothing to index",
            ));
        }
        let tmp = self.tmp;
        let levels = self
            .levels
            .into_iter()
            .map(|lw| {
                Ok(LevelFiles {
                    precision: lw.level.precision,
                    dim: lw.level.dim,
                    data: lw.data.finish(&tmp)?,
                    scales: lw.scales.map(|s| s.finish(&tmp)).transpose()?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let manifest = Manifest {
            format: FORMAT.into(),
            version: VERSION,
            count: self.count,
            full_dim: self.full_dim,
            source: self.source,
            levels,
            ids: self.ids.finish(&tmp)?,
            payload: self.payload.map(|p| p.finish(&tmp)).transpose()?,
        };
        let json = serde_json::to_vec_pretty(&manifest)
            .map_err(|e| Error::invalid("manifest", e.to_string()))?;
        nest_core::fsutil::write_atomic(&tmp.join(MANIFEST), &json)?;
        let added = crate::rebuild::added_rows(&self.out);
        match self.keep_added {
            _ if added == 0 || !self.overwrite => {}
            None => return Err(crate::rebuild::refusal(&self.out, added)),
            Some(true) => {
                crate::rebuild::carry(&self.out, &tmp)?;
            }
            Some(false) => {}
        }
        if self.out.exists() {
            if !self.overwrite {
                return Err(Error::invalid(
                    "out",
                    format!("{} appeared while building", self.out.display()),
                ));
            }
            if !self.out.join(MANIFEST).exists() && !is_empty_dir(&self.out) {
                return Err(Error::invalid(
                    "out",
                    format!(
                        "{} is not a Nest index (no {MANIFEST}); not replacing it",
                        self.out.display()
                    ),
                ));
            }
            std::fs::remove_dir_all(&self.out).map_err(|e| Error::io(&self.out, e))?;
        }
        std::fs::rename(&tmp, &self.out).map_err(|e| Error::io(&self.out, e))?;
        let mut guard = self.guard;
        guard.keep = true;
        Ok(manifest)
    }
}

fn is_empty_dir(p: &Path) -> bool {
    std::fs::read_dir(p).is_ok_and(|mut d| d.next().is_none())
}
