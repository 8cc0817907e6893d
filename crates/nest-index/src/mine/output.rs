//! The output of a mining run, written so that `kill -9` then the same command again ends with
//! exactly the uninterrupted run's file, no line lost or written twice:
//!
//! - lines go to `OUT.partial` a chunk of queries at a time, each chunk appended whole and
//!   synced, then `OUT.mine-state.json` (atomic rename) records how many queries, lines and
//!   bytes are done and a key of everything that decides the output (inputs' hashes, model,
//!   point, options);
//! - on start, a state with the same key resumes: `OUT.partial` is cut back to the recorded
//!   bytes (dropping a chunk a kill tore) and mining goes on after the recorded queries; a
//!   state with another key is refused (the command changed) unless `overwrite`;
//! - at the end the state is removed and `OUT.partial` renamed to `OUT`, so `OUT` appears only
//!   complete; an existing `OUT` is refused unless `overwrite`.
//!
//! One writer at a time: a lock beside `OUT` (`nest_core::lock`), released by the OS on death.

use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use nest_core::lock::FolderLock;
use serde::{Deserialize, Serialize};

use crate::{Error, Result};

const FORMAT: &str = "nest-mine-state";
const VERSION: u32 = 1;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
struct State {
    format: String,
    version: u32,
    key: String,
    queries_done: usize,
    lines: u64,
    bytes: u64,
}

/// `OUT` with `suffix` appended to its file name.
fn beside(out: &Path, suffix: &str) -> PathBuf {
    let mut name = out.file_name().unwrap_or_default().to_os_string();
    name.push(suffix);
    out.with_file_name(name)
}

/// The partial file and the state file of `out`.
pub fn work_files(out: &Path) -> (PathBuf, PathBuf) {
    (beside(out, ".partial"), beside(out, ".mine-state.json"))
}

/// An output being written (module doc).
#[derive(Debug)]
pub struct ResumableOutput {
    out: PathBuf,
    partial: PathBuf,
    state_path: PathBuf,
    file: File,
    state: State,
    lock: FolderLock,
}

fn read_state(path: &Path) -> Result<Option<State>> {
    if !path.exists() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    let s: State = serde_json::from_str(&text)
        .map_err(|e| Error::corrupt(path, format!("not a mining state file: {e}")))?;
    if s.format != FORMAT || s.version != VERSION {
        return Err(Error::corrupt(
            path,
            format!(
                "format '{}' version {}, expected '{FORMAT}' version {VERSION}",
                s.format, s.version
            ),
        ));
    }
    Ok(Some(s))
}

/// The checks of [`ResumableOutput::open`] (under the lock) and the partial file, cut back to
/// the state's bytes.
fn start(
    out: &Path,
    partial: &Path,
    state_path: &Path,
    key: &str,
    overwrite: bool,
) -> Result<(File, State)> {
    if overwrite {
        for p in [out, partial, state_path] {
            if p.exists() {
                std::fs::remove_file(p).map_err(|e| Error::io(p, e))?;
            }
        }
    }
    if out.exists() {
        return Err(Error::invalid(
            "--output",
            format!(
                "{} exists (a finished run); pass --overwrite to mine again",
                out.display()
            ),
        ));
    }
    let state = state_to_resume(partial, state_path, key)?;
    let mut file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(partial)
        .map_err(|e| Error::io(partial, e))?;
    let len = file.metadata().map_err(|e| Error::io(partial, e))?.len();
    if len < state.bytes {
        return Err(Error::corrupt(
            partial,
            format!(
                "{len} bytes, but {} records {} written; pass --overwrite to start again",
                state_path.display(),
                state.bytes
            ),
        ));
    }
    file.set_len(state.bytes)
        .map_err(|e| Error::io(partial, e))?;
    file.seek(SeekFrom::Start(state.bytes))
        .map_err(|e| Error::io(partial, e))?;
    Ok((file, state))
}

