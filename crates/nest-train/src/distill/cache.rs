//! The teacher-embedding cache: a teacher encodes each text once, ever. Stages, restarts and
//! reruns read the vectors back instead of re-encoding.
//!
//! One file per (teacher weights, max length): `<dir>/<key>.ntc`, where `key` is a hash of the
//! teacher's weights file and the max length. Entries are keyed by the sha256 of the text.
//! The layout, little-endian:
//!
//! | bytes | content |
//! |---|---|
//! | 8 | magic `NESTTC01` |
//! | 8 | `count` (u64), then `dim` (u64) in the next 8 |
//! | 32 x count | the texts' sha256, sorted, so a lookup is a binary search |
//! | 4 x dim x count | the vectors (f32), row `i` for key `i` |
//! | 32 | sha256 of everything above |
//!
//! The file is memory-mapped. Its length and trailing checksum are verified before any read,
//! so a truncated or altered file is detected and rebuilt, never read as garbage. New entries are
//! merged into a new file that atomically replaces the old one, so an interrupted write leaves
//! the old cache whole.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use tch::{Kind, Tensor};

use crate::Result;

const MAGIC: &[u8; 8] = b"NESTTC01";
const HEAD: usize = 24;

/// sha256 of a text: the cache key of its vector.
fn text_key(text: &str) -> [u8; 32] {
    Sha256::digest(text.as_bytes()).into()
}

/// What a lookup did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Texts found in the cache.
    pub hits: usize,
    /// Texts the teacher encoded now.
    pub misses: usize,
    /// Entries the file holds after the lookup.
    pub entries: usize,
    /// Why an existing file was discarded (truncated, checksum mismatch, ...), if it was.
    pub discarded: Option<String>,
    /// Size of the cache file after the lookup, in bytes.
    pub file_bytes: u64,
}

/// A teacher's cache file.
#[derive(Debug, Clone)]
pub struct TeacherCache {
    pub path: PathBuf,
    /// How often a long fill merges what it encoded into the file (default two minutes).
    pub save_every: std::time::Duration,
}

/// A verified, memory-mapped cache file.
struct Mapped {
    map: memmap2::Mmap,
    count: usize,
    dim: usize,
}

impl Mapped {
    fn key(&self, i: usize) -> &[u8] {
        &self.map[HEAD + 32 * i..HEAD + 32 * (i + 1)]
    }

    fn find(&self, key: &[u8; 32]) -> Option<usize> {
        let (mut lo, mut hi) = (0, self.count);
        while lo < hi {
            let mid = (lo + hi) / 2;
            match self.key(mid).cmp(key.as_slice()) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Some(mid),
            }
        }
        None
    }

    fn row(&self, i: usize) -> &[u8] {
        let start = HEAD + 32 * self.count + 4 * self.dim * i;
        &self.map[start..start + 4 * self.dim]
    }
}

fn open(path: &Path) -> std::result::Result<Option<Mapped>, String> {
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot open: {e}")),
    };
    // SAFETY: the file is only read, and only after its length and checksum are verified; Nest
    // replaces cache files by rename, never in place, so the mapped bytes do not change under us.
    #[allow(unsafe_code)]
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| format!("cannot map: {e}"))?;
    if map.len() < HEAD + 32 || &map[..8] != MAGIC {
        return Err(format!("{} bytes, not a Nest teacher cache", map.len()));
    }
    let word = |at: usize| u64::from_le_bytes(map[at..at + 8].try_into().expect("8 bytes"));
    let (count, dim) = (word(8) as usize, word(16) as usize);
    // checked: the counts come from the file (4 * dim overflowed on a damaged header)
    let body = dim
        .checked_mul(4)
        .and_then(|row| row.checked_add(32))
        .and_then(|entry| count.checked_mul(entry))
        .and_then(|b| b.checked_add(HEAD));
    if body.and_then(|b| b.checked_add(32)) != Some(map.len()) {
        return Err(format!(
            "{} bytes for {count} vectors of {dim} dims (truncated or extended)",
            map.len()
        ));
    }
    let body = body.expect("checked above");
    if Sha256::digest(&map[..body]).as_slice() != &map[body..] {
        return Err("checksum mismatch (the file was altered)".into());
    }
    Ok(Some(Mapped { map, count, dim }))
}

