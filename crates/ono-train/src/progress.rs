//! Progress reporting: an indicatif bar (epoch, step, loss, lr, it/s, ETA) on a terminal, plain
//! log lines otherwise (CI logs, files), or nothing.

use std::io::IsTerminal;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Where progress goes.
pub enum Progress {
    /// A bar on stderr.
    Bar(ProgressBar),
    /// One line per report on stderr.
    Lines {
        /// When the run (or its resumed part) started.
        start: Instant,
        /// Steps at that moment.
        first_step: u64,
        /// Total steps.
        total: u64,
    },
    /// Silent (library use, tests).
    Quiet,
}

impl Progress {
    /// A bar when stderr is a terminal, lines otherwise.
    pub fn auto(total_steps: u64, done: u64) -> Self {
        if std::io::stderr().is_terminal() {
            let bar =
                ProgressBar::with_draw_target(Some(total_steps), ProgressDrawTarget::stderr());
            let style = ProgressStyle::with_template(
                "{prefix} [{bar:30}] {pos}/{len} {msg} {per_sec} ETA {eta}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
            bar.set_style(style);
            bar.set_position(done);
            bar.reset_eta();
            Progress::Bar(bar)
        } else {
            Progress::Lines {
                start: Instant::now(),
                first_step: done,
                total: total_steps,
            }
        }
    }

    /// Reports the state after `step` batches.
    pub fn update(&self, epoch: u64, epochs: u64, step: u64, loss: f64, lr: f64) {
        match self {
            Progress::Bar(bar) => {
                bar.set_prefix(format!("epoch {}/{epochs}", epoch + 1));
                bar.set_position(step);
                bar.set_message(format!("loss {loss:.4e} lr {lr:.2e}"));
            }
            Progress::Lines {
                start,
                first_step,
                total,
            } => {
                let dt = start.elapsed().as_secs_f64();
                let done = step.saturating_sub(*first_step) as f64;
                let rate = if dt > 0.0 { done / dt } else { 0.0 };
                let eta = if rate > 0.0 {
                    (*total - step) as f64 / rate
                } else {
                    f64::NAN
                };
                eprintln!(
                    "epoch {}/{epochs} step {step}/{total} loss {loss:.4e} lr {lr:.2e} {rate:.2} it/s ETA {eta:.0} s",
                    epoch + 1
                );
            }
            Progress::Quiet => {}
        }
    }

    /// Prints a message without breaking the bar.
    pub fn println(&self, msg: &str) {
        match self {
            Progress::Bar(bar) => bar.println(msg),
            Progress::Lines { .. } => eprintln!("{msg}"),
            Progress::Quiet => {}
        }
    }

    /// Ends the bar.
    pub fn finish(&self) {
        if let Progress::Bar(bar) = self {
            bar.finish();
        }
    }
}
