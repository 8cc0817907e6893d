use indicatif::{ProgressBar, ProgressStyle};

/// A progress bar on stderr for `total` items (hidden when stderr is not a terminal or the job is
/// small).
pub fn bar(total: usize, what: &str) -> ProgressBar {
    if total > 0 && total < 256 {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::new(total as u64);
    pb.set_style(
        ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} ({per_sec}, eta {eta})")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    pb.set_message(what.to_string());
    pb
}

/// A bar for the cells of one task (always shown on a terminal: cells can be slow).
pub fn cells_bar(total: usize, task: &str) -> ProgressBar {
    let pb = ProgressBar::new(total as u64);
    pb.set_style(
        ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} cells (eta {eta})")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    pb.set_message(task.to_string());
    pb
}