/// The recorded state when it is this command's (same key) and its partial file exists, a
/// fresh one when there is none; another command's is refused.
fn state_to_resume(partial: &Path, state_path: &Path, key: &str) -> Result<State> {
    match read_state(state_path)? {
        Some(s) if s.key == key && partial.exists() => Ok(s),
        Some(s) if s.key != key => Err(Error::invalid(
            "--output",
            format!(
                "{} records an unfinished run of another command (other inputs, model, point \
                 or options); rerun that command to finish it, or pass --overwrite to start \
                 this one",
                state_path.display()
            ),
        )),
        _ => Ok(State {
            format: FORMAT.into(),
            version: VERSION,
            key: key.into(),
            queries_done: 0,
            lines: 0,
            bytes: 0,
        }),
    }
}

impl ResumableOutput {
    /// Opens `out` for a run whose settings hash to `key`: fresh, or resumed (module doc).
    pub fn open(out: &Path, key: &str, overwrite: bool) -> Result<Self> {
        let lock = FolderLock::take_beside(out)?;
        let (partial, state_path) = work_files(out);
        let (file, state) = match start(out, &partial, &state_path, key, overwrite) {
            Ok(x) => x,
            Err(e) => {
                lock.discard(); // a refused start leaves no lock file of its own
                return Err(e);
            }
        };
        let o = ResumableOutput {
            out: out.to_path_buf(),
            partial,
            state_path,
            file,
            state,
            lock,
        };
        o.save_state()?;
        Ok(o)
    }

    fn save_state(&self) -> Result<()> {
        let text = serde_json::to_string_pretty(&self.state)
            .map_err(|e| Error::invalid("state", e.to_string()))?;
        nest_core::fsutil::write_atomic(&self.state_path, text.as_bytes())?;
        Ok(())
    }

    /// Queries whose lines are already written (0 for a fresh run).
    pub fn queries_done(&self) -> usize {
        self.state.queries_done
    }

    /// Lines already written.
    pub fn lines(&self) -> u64 {
        self.state.lines
    }

    /// Appends a chunk's `text` (`lines` whole lines) that brings the run to `queries_done`.
    pub fn append(&mut self, text: &str, lines: u64, queries_done: usize) -> Result<()> {
        let p = &self.partial;
        self.file
            .write_all(text.as_bytes())
            .map_err(|e| Error::io(p, e))?;
        self.file.sync_data().map_err(|e| Error::io(p, e))?;
        self.state.bytes += text.len() as u64;
        self.state.lines += lines;
        self.state.queries_done = queries_done;
        self.save_state()
    }

    /// Leaves the finished work files for [`merge_parts`] (a part of a run split by rank: a
    /// rerun finds every query done) and releases the lock.
    pub fn keep(self) -> Result<()> {
        self.file
            .sync_all()
            .map_err(|e| Error::io(&self.partial, e))?;
        self.lock.remove();
        Ok(())
    }

    /// Removes the state and renames the partial file to the output.
    pub fn finish(self) -> Result<PathBuf> {
        self.file
            .sync_all()
            .map_err(|e| Error::io(&self.partial, e))?;
        std::fs::remove_file(&self.state_path).map_err(|e| Error::io(&self.state_path, e))?;
        std::fs::rename(&self.partial, &self.out).map_err(|e| Error::io(&self.out, e))?;
        self.lock.remove(); // nothing left to guard: no lock file stays beside the output
        Ok(self.out)
    }
}

/// One process's part of a run split by rank: its output path (whose work files hold the
/// lines), the key it was written under and how many queries it holds.
#[derive(Debug, Clone)]
pub struct Part {
    pub out: PathBuf,
    pub key: String,
    pub queries: usize,
}

