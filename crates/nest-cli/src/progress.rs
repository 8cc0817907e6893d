//! Progress on stderr: a bar on a terminal; in a log (stderr not a terminal: `nohup`, a
//! scheduler, a pipe), where a bar draws nothing, a plain line per running bar every so often
//! (`in_log`), so that a log shows a long job is alive and when it ends.

use std::io::IsTerminal;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle, WeakProgressBar};

/// How often an item bar (texts, documents, cells) writes its line to a log.
pub const ITEMS_EVERY: Duration = Duration::from_secs(10);

/// A progress bar on stderr for `total` items (hidden when stderr is not a terminal or the job is
/// small; a log then gets a line every [`ITEMS_EVERY`]).
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
    in_log(&pb, None, "", ITEMS_EVERY);
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
    in_log(&pb, None, " cells", ITEMS_EVERY);
    pb
}

/// One bar whose state a log gets as a line.
struct Watched {
    bar: WeakProgressBar,
    /// The line's head; `None`: the bar's message is the head (else the message ends the line).
    label: Option<String>,
    unit: &'static str,
    every: Duration,
    /// When the last line was written, and at which position.
    last: (Instant, u64),
    /// Where the rate is measured from: (when, position, length) of the first sample of the
    /// bar's current job (a new length, or a position going back, starts a new one).
    base: Option<(Instant, u64, Option<u64>)>,
}

static WATCHED: OnceLock<Mutex<Vec<Watched>>> = OnceLock::new();

/// When stderr is not a terminal, writes `pb`'s state as a line every `every` while it moves:
/// `label: 1200/5183 unit (23%, 41.2/s, 29 s, eta 97 s) message` (`label` `None`: the
/// message is the head). Nothing on a terminal, where the bar itself is drawn. Lines stop when
/// the bar finishes or is dropped.
pub fn in_log(pb: &ProgressBar, label: Option<&str>, unit: &'static str, every: Duration) {
    if std::io::stderr().is_terminal() || pb.is_finished() {
        return;
    }
    let list = WATCHED.get_or_init(|| {
        std::thread::Builder::new()
            .name("nest-progress".into())
            .spawn(watch)
            .ok();
        Mutex::new(Vec::new())
    });
    let w = Watched {
        bar: pb.downgrade(),
        label: label.map(str::to_string),
        unit,
        every,
        last: (Instant::now(), 0),
        base: None,
    };
    list.lock().unwrap_or_else(|e| e.into_inner()).push(w);
}

/// The watcher thread: once a second, a line for each bar that is due.
fn watch() {
    loop {
        std::thread::sleep(Duration::from_secs(1));
        let Some(list) = WATCHED.get() else { continue };
        let mut list = list.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        list.retain_mut(|w| {
            let Some(pb) = w.bar.upgrade() else {
                return false;
            };
            if pb.is_finished() {
                return false;
            }
            if let Some(line) = w.sample(&pb, now) {
                eprintln!("{line}");
            }
            true
        });
    }
}

impl Watched {
    /// The line due now, if any.
    fn sample(&mut self, pb: &ProgressBar, now: Instant) -> Option<String> {
        let (pos, len) = (pb.position(), pb.length());
        let restart = match self.base {
            None => true,
            Some((_, p, l)) => l != len || pos < p,
        };
        if restart {
            self.base = Some((now, pos, len));
            self.last = (now, pos);
            return None;
        }
        let (t0, p0, _) = self.base?;
        if now.duration_since(self.last.0) < self.every || pos == self.last.1 {
            return None;
        }
        self.last = (now, pos);
        let s = now.duration_since(t0).as_secs_f64();
        let rate = (pos - p0) as f64 / s.max(1e-9);
        let msg = pb.message();
        let (head, tail) = match &self.label {
            Some(l) if msg.is_empty() => (l.clone(), String::new()),
            Some(l) => (l.clone(), format!(" {msg}")),
            None => (msg.clone(), String::new()),
        };
        let of = match len {
            Some(n) if n > 0 => {
                let eta = (n.saturating_sub(pos)) as f64 / rate.max(1e-9);
                let pct = 100.0 * pos as f64 / n as f64;
                format!(
                    "/{n}{} ({pct:.0}%, {}, eta {})",
                    self.unit,
                    per_s(rate),
                    secs(eta)
                )
            }
            _ => format!("{} ({})", self.unit, per_s(rate)),
        };
        Some(format!("{head}: {pos}{of}{tail}"))
    }
}

fn per_s(rate: f64) -> String {
    if rate >= 10.0 {
        format!("{rate:.0}/s")
    } else {
        format!("{rate:.2}/s")
    }
}

/// `97 s`, `12 min`, `3.4 h`.
fn secs(s: f64) -> String {
    if !s.is_finite() {
        "?".into()
    } else if s < 120.0 {
        format!("{s:.0} s")
    } else if s < 7200.0 {
        format!("{:.0} min", s / 60.0)
    } else {
        format!("{:.1} h", s / 3600.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_line_says_where_a_job_is_how_fast_and_how_long_it_has_left() {
        let pb = ProgressBar::hidden();
        pb.set_length(1000);
        pb.set_message("corpus");
        let t0 = Instant::now();
        let mut w = Watched {
            bar: pb.downgrade(),
            label: None,
            unit: " texts",
            every: Duration::from_secs(10),
            last: (t0, 0),
            base: None,
        };
        assert_eq!(
            w.sample(&pb, t0),
            None,
            "the first sample only starts the clock"
        );
        pb.set_position(100);
        assert_eq!(w.sample(&pb, t0 + Duration::from_secs(5)), None, "not due");
        let line = w.sample(&pb, t0 + Duration::from_secs(10));
        assert_eq!(
            line.as_deref(),
            Some("corpus: 100/1000 texts (10%, 10/s, eta 90 s)")
        );
        assert_eq!(w.sample(&pb, t0 + Duration::from_secs(25)), None, "no move");
        // a new job on the same bar (a distillation's second stage) measures afresh
        pb.set_length(50);
        pb.set_position(0);
        pb.set_message("loss 0.5");
        w.label = Some("train".into());
        assert_eq!(w.sample(&pb, t0 + Duration::from_secs(30)), None);
        pb.set_position(2);
        let line = w.sample(&pb, t0 + Duration::from_secs(70));
        assert_eq!(
            line.as_deref(),
            Some("train: 2/50 texts (4%, 0.05/s, eta 16 min) loss 0.5")
        );
    }
}
