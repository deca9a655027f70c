//! Progress of long jobs, reported from Rust (the work runs with the GIL released, so nothing
//! here calls back into Python): a bar on a terminal, JSON lines for logs, or nothing.

use std::io::Write;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle as BarStyle};

use crate::error::{Error, Result};

/// How progress is shown (on stderr).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ProgressStyle {
    /// Nothing.
    #[default]
    Off,
    /// A bar with bytes, documents/s, tokens/s and ETA (for terminals).
    Bar,
    /// One JSON object per line, at most once a second and once at the end (for logs).
    JsonLines,
}

impl std::str::FromStr for ProgressStyle {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "none" | "off" => Ok(Self::Off),
            "bar" => Ok(Self::Bar),
            "json" => Ok(Self::JsonLines),
            _ => Err(Error::invalid(format!("unknown progress style {s:?} (expected one of: bar, json, none)"))),
        }
    }
}

/// Counters at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProgressSnapshot {
    /// Input bytes consumed (as stored on disk, i.e. compressed).
    pub bytes: u64,
    /// Documents written.
    pub documents: u64,
    /// Tokens written.
    pub tokens: u64,
}

/// A progress reporter for one job.
pub struct Progress {
    style: ProgressStyle,
    job: &'static str,
    total_bytes: u64,
    start: Instant,
    bar: Option<ProgressBar>,
    last_line: Option<Instant>,
}

/// Least time between two JSON lines.
const LINE_INTERVAL: Duration = Duration::from_secs(1);

fn human(n: f64) -> String {
    match n {
        n if n >= 1e9 => format!("{:.2}G", n / 1e9),
        n if n >= 1e6 => format!("{:.2}M", n / 1e6),
        n if n >= 1e3 => format!("{:.1}k", n / 1e3),
        n => format!("{n:.0}"),
    }
}

impl Progress {
    /// A reporter for `job` over `total_bytes` of input.
    pub fn new(style: ProgressStyle, job: &'static str, total_bytes: u64) -> Self {
        let bar = (style == ProgressStyle::Bar).then(|| {
            let bar = ProgressBar::with_draw_target(Some(total_bytes), ProgressDrawTarget::stderr_with_hz(4));
            // Short enough for an 80-column terminal with room for the bar.
            let template =
                "{prefix} {elapsed_precise} [{wide_bar}] {binary_bytes}/{binary_total_bytes} {msg} ETA {eta}";
            bar.set_style(BarStyle::with_template(template).expect("a valid template").progress_chars("=> "));
            // Names the job: `shuffle` shows one bar per stage.
            bar.set_prefix(job);
            bar
        });
        Self { style, job, total_bytes, start: Instant::now(), bar, last_line: None }
    }

    /// Report `snap` (cheap: rate-limited).
    pub fn update(&mut self, snap: ProgressSnapshot) {
        match self.style {
            ProgressStyle::Off => {}
            ProgressStyle::Bar => {
                if let Some(bar) = &self.bar {
                    let secs = self.start.elapsed().as_secs_f64().max(1e-9);
                    bar.set_message(format!(
                        "{} doc/s {} tok/s",
                        human(snap.documents as f64 / secs),
                        human(snap.tokens as f64 / secs)
                    ));
                    bar.set_position(snap.bytes);
                }
            }
            ProgressStyle::JsonLines => {
                let due = self.last_line.is_none_or(|t| t.elapsed() >= LINE_INTERVAL);
                if due && self.start.elapsed() >= LINE_INTERVAL {
                    self.emit(snap, false);
                }
            }
        }
    }

    /// The job is done: a last JSON line, or the bar removed.
    pub fn finish(&mut self, snap: ProgressSnapshot) {
        match self.style {
            ProgressStyle::Off => {}
            ProgressStyle::Bar => {
                // The caller prints the final figures; a finished bar would only repeat them.
                if let Some(bar) = self.bar.take() {
                    bar.finish_and_clear();
                }
            }
            ProgressStyle::JsonLines => self.emit(snap, true),
        }
    }

    fn emit(&mut self, snap: ProgressSnapshot, done: bool) {
        self.last_line = Some(Instant::now());
        let secs = self.start.elapsed().as_secs_f64().max(1e-9);
        let rate = snap.bytes as f64 / secs;
        let eta = (!done && rate > 0.0).then(|| (self.total_bytes.saturating_sub(snap.bytes)) as f64 / rate);
        let line = serde_json::json!({
            "progress": self.job,
            "done": done,
            "bytes": snap.bytes,
            "total_bytes": self.total_bytes,
            "documents": snap.documents,
            "tokens": snap.tokens,
            "elapsed_s": (secs * 1000.0).round() / 1000.0,
            "mb_per_s": (rate / 1e4).round() / 100.0,
            "docs_per_s": (snap.documents as f64 / secs).round(),
            "tokens_per_s": (snap.tokens as f64 / secs).round(),
            "eta_s": eta.map(|e| e.round()),
        });
        let mut err = std::io::stderr().lock();
        let _ = writeln!(err, "{line}");
        let _ = err.flush();
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        // Stopped by an error or Ctrl-C: leave the bar where it was, on its own line.
        if let Some(bar) = self.bar.take() {
            bar.abandon();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn styles_parse_and_name_the_choices() {
        assert_eq!("json".parse::<ProgressStyle>().unwrap(), ProgressStyle::JsonLines);
        let e = "fancy".parse::<ProgressStyle>().unwrap_err().to_string();
        assert!(e.contains("bar, json, none"), "{e}");
        assert_eq!(human(1_234_567.0), "1.23M");
    }
}
