use std::path::Path;

use crate::{Error, Result};

/// Reads the texts to encode.
///
/// - `.jsonl`: one JSON object per line with a string field `text`.
/// - anything else: plain text, one sentence per line (a trailing `\r` is dropped). Blank lines
///   are kept as empty texts so that output row `i` always matches input line `i + 1`.
///
/// An input with no text at all is an error.
pub fn read_sentences(path: &Path) -> Result<Vec<String>> {
    let raw = crate::fsutil::read_text(path)?;
    let out = parse(path, &raw, None)?;
    if out.iter().all(|s| s.trim().is_empty()) {
        return Err(Error::content(path, "the input holds no text to encode"));
    }
    Ok(out)
}

/// Share `share` of `shares` of the texts of [`read_sentences`], reading only that share's
/// bytes: the file is cut at `size * k / shares` bytes, each cut moved forward to the next line
/// start, so the shares in order hold every line once, in file order. For data-parallel
/// encoding (one share per process); a share may be empty. Errors name the byte offset where
/// the share starts (a process does not know how many lines precede it).
pub fn read_sentences_share(path: &Path, share: usize, shares: usize) -> Result<Vec<String>> {
    let (raw, start) = read_share(path, share, shares)?;
    parse(path, &raw, Some(start))
}

/// The text of share `share` of `shares` of a file and the byte it starts at.
pub(crate) fn read_share(path: &Path, share: usize, shares: usize) -> Result<(String, u64)> {
    use std::io::{Read, Seek, SeekFrom};
    assert!(share < shares, "share {share} of {shares}");
    let mut f = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let size = f.metadata().map_err(|e| Error::io(path, e))?.len();
    let start = line_start_at(&mut f, path, size * share as u64 / shares as u64)?;
    let end = line_start_at(&mut f, path, size * (share as u64 + 1) / shares as u64)?;
    let mut bytes = vec![0u8; (end - start) as usize];
    f.seek(SeekFrom::Start(start))
        .and_then(|_| f.read_exact(&mut bytes))
        .map_err(|e| Error::io(path, e))?;
    let raw = String::from_utf8(bytes)
        .map_err(|e| Error::content(path, format!("bytes from {start}: not UTF-8: {e}")))?;
    Ok((raw, start))
}

/// The first line start at or after byte `at` (0 at 0; the file size past the last line).
fn line_start_at(f: &mut std::fs::File, path: &Path, at: u64) -> Result<u64> {
    use std::io::{Read, Seek, SeekFrom};
    if at == 0 {
        return Ok(0);
    }
    // a line starts at `at` when the byte before it is a newline
    f.seek(SeekFrom::Start(at - 1))
        .map_err(|e| Error::io(path, e))?;
    let mut pos = at - 1;
    let mut buf = [0u8; 8192];
    loop {
        let n = f.read(&mut buf).map_err(|e| Error::io(path, e))?;
        if n == 0 {
            return Ok(pos);
        }
        if let Some(k) = buf[..n].iter().position(|&b| b == b'\n') {
            return Ok(pos + k as u64 + 1);
        }
        pos += n as u64;
    }
}

/// The texts of `raw` (a whole file, or a share starting at byte `offset`).
fn parse(path: &Path, raw: &str, offset: Option<u64>) -> Result<Vec<String>> {
    let is_jsonl = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("jsonl"));
    let row_err = |i: usize, message: String| Error::Row {
        path: path.to_path_buf(),
        line: i as u64 + 1,
        message: match offset {
            Some(o) => format!("(line counted from byte {o}) {message}"),
            None => message,
        },
    };
    let mut out = Vec::new();
    for (i, line) in raw.lines().enumerate() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if is_jsonl {
            if line.trim().is_empty() {
                continue;
            }
            let v: serde_json::Value = serde_json::from_str(line)
                .map_err(|e| row_err(i, format!("not valid JSON: {e}")))?;
            let text = v.get("text").and_then(|t| t.as_str()).ok_or_else(|| {
                row_err(i, "expected an object with a string field \"text\"".into())
            })?;
            out.push(text.to_string());
        } else {
            out.push(line.to_string());
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_hold_every_line_once_in_order() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("a.txt");
        let lines: Vec<String> = (0..37)
            .map(|i| "x".repeat(i % 7) + &i.to_string())
            .collect();
        for tail in ["", "\n"] {
            std::fs::write(&p, lines.join("\n") + tail).unwrap();
            let whole = read_sentences(&p).unwrap();
            for shares in 1..9 {
                let joined: Vec<String> = (0..shares)
                    .flat_map(|k| read_sentences_share(&p, k, shares).unwrap())
                    .collect();
                assert_eq!(joined, whole, "{shares} shares, tail {tail:?}");
            }
        }
        // more shares than lines: some are empty, none repeats a line
        std::fs::write(&p, "a\nb\n").unwrap();
        let joined: Vec<String> = (0..5)
            .flat_map(|k| read_sentences_share(&p, k, 5).unwrap())
            .collect();
        assert_eq!(joined, vec!["a", "b"]);
    }

    #[test]
    fn text_and_jsonl() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("a.txt");
        std::fs::write(&p, "one\r\n\ntwo\n").unwrap();
        assert_eq!(read_sentences(&p).unwrap(), vec!["one", "", "two"]);
        let p = d.path().join("a.jsonl");
        std::fs::write(&p, "{\"text\":\"hi\"}\n{\"txt\":1}\n").unwrap();
        let e = read_sentences(&p).unwrap_err().to_string();
        assert!(e.contains("line 2") && e.contains("\"text\""), "{e}");
        let p = d.path().join("e.txt");
        std::fs::write(&p, "\n \n").unwrap();
        assert!(read_sentences(&p)
            .unwrap_err()
            .to_string()
            .contains("no text"));
    }
}
