//! One writer per folder: an advisory lock (`flock`) on a lock file, which the operating system
//! releases when its holder exits, however it exits (a `kill -9` included), so a lock file
//! left behind never blocks the next run.
//!
//! The lock file holds the holder's pid and host, read back only to name them when a second
//! writer is refused. Lock files are never deleted while they may be held (a process that
//! opened the old file and one that created a new one could both "hold" the lock); only
//! [`FolderLock::discard`] removes one it created itself, when the start it guarded failed,
//! and [`FolderLock::remove`] one beside a finished index (still held while it is deleted).

use std::fs::File;
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

use crate::{Error, Result};

/// The name of the lock file inside a run folder.
pub const LOCK_FILE: &str = ".lock";

/// A held lock; dropping it releases the lock (the file stays).
#[derive(Debug)]
pub struct FolderLock {
    file: File,
    path: PathBuf,
    /// The folder this lock created (it did not exist before), for [`FolderLock::discard`].
    created_dir: Option<PathBuf>,
    created_file: bool,
}

impl FolderLock {
    /// Takes the lock of the folder `dir` (its `.lock` file), creating the folder when it is
    /// missing; fails at once when another process holds it, naming that process.
    pub fn take(dir: &Path) -> Result<FolderLock> {
        let created_dir = (!dir.exists()).then(|| dir.to_path_buf());
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let mut lock = Self::take_file(&dir.join(LOCK_FILE), dir)?;
        lock.created_dir = created_dir;
        Ok(lock)
    }

    /// Takes the lock of `target` (a file or a folder that is replaced by rename, such as an
    /// index) through a hidden lock file beside it, `.<name>.lock`.
    pub fn take_beside(target: &Path) -> Result<FolderLock> {
        let name = target
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "out".into());
        let parent = target
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
        Self::take_file(&parent.join(format!(".{name}.lock")), target)
    }

    /// Locks `path`; `guarded` names what the lock protects in the refusal.
    fn take_file(path: &Path, guarded: &Path) -> Result<FolderLock> {
        let created_file = !path.exists();
        // no truncation on open: a refused process must still read the holder's pid
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| Error::io(path, e))?;
        match fs4::FileExt::try_lock(&file) {
            Ok(()) => {}
            Err(fs4::TryLockError::WouldBlock) => {
                let mut holder = String::new();
                let _ = file.read_to_string(&mut holder);
                return Err(Error::content(guarded, busy_message(&holder, path)));
            }
            Err(fs4::TryLockError::Error(e)) => return Err(Error::io(path, e)),
        }
        let me = format!("pid {} on {}\n", std::process::id(), host());
        let written = file
            .set_len(0)
            .and_then(|_| file.rewind())
            .and_then(|_| file.write_all(me.as_bytes()))
            .and_then(|_| file.flush());
        written.map_err(|e| Error::io(path, e))?;
        Ok(FolderLock {
            file,
            path: path.to_path_buf(),
            created_dir: None,
            created_file,
        })
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Releases the lock after a start that wrote nothing else, leaving the disk as it was:
    /// the lock file goes when this lock created it, and so does the folder when this lock
    /// created it and it is empty then.
    pub fn discard(self) {
        if self.created_file {
            let _ = std::fs::remove_file(&self.path);
        }
        if let Some(dir) = &self.created_dir {
            let _ = std::fs::remove_dir(dir); // only when empty
        }
        drop(self.file);
    }
}

impl FolderLock {
    /// Releases the lock after a finished write that leaves nothing to guard (an index renamed
    /// into place): the lock file is deleted while still held, so it does not litter the
    /// folder. A process that opened the file just before and tries it just after could still
    /// take the unlinked file's lock while a third makes a new one; two such starts within
    /// microseconds of a finish are accepted as the price of a clean folder.
    pub fn remove(self) {
        let _ = std::fs::remove_file(&self.path);
        drop(self.file);
    }
}

/// Runs `build` (which writes `target`, an index renamed into place) under the lock beside
/// `target`: refused at once while another process holds it (a build, a server of the index);
/// the lock file goes with a finished build ([`FolderLock::remove`]) and with a failed one that
/// created it ([`FolderLock::discard`]). The outer error is the lock's; the inner, the build's.
pub fn building<T, E>(
    target: &Path,
    build: impl FnOnce() -> std::result::Result<T, E>,
) -> Result<std::result::Result<T, E>> {
    let lock = FolderLock::take_beside(target)?;
    let result = build();
    match result.is_ok() {
        true => lock.remove(),
        false => lock.discard(),
    }
    Ok(result)
}

/// The refusal: who holds the lock, and what to do.
fn busy_message(holder: &str, lock: &Path) -> String {
    let who = match holder.trim() {
        "" => "another process".to_string(),
        h => format!("another process ({h})"),
    };
    format!(
        "in use by {who}: one writer at a time; wait for it to finish or stop it (the lock, {}, \
         is released when that process exits)",
        lock.display()
    )
}

/// This machine's name, for the lock file.
fn host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "this host".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_is_refused_naming_the_holder_and_released_on_drop() {
        let d = tempfile::tempdir().unwrap();
        let run = d.path().join("run");
        let held = FolderLock::take(&run).unwrap();
        // flock locks belong to the open file: a second open in this process conflicts too
        let e = FolderLock::take(&run).unwrap_err().to_string();
        assert!(
            e.contains(&format!("pid {}", std::process::id())) && e.contains("in use"),
            "{e}"
        );
        drop(held);
        let again = FolderLock::take(&run).unwrap();
        drop(again);
        assert!(run.join(LOCK_FILE).exists(), "the lock file stays");
    }

    #[test]
    fn discard_leaves_the_disk_as_it_was() {
        let d = tempfile::tempdir().unwrap();
        let run = d.path().join("new");
        FolderLock::take(&run).unwrap().discard();
        assert!(!run.exists());
        let beside = d.path().join("index");
        FolderLock::take_beside(&beside).unwrap().discard();
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
    }

    /// A build under the lock beside its index: refused while another holder (a server, a
    /// build) has it, without running; the lock file gone after it, finished or failed.
    #[test]
    fn a_build_runs_under_the_lock_beside_its_target() {
        let d = tempfile::tempdir().unwrap();
        let idx = d.path().join("idx");
        let server = FolderLock::take_beside(&idx).unwrap();
        let mut ran = false;
        let e = building(&idx, || -> std::result::Result<(), ()> {
            ran = true;
            Ok(())
        })
        .unwrap_err();
        assert!(!ran && e.to_string().contains("in use"), "{e}");
        drop(server);
        let ok: std::result::Result<u8, ()> = building(&idx, || Ok(7)).unwrap();
        assert_eq!(ok, Ok(7));
        let failed: std::result::Result<u8, &str> = building(&idx, || Err("no")).unwrap();
        assert_eq!(failed, Err("no"));
        assert!(!d.path().join(".idx.lock").exists());
    }
}
