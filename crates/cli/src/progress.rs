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

/// Rows read from files, shown while they are read (a bar when the files' metadata gives their
/// rows, else a spinner with the count); updated from the readers' counters by a thread.
pub struct Reading {
    bar: ProgressBar,
    done: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Starts showing the rows `files` have read.
pub fn reading(files: &[&crate::files::FileReader]) -> Reading {
    use std::sync::atomic::{AtomicBool, Ordering};
    let total: u64 = files.iter().map(|f| f.rows_hint()).sum();
    let bar = if total > 0 && files.iter().all(|f| f.rows_hint() > 0) { self::bar(total, "reading") } else { spinner("reading") };
    let done = std::sync::Arc::new(AtomicBool::new(false));
    let thread = (!bar.is_hidden()).then(|| {
        let counters: Vec<_> = files.iter().map(|f| f.counters()).collect();
        let (bar, done) = (bar.clone(), std::sync::Arc::clone(&done));
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                let rows: u64 = counters.iter().map(|c| c.rows()).sum();
                bar.set_position(rows);
                if bar.length().is_none() {
                    bar.set_message(format!("reading: {rows} rows"));
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        })
    });
    Reading { bar, done, thread }
}

impl Reading {
    pub fn finish(mut self) {
        self.done.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.bar.finish_and_clear();
    }
}
