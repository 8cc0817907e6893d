//! [`Index`]: an index folder opened read-only through memory maps.
//!
//! `open` checks, before returning, that every file named by `index.json` exists, has exactly
//! the length the manifest and the row layout imply, and matches its CRC32; any difference is a
//! [`Error::Corrupt`] naming the file. Searches then read the maps without further checks.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};

use memmap2::Mmap;

use crate::build::{FileSum, Manifest, FORMAT, MANIFEST, VERSION};
use crate::level::{Level, Precision};
use crate::{Error, Result};

/// One mapped file.
#[derive(Debug)]
struct Mapped {
    map: Option<Mmap>,
}

impl Mapped {
    fn bytes(&self) -> &[u8] {
        self.map.as_deref().unwrap_or(&[])
    }
}

/// Maps `dir/sum.name` and checks its length and checksum.
fn map_checked(dir: &Path, sum: &FileSum, expected_bytes: u64) -> Result<Mapped> {
    let path = dir.join(&sum.name);
    if sum.name.contains(['/', '\\']) || sum.name.starts_with('.') {
        return Err(Error::corrupt(
            dir.join(MANIFEST),
            format!(
                "file name '{}' is not a plain name inside the index",
                sum.name
            ),
        ));
    }
    if sum.bytes != expected_bytes {
        return Err(Error::corrupt(
            dir.join(MANIFEST),
            format!(
                "'{}' is recorded as {} bytes, but the row layout needs {expected_bytes}",
                sum.name, sum.bytes
            ),
        ));
    }
    let f = File::open(&path).map_err(|e| Error::io(&path, e))?;
    let len = f.metadata().map_err(|e| Error::io(&path, e))?.len();
    if len != sum.bytes {
        return Err(Error::corrupt(
            &path,
            format!(
                "{len} bytes, expected {} (truncated or overwritten)",
                sum.bytes
            ),
        ));
    }
    let map = if len == 0 {
        None
    } else {
        Some(map_file(&f, &path)?)
    };
    let m = Mapped { map };
    let crc = crc32fast::hash(m.bytes());
    if crc != sum.crc32 {
        return Err(Error::corrupt(
            &path,
            format!(
                "checksum {crc:08x} differs from the recorded {:08x}: the file is corrupted",
                sum.crc32
            ),
        ));
    }
    Ok(m)
}

/// The one place Nest maps a file.
#[allow(unsafe_code)]
fn map_file(f: &File, path: &Path) -> Result<Mmap> {
    // SAFETY: the map is read-only and private to this process. Index files are written once
    // into a temporary folder and renamed into place, never modified after; a file replaced or
    // truncated underneath a running reader is outside that contract (as for every mmap-based
    // index), and its checksum was verified when it was opened.
    unsafe { Mmap::map(f) }.map_err(|e| Error::io(path, e))
}

#[derive(Debug)]
struct LevelData {
    data: Mapped,
    scales: Option<Mapped>,
}

/// An open index.
#[derive(Debug)]
pub struct Index {
    dir: PathBuf,
    manifest: Manifest,
    ids: Vec<String>,
    levels: BTreeMap<Level, LevelData>,
    payload: Option<(Mapped, Vec<usize>)>,
}

