//! Loads a `model.safetensors` into a `VarStore`, checking every tensor's presence and shape.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use tch::{nn::VarStore, Kind, Tensor};

use crate::{Error, Result};

/// Prefixes some checkpoints put before the encoder's own names (`bert.embeddings...`).
const PREFIXES: [&str; 4] = ["bert.", "mpnet.", "model.", "roberta."];

/// Copies each variable of `vs` from the file, naming the first missing or mis-shaped tensor.
/// Extra tensors in the file (e.g. `embeddings.position_ids`, `pooler.*`, MLM heads) are ignored.
pub(crate) fn load(vs: &mut VarStore, path: &Path) -> Result<()> {
    load_part(vs, path, &|name| Some(name.to_string()))
}

/// Copies the variables of `vs` that `key` maps to a name in the file (the others are left
/// alone), e.g. the encoder's from `model.safetensors` and a Dense head's from
/// `2_Dense/model.safetensors`.
///
/// The file is read one tensor at a time, in pieces, straight into its variable
/// ([`SafetensorsFile::read_into`]), so that the load's peak memory is about the model alone, not
/// the whole file twice over as `Tensor::read_safetensors` (which reads the file into one buffer
/// and copies every tensor out of it) would make it.
pub(crate) fn load_part(
    vs: &mut VarStore,
    path: &Path,
    key: &dyn Fn(&str) -> Option<String>,
) -> Result<()> {
    let file = SafetensorsFile::open(path)?;
    let mut by_key: HashMap<String, &str> = HashMap::with_capacity(file.entries.len());
    for name in file.entries.keys() {
        let k = PREFIXES
            .iter()
            .find_map(|p| name.strip_prefix(p))
            .unwrap_or(name);
        by_key.insert(legacy_norm_name(k.to_string()), name);
    }
    let vars = vs.variables();
    let mut names: Vec<(&String, String)> =
        vars.keys().filter_map(|n| key(n).map(|k| (n, k))).collect();
    names.sort();
    tch::no_grad(|| -> Result<()> {
        for (name, k) in names {
            let var = &vars[name];
            let stored = by_key.get(k.as_str()).ok_or_else(|| Error::Weights {
                path: path.to_path_buf(),
                message: format!("tensor '{k}' not found (expected shape {:?})", var.size()),
            })?;
            let shape = &file.entries[*stored].shape;
            if *shape != var.size() {
                return Err(Error::Weights {
                    path: path.to_path_buf(),
                    message: format!(
                        "tensor '{k}' has shape {shape:?}, the config implies {:?}",
                        var.size()
                    ),
                });
            }
            file.read_into(stored, var)?;
        }
        Ok(())
    })
}

/// One tensor's entry in a safetensors header.
#[derive(Debug)]
struct Entry {
    /// `None` for a dtype libtorch has no kind for (an error only if the tensor is read).
    kind: Option<Kind>,
    /// Bytes per value (0 for a dtype libtorch lacks).
    width: u64,
    dtype: String,
    shape: Vec<i64>,
    /// Where its bytes start within the data section (the length is checked against the shape).
    start: u64,
}

/// A safetensors file with its header parsed and checked; tensors are read one by one.
/// Format: <https://github.com/huggingface/safetensors#format> (an 8-byte little-endian header
/// length, a JSON header of `name -> {dtype, shape, data_offsets}`, then the data).
#[derive(Debug)]
pub(crate) struct SafetensorsFile {
    path: PathBuf,
    file: std::fs::File,
    /// Where the data section starts (8 + the header's length).
    data_start: u64,
    entries: HashMap<String, Entry>,
}

