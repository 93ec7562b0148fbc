//! Per-phase device timing of a join, printed when `GPUJOIN_TRACE` is set (events are recorded
//! only then, so untraced joins pay nothing).

use gpujoin_device::{Event, Stream};

pub(crate) struct Phases {
    stream: Stream,
    name: &'static str,
    marks: Vec<(&'static str, Event)>,
    enabled: bool,
}

impl Phases {
    pub fn new(stream: &Stream, name: &'static str) -> Phases {
        let enabled = std::env::var_os("GPUJOIN_TRACE").is_some_and(|v| v != "0");
        let mut p = Phases { stream: stream.clone(), name, marks: Vec::new(), enabled };
        p.mark("start");
        p
    }

    /// Ends the phase that began at the previous mark.
    pub fn mark(&mut self, phase: &'static str) {
        if !self.enabled {
            return;
        }
        if let Ok(e) = Event::new(self.stream.device(), true) {
            if e.record(&self.stream).is_ok() {
                self.marks.push((phase, e));
            }
        }
    }
}

impl Drop for Phases {
    fn drop(&mut self) {
        if !self.enabled || self.marks.len() < 2 {
            return;
        }
        self.mark("end");
        let last = &self.marks[self.marks.len() - 1].1;
        if last.synchronize().is_err() {
            return;
        }
        let mut line = format!("TRACE {}:", self.name);
        for w in self.marks.windows(2) {
            if let Ok(ms) = w[0].1.elapsed_ms(&w[1].1) {
                line.push_str(&format!(" {} {:.3} ms;", w[1].0, ms));
            }
        }
        if let Ok(total) = self.marks[0].1.elapsed_ms(last) {
            line.push_str(&format!(" total {total:.3} ms"));
        }
        eprintln!("{line}");
    }
}