/// A level's rows, borrowed from the maps.
#[derive(Debug, Clone, Copy)]
pub enum Rows<'a> {
    Float32(&'a [f32]),
    Int8(&'a [i8], &'a [f32]),
    Binary(&'a [u8]),
}

/// Reads `dir/index.json` and checks its format and version.
fn read_manifest(dir: &Path) -> Result<Manifest> {
    let mpath = dir.join(MANIFEST);
    let text = std::fs::read_to_string(&mpath).map_err(|e| match e.kind() {
        // what the folder is not, and what makes one (a not-found error still)
        std::io::ErrorKind::NotFound => {
            let what = match dir.is_dir() {
                true => "the folder is not a Nest index",
                false => "no such folder",
            };
            let m = format!("{what} (`nest index build --out DIR` writes an index)");
            Error::io(&mpath, std::io::Error::new(e.kind(), m))
        }
        _ => Error::io(&mpath, e),
    })?;
    let manifest: Manifest = serde_json::from_str(&text)
        .map_err(|e| Error::corrupt(&mpath, format!("not a Nest index manifest: {e}")))?;
    if manifest.format != FORMAT || manifest.version != VERSION {
        return Err(Error::corrupt(
            &mpath,
            format!(
                "format '{}' version {}, expected '{FORMAT}' version {VERSION}",
                manifest.format, manifest.version
            ),
        ));
    }
    Ok(manifest)
}

/// Maps and checks every level's rows (and an int8 level's scales).
fn map_levels(dir: &Path, manifest: &Manifest) -> Result<BTreeMap<Level, LevelData>> {
    let mpath = dir.join(MANIFEST);
    let n = manifest.count as u64;
    let mut levels = BTreeMap::new();
    for lf in &manifest.levels {
        let level = lf.level();
        if level.dim == 0 || level.dim > manifest.full_dim {
            return Err(Error::corrupt(
                &mpath,
                format!("level {level} is out of range"),
            ));
        }
        let data = map_checked(dir, &lf.data, n * level.row_bytes() as u64)?;
        let scales = match (level.precision, &lf.scales) {
            (Precision::Int8, Some(s)) => Some(map_checked(dir, s, n * 4)?),
            (Precision::Int8, None) => {
                return Err(Error::corrupt(
                    &mpath,
                    format!("level {level} has no scale file"),
                ))
            }
            _ => None,
        };
        levels.insert(level, LevelData { data, scales });
    }
    Ok(levels)
}

/// Maps and checks the ids file: UTF-8, one id per vector.
fn read_ids(dir: &Path, manifest: &Manifest) -> Result<Vec<String>> {
    let ids_map = map_checked(dir, &manifest.ids, manifest.ids.bytes)?;
    let ids_path = dir.join(&manifest.ids.name);
    let ids_text = std::str::from_utf8(ids_map.bytes())
        .map_err(|e| Error::corrupt(&ids_path, format!("not UTF-8: {e}")))?;
    let ids: Vec<String> = ids_text.lines().map(str::to_string).collect();
    if ids.len() != manifest.count {
        return Err(Error::corrupt(
            &ids_path,
            format!("{} ids for {} vectors", ids.len(), manifest.count),
        ));
    }
    Ok(ids)
}

/// Maps and checks the payload file, if any, with the byte offset of each of its lines.
fn map_payload(dir: &Path, manifest: &Manifest) -> Result<Option<(Mapped, Vec<usize>)>> {
    let Some(p) = &manifest.payload else {
        return Ok(None);
    };
    let m = map_checked(dir, p, p.bytes)?;
    let mut starts = vec![0usize];
    starts.extend(
        m.bytes()
            .iter()
            .enumerate()
            .filter(|(_, &b)| b == b'\n')
            .map(|(i, _)| i + 1),
    );
    if starts.len() != manifest.count + 1 {
        return Err(Error::corrupt(
            dir.join(&p.name),
            format!(
                "{} payload lines for {} vectors",
                starts.len() - 1,
                manifest.count
            ),
        ));
    }
    Ok(Some((m, starts)))
}

impl Index {
    /// Opens and verifies the index in `dir`.
    pub fn open(dir: &Path) -> Result<Self> {
        if !cfg!(target_endian = "little") {
            return Err(Error::invalid("platform", "Nest indexes are little-endian"));
        }
        let manifest = read_manifest(dir)?;
        let levels = map_levels(dir, &manifest)?;
        let ids = read_ids(dir, &manifest)?;
        let payload = map_payload(dir, &manifest)?;
        Ok(Index {
            dir: dir.to_path_buf(),
            manifest,
            ids,
            levels,
            payload,
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    pub fn len(&self) -> usize {
        self.manifest.count
    }

    pub fn is_empty(&self) -> bool {
        self.manifest.count == 0
    }

    pub fn full_dim(&self) -> usize {
        self.manifest.full_dim
    }

    /// The stored levels, sorted.
    pub fn levels(&self) -> Vec<Level> {
        self.levels.keys().copied().collect()
    }

    pub fn id(&self, row: usize) -> &str {
        &self.ids[row]
    }

    /// The row's payload as a JSON value (`None` when the index stores none).
    pub fn payload(&self, row: usize) -> Option<serde_json::Value> {
        let (m, starts) = self.payload.as_ref()?;
        let line = &m.bytes()[starts[row]..starts[row + 1] - 1];
        serde_json::from_slice(line).ok()
    }

    /// The rows of one level.
    pub fn rows(&self, level: Level) -> Result<Rows<'_>> {
        let ld = self.levels.get(&level).ok_or_else(|| {
            let have: Vec<String> = self.levels.keys().map(|l| l.to_string()).collect();
            Error::invalid(
                "level",
                format!("{level} is not in this index; it has {}", have.join(", ")),
            )
        })?;
        let bad = |e: bytemuck::PodCastError| {
            Error::corrupt(
                self.dir.join(level.file_name()),
                format!("misaligned map: {e:?}"),
            )
        };
        Ok(match level.precision {
            Precision::Float32 => {
                Rows::Float32(bytemuck::try_cast_slice(ld.data.bytes()).map_err(bad)?)
            }
            Precision::Int8 => Rows::Int8(
                bytemuck::try_cast_slice(ld.data.bytes()).map_err(bad)?,
                bytemuck::try_cast_slice(ld.scales.as_ref().map_or(&[][..], |s| s.bytes()))
                    .map_err(bad)?,
            ),
            Precision::Binary => Rows::Binary(ld.data.bytes()),
        })
    }

    /// Row `row` of a float32 level, when stored.
    pub fn vector(&self, level: Level, row: usize) -> Option<&[f32]> {
        match self.rows(level).ok()? {
            Rows::Float32(v) => v.get(row * level.dim..(row + 1) * level.dim),
            _ => None,
        }
    }
}
