//! Writing a report to a folder: `report.json`, `report.md` and the plots. Its own module so
//! that the report (data) and the plots (which read it) do not import each other.

use std::path::{Path, PathBuf};

use crate::report::Report;
use crate::{Error, Result};

impl Report {
    /// Writes `report.json`, `report.md` and the plots into `dir`; returns the paths.
    pub fn write(&self, dir: &Path) -> Result<Vec<PathBuf>> {
        let json = serde_json::to_string_pretty(self).map_err(|e| Error::Report(e.to_string()))?;
        let mut written = Vec::new();
        let p = dir.join("report.json");
        nest_core::fsutil::write_atomic(&p, json.as_bytes())?;
        written.push(p);
        let p = dir.join("report.md");
        nest_core::fsutil::write_atomic(&p, self.markdown().as_bytes())?;
        written.push(p);
        written.extend(crate::plots::write_all(self, dir)?);
        Ok(written)
    }
}
