//! `nest eval --out`: a folder that holds another model's report is not replaced without
//! `--overwrite` (`nest_eval::files::check_replaces_own`); the default folder is the latest
//! evaluation's and is.

use std::path::Path;

use anyhow::Result;

/// `--out`'s default: the latest evaluation, replaced by the next without asking.
pub const LATEST: &str = "reports/latest";

/// Refuses when `out` holds another model's report, unless `overwrite` or `out` is
/// [`LATEST`]. Made before the data and the model load.
pub fn check(out: &Path, model: &str, overwrite: bool) -> Result<()> {
    if overwrite || out == Path::new(LATEST) {
        return Ok(());
    }
    nest_eval::files::check_replaces_own(out, model, ("--out", "--overwrite"))?;
    Ok(())
}