impl SafetensorsFile {
    /// Opens `path` and checks its header: known layout, every tensor's byte range inside the
    /// file and of the size its dtype and shape imply.
    pub(crate) fn open(path: &Path) -> Result<Self> {
        use std::io::Read;
        let bad = |message: String| Error::Weights {
            path: path.to_path_buf(),
            message,
        };
        let mut file = std::fs::File::open(path).map_err(|e| bad(format!("cannot open: {e}")))?;
        let mut len = [0u8; 8];
        file.read_exact(&mut len)
            .map_err(|e| bad(format!("no safetensors header: {e}")))?;
        let len = u64::from_le_bytes(len);
        let size = file.metadata().map(|m| m.len()).unwrap_or(0);
        if len > size.saturating_sub(8) || len > 100 << 20 {
            return Err(bad(format!(
                "safetensors header of {len} bytes in a file of {size} bytes"
            )));
        }
        let mut head = vec![0u8; len as usize];
        file.read_exact(&mut head)
            .map_err(|e| bad(format!("truncated safetensors header: {e}")))?;
        let head: HashMap<String, serde_json::Value> = serde_json::from_slice(&head)
            .map_err(|e| bad(format!("unreadable safetensors header: {e}")))?;
        let data_len = size - 8 - len;
        let mut entries = HashMap::with_capacity(head.len());
        for (name, v) in head {
            if name == "__metadata__" {
                continue;
            }
            let entry = Entry::parse(&v, data_len)
                .map_err(|m| bad(format!("safetensors header, tensor '{name}': {m}")))?;
            entries.insert(name, entry);
        }
        Ok(SafetensorsFile {
            path: path.to_path_buf(),
            file,
            data_start: 8 + len,
            entries,
        })
    }

    /// How many values the file's tensors hold.
    pub(crate) fn values(&self) -> u128 {
        self.entries
            .values()
            .map(|e| {
                e.shape
                    .iter()
                    .fold(1u128, |a, &d| a.saturating_mul(d as u128))
            })
            .fold(0u128, |a, n| a.saturating_add(n))
    }

    /// Reads one tensor into `dst` (same shape, contiguous; any kind and device: the values are
    /// converted), in pieces of [`CHUNK_BYTES`].
    ///
    /// The pieces stay below glibc's initial mmap threshold (128 KiB), so reading never frees a
    /// large block. Freeing one raises the threshold, and later allocations of that size then
    /// stay in the heap after they are freed. Reading whole tensors through one buffer each
    /// measured a load peak of 724 MiB on all-mpnet-base-v2; pieces, 618 (docs/PRECISION.md,
    /// "Memory").
    pub(crate) fn read_into(&self, name: &str, dst: &Tensor) -> Result<()> {
        use std::io::{Read, Seek, SeekFrom};
        let bad = |message: String| Error::Weights {
            path: self.path.clone(),
            message: format!("tensor '{name}': {message}"),
        };
        let e = self
            .entries
            .get(name)
            .ok_or_else(|| bad("not in the file".into()))?;
        let kind = e
            .kind
            .ok_or_else(|| bad(format!("dtype {} is not one libtorch can hold", e.dtype)))?;
        if dst.size() != e.shape {
            return Err(bad(format!(
                "has shape {:?}, the destination {:?}",
                e.shape,
                dst.size()
            )));
        }
        let flat = dst.f_view([-1])?;
        let width = e.width;
        let per_chunk = CHUNK_BYTES / width;
        let mut f = &self.file;
        f.seek(SeekFrom::Start(self.data_start + e.start))
            .map_err(|err| bad(format!("cannot read its data: {err}")))?;
        let mut buf = vec![0u8; (per_chunk * width) as usize];
        let mut done = 0u64;
        while done < flat.numel() as u64 {
            let n = per_chunk.min(flat.numel() as u64 - done);
            let bytes = &mut buf[..(n * width) as usize];
            f.read_exact(bytes)
                .map_err(|err| bad(format!("cannot read its data: {err}")))?;
            let piece = Tensor::f_from_data_size(bytes, &[n as i64], kind)?;
            flat.f_narrow(0, done as i64, n as i64)?
                .f_copy_(&piece.to_device(dst.device()).to_kind(dst.kind()))?;
            done += n;
        }
        Ok(())
    }

