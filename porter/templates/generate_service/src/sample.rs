//! Choosing the next token from the logits.
//!
//! temperature 0: greedy, the first largest logit (numpy's argmax, as the decoder crate does).
//! Otherwise: the candidates are the top_k largest logits (0 = all of them), largest first and
//! lower ids first among equal logits; token i gets weight exp((logit_i - max) / temperature) in
//! f64 (softmax without its normalisation). With top_p < 1 only the shortest run of candidates
//! whose weights, summed in that order, reach top_p * total stays (nucleus sampling; top_p 1
//! skips the step, so it changes nothing). One uniform draw u in [0, 1) picks the first candidate
//! whose running weight sum exceeds u * the kept total.
//!
//! The PRNG is SplitMix64 (Steele, Lea and Flood 2014) with its state set to the request's seed;
//! each sampled token takes one 64-bit output, whose top 53 bits / 2^53 give u. Same seed, same
//! prompt and same parameters give the same tokens on every platform.

use decoder::decoder::argmax;

pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64 { state: seed }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[derive(Clone, Copy)]
pub struct Sampling {
    pub temperature: f64,
    pub top_k: usize,
    /// In (0, 1]; 1 keeps every candidate.
    pub top_p: f64,
}

pub fn choose(logits: &[f32], sampling: &Sampling, rng: &mut SplitMix64) -> u32 {
    if sampling.temperature == 0.0 {
        return argmax(logits);
    }
    let mut order: Vec<u32> = (0..logits.len() as u32).collect();
    // Stable: equal logits keep their id order.
    order.sort_by(|&a, &b| logits[b as usize].total_cmp(&logits[a as usize]));
    if sampling.top_k > 0 {
        order.truncate(sampling.top_k);
    }
    let max = f64::from(logits[order[0] as usize]);
    let mut weights: Vec<f64> =
        order.iter().map(|&i| ((f64::from(logits[i as usize]) - max) / sampling.temperature).exp()).collect();
    if sampling.top_p < 1.0 {
        let nucleus = nucleus_length(&weights, sampling.top_p);
        weights.truncate(nucleus);
        order.truncate(nucleus);
    }
    let target = rng.next_f64() * weights.iter().sum::<f64>();
    let mut running = 0.0;
    for (&id, &w) in order.iter().zip(&weights) {
        running += w;
        if running > target {
            return id;
        }
    }
    // Only reached through rounding in the sum: the last candidate.
    *order.last().unwrap()
}

/// How many leading weights it takes for their running sum to reach top_p of the total (at
/// least one: the largest weight alone may already be more than top_p).
fn nucleus_length(weights: &[f64], top_p: f64) -> usize {
    let needed = top_p * weights.iter().sum::<f64>();
    let mut running = 0.0;
    for (n, &w) in weights.iter().enumerate() {
        running += w;
        if running >= needed {
            return n + 1;
        }
    }
    weights.len()
}