/// Joins finished parts ([`ResumableOutput::keep`]), in order, into `out`: each part's recorded
/// bytes are copied into `OUT.merging`, which is synced and renamed to `out`; the parts' work
/// files are removed after. A part not finished under its key is refused (nothing is written).
/// A kill before the rename leaves the parts whole (the next run merges again). Returns the
/// lines written.
pub fn merge_parts(out: &Path, parts: &[Part]) -> Result<u64> {
    let mut states = Vec::with_capacity(parts.len());
    for p in parts {
        let (partial, state_path) = work_files(&p.out);
        let s = read_state(&state_path)?.ok_or_else(|| {
            Error::invalid("--output", format!("{}: missing", state_path.display()))
        })?;
        if s.key != p.key || s.queries_done != p.queries {
            return Err(Error::invalid(
                "--output",
                format!(
                    "{} records {} of another run's queries, not this part's {}",
                    state_path.display(),
                    s.queries_done,
                    p.queries
                ),
            ));
        }
        states.push((partial, state_path, s));
    }
    let tmp = beside(out, ".merging");
    let mut w = File::create(&tmp).map_err(|e| Error::io(&tmp, e))?;
    let mut lines = 0;
    for (partial, _, s) in &states {
        let f = File::open(partial).map_err(|e| Error::io(partial, e))?;
        let copied = std::io::copy(&mut std::io::Read::take(f, s.bytes), &mut w)
            .map_err(|e| Error::io(&tmp, e))?;
        if copied != s.bytes {
            return Err(Error::corrupt(
                partial,
                format!("{copied} bytes, its state records {}", s.bytes),
            ));
        }
        lines += s.lines;
    }
    w.sync_all().map_err(|e| Error::io(&tmp, e))?;
    drop(w);
    std::fs::rename(&tmp, out).map_err(|e| Error::io(out, e))?;
    for (partial, state_path, _) in &states {
        for f in [state_path, partial] {
            std::fs::remove_file(f).map_err(|e| Error::io(f, e))?;
        }
    }
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resumes_cuts_a_torn_chunk_and_refuses_other_runs() {
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join("t.jsonl");
        let mut o = ResumableOutput::open(&out, "k", false).unwrap();
        o.append("a\nb\n", 2, 1).unwrap();
        drop(o);
        // a kill in the middle of the next chunk: bytes past the state
        let (partial, state) = work_files(&out);
        std::fs::OpenOptions::new()
            .append(true)
            .open(&partial)
            .unwrap()
            .write_all(b"c\nd")
            .unwrap();
        let e = ResumableOutput::open(&out, "other", false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("another command"), "{e}");
        let mut o = ResumableOutput::open(&out, "k", false).unwrap();
        assert_eq!((o.queries_done(), o.lines()), (1, 2));
        o.append("c\n", 1, 2).unwrap();
        assert_eq!(o.finish().unwrap(), out);
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "a\nb\nc\n");
        assert!(!state.exists() && !partial.exists());
        assert!(
            !d.path().join(".t.jsonl.lock").exists(),
            "no lock file left"
        );
        let e = ResumableOutput::open(&out, "k", false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("--overwrite"), "{e}");
        let o = ResumableOutput::open(&out, "k", true).unwrap();
        assert_eq!(o.queries_done(), 0);
        assert!(!out.exists());
    }

    #[test]
    fn parts_merge_in_order_and_leave_nothing() {
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join("t.jsonl");
        let parts: Vec<Part> = (0..3)
            .map(|r| Part {
                out: d.path().join(format!("t.part-{r}")),
                key: format!("k{r}"),
                queries: r,
            })
            .collect();
        for (r, p) in parts.iter().enumerate() {
            let mut o = ResumableOutput::open(&p.out, &p.key, false).unwrap();
            for q in 0..r {
                o.append(&format!("{r}.{q}\n"), 1, q + 1).unwrap();
            }
            o.keep().unwrap();
            // a rerun of a kept part finds it done
            let o = ResumableOutput::open(&p.out, &p.key, false).unwrap();
            assert_eq!(o.queries_done(), r);
            o.keep().unwrap();
        }
        let mut bad = parts.clone();
        bad[1].key = "other".into();
        assert!(merge_parts(&out, &bad).is_err());
        assert!(!out.exists());
        assert_eq!(merge_parts(&out, &parts).unwrap(), 3);
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "1.0\n2.0\n2.1\n");
        let left: Vec<_> = std::fs::read_dir(d.path()).unwrap().collect();
        assert_eq!(left.len(), 1, "{left:?}");
    }
}
