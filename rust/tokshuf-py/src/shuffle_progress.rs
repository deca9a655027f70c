//! Drawing the progress of a shuffle on stderr: a bar for terminals, JSON lines for logs.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tokshuf_core::shuffle::{Progress, Snapshot};
use tokshuf_core::Error;

/// How progress is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// Nothing.
    None,
    /// One line redrawn in place (for a terminal).
    Bar,
    /// A JSON object per line every few seconds (for logs).
    Json,
}

impl std::str::FromStr for Style {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        match s {
            "none" => Ok(Self::None),
            "bar" => Ok(Self::Bar),
            "json" => Ok(Self::Json),
            _ => Err(Error::invalid(format!("unknown progress style {s:?} (expected one of: none, bar, json)"))),
        }
    }
}

fn bar(fraction: f64, width: usize) -> String {
    let filled = ((fraction.clamp(0.0, 1.0) * width as f64).round() as usize).min(width);
    format!("[{}{}]", "#".repeat(filled), " ".repeat(width - filled))
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

/// Rates since the stage started.
struct Rates {
    stage: u64,
    since: Instant,
    tokens0: u64,
    bytes0: u64,
}

impl Rates {
    fn update(&mut self, s: &Snapshot) -> (f64, f64) {
        if s.stage != self.stage {
            *self = Rates { stage: s.stage, since: Instant::now(), tokens0: s.tokens, bytes0: s.bytes_written };
        }
        let secs = self.since.elapsed().as_secs_f64().max(1e-3);
        ((s.tokens - self.tokens0) as f64 / secs, (s.bytes_written - self.bytes0) as f64 / secs)
    }
}

fn line(s: &Snapshot, tok_rate: f64, write_rate: f64) -> String {
    match s.stage {
        1 => format!(
            "stage 1/2 cells  {} {:5.1}% {:.0}/{:.0} MB  files {}/{}  {} contexts  {:.2} Mtok/s",
            bar(ratio(s.input_bytes_read, s.input_bytes_total), 24),
            100.0 * ratio(s.input_bytes_read, s.input_bytes_total),
            s.input_bytes_read as f64 / 1e6,
            s.input_bytes_total as f64 / 1e6,
            s.files_done,
            s.files_total,
            s.contexts,
            tok_rate / 1e6
        ),
        2 => format!(
            "stage 2/2 shards {} {}/{} shards  cells {}/{}  {:.0} MB/s",
            bar(ratio(s.shards_done, s.shards_total), 24),
            s.shards_done,
            s.shards_total,
            s.cells_done,
            s.cells_total,
            write_rate / 1e6
        ),
        _ => String::new(),
    }
}

/// Draw `progress` on stderr until `done` is set.
pub fn report(progress: &Progress, done: &AtomicBool, style: Style) {
    if style == Style::None {
        return;
    }
    let period = if style == Style::Bar { Duration::from_millis(250) } else { Duration::from_secs(5) };
    let started = Instant::now();
    let mut rates = Rates { stage: 0, since: started, tokens0: 0, bytes0: 0 };
    let mut last = Instant::now() - period;
    let mut drew = false;
    let mut stderr = std::io::stderr();
    loop {
        let finished = done.load(Ordering::Acquire);
        if finished || last.elapsed() >= period {
            last = Instant::now();
            let s = progress.snapshot();
            if drew && s.stage != rates.stage && style == Style::Bar {
                // Keep the finished stage's line on screen.
                let _ = writeln!(stderr);
            }
            let (tok_rate, write_rate) = rates.update(&s);
            let _ = match style {
                Style::Bar if s.stage == 1 || s.stage == 2 => {
                    drew = true;
                    write!(stderr, "\r{}\x1b[K", line(&s, tok_rate, write_rate))
                }
                Style::Json if s.stage > 0 => {
                    let mut v = serde_json::to_value(s).unwrap_or_default();
                    v["elapsed"] = serde_json::json!(started.elapsed().as_secs_f64());
                    v["tokens_per_second"] = serde_json::json!(tok_rate);
                    writeln!(stderr, "{v}")
                }
                _ => Ok(()),
            };
            let _ = stderr.flush();
        }
        if finished {
            if drew {
                let _ = writeln!(stderr);
            }
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
