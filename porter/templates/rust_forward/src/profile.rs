//! A tiny profiler: elapsed time is added to one of three buckets at phase boundaries only,
//! never inside a kernel.

use std::time::Instant;

#[derive(Clone, Copy)]
pub enum Phase {
    Matmul = 0,
    Attention = 1,
    Other = 2,
}

pub struct Profile {
    pub ms: [f64; 3],
    mark: Instant,
}

impl Profile {
    pub fn start() -> Self {
        Profile { ms: [0.0; 3], mark: Instant::now() }
    }

    /// Charges the time since the last boundary to `phase`.
    pub fn lap(&mut self, phase: Phase) {
        let now = Instant::now();
        self.ms[phase as usize] += (now - self.mark).as_secs_f64() * 1000.0;
        self.mark = now;
    }
}
