//! File helpers: atomic writes (temp file in the same folder, then rename) and hashes.

use std::io::Write;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::{Error, Result};

/// Writes `bytes` to `path` atomically: a reader sees the old file or the whole new one, never a
/// part. The temporary file lives beside the target so the rename stays on one filesystem.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    write_atomic_with(path, |f| f.write_all(bytes))
}

/// Like [`write_atomic`], with the content produced by a writer callback.
pub fn write_atomic_with(
    path: &Path,
    fill: impl FnOnce(&mut std::io::BufWriter<std::fs::File>) -> std::io::Result<()>,
) -> Result<()> {
    let tmp = temp_beside(path)?;
    let result = (|| {
        let file = std::fs::File::create(&tmp)?;
        let mut w = std::io::BufWriter::new(file);
        fill(&mut w)?;
        let file = w.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(Error::io(path, e));
    }
    Ok(())
}

/// The temporary path an atomic write of `path` fills before renaming it into place: beside
/// it (one filesystem), hidden, named for this process; its folder made if missing. For
/// writers that take a path (libtorch's profiler) as much as for [`write_atomic_with`].
pub fn temp_beside(path: &Path) -> Result<PathBuf> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    Ok(dir.join(format!(".{name}.tmp{}", std::process::id())))
}

/// `p` made absolute against `base` (itself relative to the current folder when relative),
/// `.` and `..` parts folded lexically (symlinks are not followed: a linked folder keeps the
/// name it was given): what an error shows of a relative path.
pub fn absolute_in(base: &Path, p: &Path) -> PathBuf {
    let joined = base.join(p);
    let abs = std::path::absolute(&joined).unwrap_or(joined);
    let mut out = PathBuf::new();
    for c in abs.components() {
        match c {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// Hex sha256 of bytes.
pub fn sha256_hex(bytes: &[u8]) -> String {
    format!("{:x}", Sha256::digest(bytes))
}

/// Hex sha256 of a file's content.
pub fn sha256_file(path: &Path) -> Result<String> {
    let mut f = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let mut h = Sha256::new();
    std::io::copy(&mut f, &mut h).map_err(|e| Error::io(path, e))?;
    Ok(format!("{:x}", h.finalize()))
}

/// Reads a text file whole; bytes that are not UTF-8 are an error naming the line and byte
/// where they start (`std::fs::read_to_string` names neither).
pub fn read_text(path: &Path) -> Result<String> {
    let bytes = match is_std_stream(path) {
        true => {
            let mut b = Vec::new();
            std::io::Read::read_to_end(&mut std::io::stdin().lock(), &mut b)
                .map_err(|e| crate::Error::io(path, e))?;
            b
        }
        false => std::fs::read(path).map_err(|e| crate::Error::io(path, e))?,
    };
    String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let bytes = e.as_bytes();
        let line = bytes[..at].iter().filter(|&&b| b == b'\n').count() + 1;
        crate::Error::content(
            path,
            format!(
                "line {line} (byte {at}): not valid UTF-8; Nest reads UTF-8 text (re-encode the \
                 file, e.g. iconv -f latin1 -t utf-8)"
            ),
        )
    })
}

/// Whether `path` is `-`: standard input where a file is read ([`read_text`]), standard output
/// where embeddings are written (`nest_core::output`).
pub fn is_std_stream(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// Refuses an output (`out_key` = `out`: a file written, or a folder replaced) that is one of
/// the command's `inputs` (`(key, path)`) or holds one: `nest encode --input d.jsonl --output
/// d.jsonl` would replace the documents with their vectors, `nest index build --input
/// idx/docs.jsonl --out idx --overwrite` delete them. Paths that do not exist yet (and `-`)
/// pass.
pub fn check_output_spares_inputs(
    out_key: &str,
    out: &Path,
    inputs: &[(&str, &Path)],
) -> Result<()> {
    let Ok(o) = std::fs::canonicalize(out) else {
        return Ok(());
    };
    for &(key, input) in inputs {
        if is_std_stream(input) {
            continue;
        }
        let Ok(i) = std::fs::canonicalize(input) else {
            continue;
        };
        let how = if i == o {
            "is"
        } else if o.is_dir() && i.starts_with(&o) {
            "holds"
        } else {
            continue;
        };
        return Err(Error::Value {
            key: out_key.to_string(),
            message: format!(
                "{} {how} the {key} {}: writing the output there would destroy the input; \
                 choose another {out_key}",
                out.display(),
                input.display()
            ),
        });
    }
    Ok(())
}

/// Rank `rank` of `world`'s part of `output`, the one naming of every per-rank file (`nest
/// encode`'s vectors, `nest mine`'s rows): `emb.npy` -> `emb.part-00001-of-00002.npy`.
pub fn part_path(output: &Path, rank: usize, world: usize) -> std::path::PathBuf {
    let stem = output.file_stem().unwrap_or_default().to_string_lossy();
    let ext = output
        .extension()
        .map(|e| format!(".{}", e.to_string_lossy()))
        .unwrap_or_default();
    output.with_file_name(format!("{stem}.part-{rank:05}-of-{world:05}{ext}"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_output_may_not_be_or_hold_an_input() {
        let d = tempfile::tempdir().unwrap();
        let docs = d.path().join("idx").join("docs.jsonl");
        std::fs::create_dir_all(docs.parent().unwrap()).unwrap();
        std::fs::write(&docs, "x\n").unwrap();
        let check =
            |out: &Path| super::check_output_spares_inputs("--out", out, &[("--input", &docs)]);
        // the same file, written another way
        let e = check(&d.path().join("idx/../idx/docs.jsonl"))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("--out: ") && e.contains(" is the --input "),
            "{e}"
        );
        let e = check(&d.path().join("idx")).unwrap_err().to_string();
        assert!(
            e.contains(" holds the --input ") && e.contains("choose another --out"),
            "{e}"
        );
        check(&d.path().join("new.jsonl")).unwrap();
        check(&d.path().join("idx/other.npy")).unwrap();
        super::check_output_spares_inputs("--output", &docs, &[("--input", Path::new("-"))])
            .unwrap();
    }

    use super::*;

    #[test]
    fn atomic_write_replaces_whole_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.txt");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two two").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two two");
        // no temp files left behind
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        // sha256 of "two two", from coreutils sha256sum
        assert_eq!(
            sha256_file(&p).unwrap(),
            "3d75fa44f805a9ce034b8a4a564fc0f0710a44057e331e519c31993e61021250"
        );
    }
}
