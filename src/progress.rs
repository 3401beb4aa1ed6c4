//! Progress display that suits both a terminal and cron.
//!
//! On a terminal, jobs show indicatif bars on stderr. Anywhere else (cron, CI, a pipe) bars are
//! hidden and jobs log plain lines instead, so mailed output stays readable. `-q` hides bars
//! everywhere.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

static QUIET: AtomicBool = AtomicBool::new(false);

/// Called once by the CLI from `-q`.
pub fn set_quiet(quiet: bool) {
    QUIET.store(quiet, Ordering::Relaxed);
}

/// Whether bars are drawn at all.
pub fn enabled() -> bool {
    !QUIET.load(Ordering::Relaxed) && std::io::stderr().is_terminal()
}

/// A byte-progress bar (hidden unless [`enabled`]).
pub fn bytes(total: u64, message: &str) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(Some(total), draw_target());
    bar.set_style(
        ProgressStyle::with_template(
            "{msg:>10} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    bar.set_message(message.to_string());
    bar
}

/// A count-progress bar (hidden unless [`enabled`]).
pub fn count(total: u64, message: &str) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(Some(total), draw_target());
    bar.set_style(
        ProgressStyle::with_template(
            "{msg:>10} [{bar:30}] {human_pos}/{human_len} {per_sec} eta {eta}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    bar.set_message(message.to_string());
    bar
}

fn draw_target() -> ProgressDrawTarget {
    if enabled() {
        ProgressDrawTarget::stderr()
    } else {
        ProgressDrawTarget::hidden()
    }
}