    /// Reads one tensor (on the CPU, in its stored kind).
    #[cfg(test)]
    fn read(&self, name: &str) -> Result<Tensor> {
        let e = self.entries.get(name).ok_or_else(|| Error::Weights {
            path: self.path.clone(),
            message: format!("tensor '{name}': not in the file"),
        })?;
        let kind = e.kind.unwrap_or(Kind::Float);
        let t = Tensor::empty(e.shape.as_slice(), (kind, tch::Device::Cpu));
        self.read_into(name, &t)?;
        Ok(t)
    }
}

/// The largest piece [`SafetensorsFile::read_into`] reads at once: under glibc's initial mmap
/// threshold of 128 KiB.
const CHUNK_BYTES: u64 = 64 << 10;

impl Entry {
    /// One header entry, checked against the data section's length.
    fn parse(v: &serde_json::Value, data_len: u64) -> std::result::Result<Entry, String> {
        let dtype = v
            .get("dtype")
            .and_then(|d| d.as_str())
            .ok_or("no dtype")?
            .to_string();
        let shape = v
            .get("shape")
            .and_then(|s| s.as_array())
            .ok_or("no shape")?
            .iter()
            .map(|d| d.as_u64().and_then(|d| i64::try_from(d).ok()))
            .collect::<Option<Vec<i64>>>()
            .ok_or("a shape entry is not a non-negative integer")?;
        let offsets = v
            .get("data_offsets")
            .and_then(|o| o.as_array())
            .and_then(|o| Some((o.first()?.as_u64()?, o.get(1)?.as_u64()?)))
            .ok_or("no data_offsets [start, end]")?;
        let (kind, width) = kind_of(&dtype);
        let numel = shape
            .iter()
            .fold(1u128, |a, &d| a.saturating_mul(d as u128));
        let (start, end) = offsets;
        if start > end || end > data_len {
            return Err(format!(
                "data_offsets [{start}, {end}] outside the data section of {data_len} bytes"
            ));
        }
        if width > 0 && numel.saturating_mul(width) != u128::from(end - start) {
            return Err(format!(
                "{} bytes for shape {shape:?} in {dtype} ({width} bytes each)",
                end - start
            ));
        }
        Ok(Entry {
            kind,
            width: width as u64,
            dtype,
            shape,
            start,
        })
    }
}

/// The libtorch kind and byte width of a safetensors dtype (`(None, 0)` for one it lacks).
fn kind_of(dtype: &str) -> (Option<Kind>, u128) {
    match dtype {
        "F64" => (Some(Kind::Double), 8),
        "F32" => (Some(Kind::Float), 4),
        "F16" => (Some(Kind::Half), 2),
        "BF16" => (Some(Kind::BFloat16), 2),
        "I64" => (Some(Kind::Int64), 8),
        "I32" => (Some(Kind::Int), 4),
        "I16" => (Some(Kind::Int16), 2),
        "I8" => (Some(Kind::Int8), 1),
        "U8" => (Some(Kind::Uint8), 1),
        "BOOL" => (Some(Kind::Bool), 1),
        _ => (None, 0),
    }
}

/// LayerNorm parameters under their TensorFlow-era names (`*.gamma`, `*.beta`), as older hub
/// checkpoints and transformers 5's saving of BERT-family models write them, read as `*.weight`
/// and `*.bias` (transformers does the same on load: `_fix_state_dict_key_on_load`).
fn legacy_norm_name(key: String) -> String {
    if let Some(stem) = key.strip_suffix(".gamma") {
        format!("{stem}.weight")
    } else if let Some(stem) = key.strip_suffix(".beta") {
        format!("{stem}.bias")
    } else {
        key
    }
}

/// How many values the tensors of a safetensors file hold, from its header alone.
pub(crate) fn stored_values(path: &Path) -> Result<u128> {
    Ok(SafetensorsFile::open(path)?.values())
}

