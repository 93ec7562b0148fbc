//! Progress on stderr (indicatif), only when stderr is a terminal: bars and spinners are hidden
//! otherwise, so that logs and pipes see the one-line summaries only.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

fn shown() -> bool {
    std::io::stderr().is_terminal()
}

/// A bar of `len` steps named `message` (hidden when stderr is not a terminal).
pub fn bar(len: u64, message: &str) -> ProgressBar {
    if !shown() {
        return ProgressBar::hidden();
    }
    let b = ProgressBar::new(len);
    if let Ok(style) = ProgressStyle::with_template("{msg:>12} [{bar:30}] {pos}/{len} {elapsed}") {
        b.set_style(style.progress_chars("=> "));
    }
    b.set_message(message.to_string());
    b
}

/// A spinner named `message`, ticking by itself (hidden when stderr is not a terminal).
pub fn spinner(message: &str) -> ProgressBar {
    if !shown() {
        return ProgressBar::hidden();
    }
    let s = ProgressBar::new_spinner();
    if let Ok(style) = ProgressStyle::with_template("{spinner} {msg} {elapsed}") {
        s.set_style(style);
    }
    s.set_message(message.to_string());
    s.enable_steady_tick(Duration::from_millis(120));
    s
}