impl TeacherCache {
    /// The cache of the teacher in `teacher_dir` at `max_length`, under `dir`: the key hashes
    /// the teacher's weights file, so a changed teacher never reads another's vectors.
    pub fn for_teacher(dir: &Path, teacher_dir: &Path, max_length: usize) -> Result<Self> {
        let weights = ["model.safetensors", "pytorch_model.bin"]
            .iter()
            .map(|f| teacher_dir.join(f))
            .find(|p| p.exists())
            .unwrap_or_else(|| teacher_dir.join("model.safetensors"));
        let mut h = Sha256::new();
        h.update(nest_core::fsutil::sha256_file(&weights)?.as_bytes());
        h.update(format!(";max_length={max_length}").as_bytes());
        let key = format!("{:x}", h.finalize());
        Ok(TeacherCache::at(dir.join(format!("{}.ntc", &key[..24]))))
    }

    /// The cache file at `path`, saved every two minutes of a fill.
    pub fn at(path: PathBuf) -> Self {
        TeacherCache {
            path,
            save_every: std::time::Duration::from_secs(120),
        }
    }

    /// The teacher's vectors of `texts`, in order: `[texts.len(), dim]` float32. Texts not in
    /// the cache are encoded by `encode` (in chunks of `batch`) and stored; `progress` hears
    /// (encoded so far, texts to encode) after each chunk. A damaged file is reported in the
    /// stats and rebuilt from what `encode` gives.
    ///
    /// What is encoded is merged into the file every [`TeacherCache::save_every`] and at the
    /// end: an interrupted fill (Ctrl-C, a lost machine, a failing teacher) keeps what it did,
    /// and the next run encodes only the rest.
    pub fn embed(
        &self,
        texts: &[String],
        batch: usize,
        encode: &mut dyn FnMut(&[&str]) -> Result<Tensor>,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<(Tensor, CacheStats)> {
        let mut stats = CacheStats::default();
        let mut mapped = match open(&self.path) {
            Ok(m) => m,
            Err(reason) => {
                stats.discarded = Some(format!("{}: {reason}", self.path.display()));
                None
            }
        };
        // unique texts the cache lacks
        let keys: Vec<[u8; 32]> = texts.iter().map(|t| text_key(t)).collect();
        let mut missing: Vec<&str> = Vec::new();
        let mut seen: HashSet<[u8; 32]> = HashSet::new();
        for (t, k) in texts.iter().zip(&keys) {
            if mapped.as_ref().and_then(|m| m.find(k)).is_some() {
                stats.hits += 1;
            } else if seen.insert(*k) {
                missing.push(t);
            }
        }
        stats.misses = missing.len();
        if !missing.is_empty() || stats.discarded.is_some() {
            mapped = self.fill(mapped, &mut missing, batch, encode, progress)?;
        }
        let dim = mapped.as_ref().map_or(0, |m| m.dim);
        // the rows asked for, in order (all in the file now)
        let mut out = Vec::with_capacity(texts.len() * dim);
        if let Some(m) = &mapped {
            for k in &keys {
                let row = m.row(m.find(k).expect("every text is in the file"));
                out.extend(
                    row.chunks(4)
                        .map(|b| f32::from_le_bytes(b.try_into().expect("4 bytes"))),
                );
            }
        }
        stats.entries = mapped.as_ref().map_or(0, |m| m.count);
        stats.file_bytes = std::fs::metadata(&self.path).map_or(0, |m| m.len());
        let x = Tensor::from_slice(&out).view([texts.len() as i64, dim as i64]);
        Ok((x, stats))
    }

    /// Encodes `missing` into the file, merging every `save_every` and at the end; the file
    /// as it then is.
    fn fill(
        &self,
        mut mapped: Option<Mapped>,
        missing: &mut [&str],
        batch: usize,
        encode: &mut dyn FnMut(&[&str]) -> Result<Tensor>,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<Option<Mapped>> {
        // similar lengths in one teacher batch: a chunk is padded to its longest text, and a few
        // long texts (SciFact abstracts) spread over every chunk would pad nearly all to max_length
        missing.sort_by_key(|t| t.len());
        let mut fresh: HashMap<[u8; 32], Vec<f32>> = HashMap::new();
        let mut dim = mapped.as_ref().map(|m| m.dim);
        let (mut done, mut saved) = (0, std::time::Instant::now());
        for chunk in missing.chunks(batch.max(1)) {
            let v = encode(chunk)?.to_kind(Kind::Float).contiguous();
            done += chunk.len();
            progress(done, missing.len());
            let d = v.size()[1] as usize;
            if dim.is_some_and(|x| x != d) {
                return Err(crate::Error::Run {
                    path: self.path.clone(),
                    message: format!(
                        "the teacher gives {d} dims, the cache holds {}",
                        dim.unwrap_or(0)
                    ),
                });
            }
            dim = Some(d);
            let flat = Vec::<f32>::try_from(v.view([-1]))?;
            for (t, row) in chunk.iter().zip(flat.chunks(d)) {
                fresh.insert(text_key(t), row.to_vec());
            }
            if saved.elapsed() >= self.save_every && done < missing.len() {
                mapped = self.merge(mapped, &mut fresh, d)?;
                saved = std::time::Instant::now();
            }
        }
        self.merge(mapped, &mut fresh, dim.unwrap_or(0))
    }

    /// `fresh` merged into the file (and emptied); the new file, mapped.
    fn merge(
        &self,
        old: Option<Mapped>,
        fresh: &mut HashMap<[u8; 32], Vec<f32>>,
        dim: usize,
    ) -> Result<Option<Mapped>> {
        self.write(old.as_ref(), fresh, dim)?;
        drop(old);
        fresh.clear();
        open(&self.path).map_err(|message| crate::Error::Run {
            path: self.path.clone(),
            message: format!("the cache just written does not read back: {message}"),
        })
    }

    /// The old entries and `fresh` merged into a new file, atomically.
    fn write(
        &self,
        old: Option<&Mapped>,
        fresh: &HashMap<[u8; 32], Vec<f32>>,
        dim: usize,
    ) -> Result<()> {
        let mut keys: Vec<([u8; 32], Option<usize>)> = fresh.keys().map(|k| (*k, None)).collect();
        if let Some(m) = old {
            keys.extend((0..m.count).map(|i| (m.key(i).try_into().expect("32 bytes"), Some(i))));
        }
        keys.sort_unstable_by_key(|k| k.0);
        let mut bytes = Vec::with_capacity(HEAD + keys.len() * (32 + 4 * dim) + 32);
        bytes.extend_from_slice(MAGIC);
        bytes.extend_from_slice(&(keys.len() as u64).to_le_bytes());
        bytes.extend_from_slice(&(dim as u64).to_le_bytes());
        for (k, _) in &keys {
            bytes.extend_from_slice(k);
        }
        for (k, i) in &keys {
            match (i, old) {
                (Some(i), Some(m)) => bytes.extend_from_slice(m.row(*i)),
                _ => {
                    for x in &fresh[k] {
                        bytes.extend_from_slice(&x.to_le_bytes());
                    }
                }
            }
        }
        let sum = Sha256::digest(&bytes);
        bytes.extend_from_slice(&sum);
        nest_core::fsutil::write_atomic(&self.path, &bytes)?;
        Ok(())
    }
}
