//! TensorBoard event files next to `metrics.jsonl` (rank 0 only), through the
//! `syntaxdot-summary` crate: `tensorboard --logdir runs/<name>/tensorboard` shows the loss,
//! each named term, the learning rate, the gradient norm, communication and every evaluated
//! (layer, dim) cell. A resumed run starts a new event file in the same folder.

use std::path::{Path, PathBuf};

use syntaxdot_summary::SummaryWriter;

use crate::Result;

pub(crate) struct Board {
    path: PathBuf,
    /// Unbuffered: every record reaches the file when written, so a crash loses nothing.
    writer: SummaryWriter<std::fs::File>,
}

impl Board {
    /// Opens a new event file under `run/tensorboard/` (TensorBoard's own naming:
    /// `events.out.tfevents.<unix seconds>.<pid>`).
    pub(crate) fn open(run: &Path) -> Result<Board> {
        let dir = run.join("tensorboard");
        std::fs::create_dir_all(&dir).map_err(|e| nest_core::Error::io(&dir, e))?;
        let secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let path = dir.join(format!(
            "events.out.tfevents.{secs}.nest-{}",
            std::process::id()
        ));
        let file = std::fs::File::create(&path).map_err(|e| nest_core::Error::io(&path, e))?;
        let writer = SummaryWriter::new(file).map_err(|e| nest_core::Error::io(&path, e))?;
        Ok(Board { path, writer })
    }

    /// Scalars of one step.
    pub(crate) fn write(&mut self, step: u64, scalars: &[(String, f64)]) -> Result<()> {
        for (tag, v) in scalars {
            self.writer
                .write_scalar(tag.as_str(), step as i64, *v as f32)
                .map_err(|e| nest_core::Error::io(&self.path, e))?;
        }
        Ok(())
    }

    /// A JSON object of numbers (a metrics line's `terms`, an eval's cells) under `prefix/`.
    pub(crate) fn write_object(
        &mut self,
        step: u64,
        prefix: &str,
        values: &serde_json::Value,
    ) -> Result<()> {
        let scalars: Vec<(String, f64)> = values
            .as_object()
            .into_iter()
            .flatten()
            .filter_map(|(k, v)| Some((format!("{prefix}/{k}"), v.as_f64()?)))
            .collect();
        self.write(step, &scalars)
    }
}