/// Refuses a config that describes far more values than its weights file holds, before any
/// variable is allocated: a `config.json` edited by hand (or by a fuzzer) to a huge
/// `hidden_size`, vocabulary or layer count would otherwise make the model's construction
/// allocate terabytes and abort, when the load would fail on the first shape anyway.
/// `implied` is an upper estimate of the values the config's variables hold; the check allows 4x
/// (estimates count a full attention and a gated MLP in every layer) plus a million.
pub(crate) fn check_fits(config_path: &Path, implied: u128, weights_path: &Path) -> Result<()> {
    let stored = stored_values(weights_path)?;
    if implied > stored.saturating_mul(4).saturating_add(1 << 20) {
        return Err(Error::Config {
            path: config_path.to_path_buf(),
            message: format!(
                "describes a model of about {implied} values, but {} holds {stored}: the config \
                 and the weights do not belong together",
                weights_path.display()
            ),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, tensors: &[(&str, Tensor)]) -> PathBuf {
        let p = dir.join("model.safetensors");
        Tensor::write_safetensors(tensors, &p).unwrap();
        p
    }

    /// Every tensor read alone equals what was written, in its own kind.
    #[test]
    fn reads_tensors_one_by_one() {
        let dir = tempfile::tempdir().unwrap();
        let a = Tensor::randn([3, 5], (Kind::Float, tch::Device::Cpu));
        let b = Tensor::arange(7, (Kind::Int64, tch::Device::Cpu));
        let c = a.to_kind(Kind::BFloat16);
        let p = write(
            dir.path(),
            &[
                ("a", a.shallow_clone()),
                ("b", b.shallow_clone()),
                ("c", c.shallow_clone()),
            ],
        );
        let f = SafetensorsFile::open(&p).unwrap();
        assert_eq!(f.values(), 15 + 7 + 15);
        for (name, want) in [("a", &a), ("b", &b), ("c", &c)] {
            let got = f.read(name).unwrap();
            assert_eq!(got.kind(), want.kind(), "{name}");
            assert!(got.equal(want), "{name}");
        }
        let e = f.read("d").unwrap_err().to_string();
        assert!(e.contains("'d'") && e.contains("not in the file"), "{e}");
    }

    /// A file cut short is refused at open, naming the tensor whose bytes are missing.
    #[test]
    fn truncated_file_names_the_tensor() {
        let dir = tempfile::tempdir().unwrap();
        let t = Tensor::ones([64], (Kind::Float, tch::Device::Cpu));
        let p = write(dir.path(), &[("w", t)]);
        let bytes = std::fs::read(&p).unwrap();
        std::fs::write(&p, &bytes[..bytes.len() - 8]).unwrap();
        let e = SafetensorsFile::open(&p).unwrap_err().to_string();
        assert!(
            e.contains("model.safetensors") && e.contains("'w'") && e.contains("data_offsets"),
            "{e}"
        );
    }

    /// A dtype libtorch cannot hold fails only when that tensor is read; a size that does not
    /// match the shape fails at open.
    #[test]
    fn header_entries_are_checked() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.safetensors");
        let file = |head: &str, data: usize| {
            let mut out = (head.len() as u64).to_le_bytes().to_vec();
            out.extend_from_slice(head.as_bytes());
            out.extend(std::iter::repeat_n(0u8, data));
            std::fs::write(&p, out).unwrap();
        };
        file(
            r#"{"odd":{"dtype":"F8_E4M3","shape":[4],"data_offsets":[0,4]},"w":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}"#,
            12,
        );
        let f = SafetensorsFile::open(&p).unwrap();
        assert_eq!(f.read("w").unwrap().size(), vec![2]);
        let e = f.read("odd").unwrap_err().to_string();
        assert!(e.contains("'odd'") && e.contains("F8_E4M3"), "{e}");
        file(
            r#"{"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}"#,
            8,
        );
        let e = SafetensorsFile::open(&p).unwrap_err().to_string();
        assert!(
            e.contains("'w'") && e.contains("8 bytes for shape [3]"),
            "{e}"
        );
    }
}
