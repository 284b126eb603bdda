//! Load shedding: a request has a time budget from the handler's start, below the host's timeout.
//! Between its units of work (a model window, one input of a batch) the units still to run are
//! estimated at the pace of the last one (which tells the machine's current load); a request that
//! would finish past its budget stops there and answers 503 with Retry-After (see `go_on`). Under
//! a load the machine cannot carry, requests give up early (after a unit, not at the deadline)
//! and leave the processor to the ones that can still finish, and no request is killed mid-unit
//! by the host, which a client would see as an HTML 500.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::time::{Duration, Instant};

use crate::error::ApiError;

/// Whether to run the `remaining` of `total` units (`unit`: their plural name), at the pace of
/// the last one (before the first, only the time spent so far counts): yes if they end within
/// `budget_ms`; no (503) once the budget is spent; in between, with the probability that the
/// time left covers the time they need. Under an N-fold overload each request then goes on with
/// a probability of about 1/N: about as many go on as the machine can carry, and they speed up
/// as the others leave, instead of all giving up together after their first unit. Retry-After is
/// the time the whole request takes at that pace, about when the requests running now will have
/// finished or given up.
pub fn go_on(request_started: Instant, last: Duration, remaining: usize, total: usize, unit: &str, budget_ms: u64) -> Result<(), ApiError> {
    let elapsed = request_started.elapsed();
    let needed = last * remaining as u32;
    let budget = Duration::from_millis(budget_ms);
    if elapsed + needed <= budget {
        return Ok(());
    }
    let left = budget.saturating_sub(elapsed);
    let chance = if needed.is_zero() { 0.0 } else { left.as_secs_f64() / needed.as_secs_f64() };
    if uniform() < chance {
        return Ok(());
    }
    let mut busy = ApiError::new(
        503,
        format!(
            "the service is too busy to finish this request in time: its {total} {unit} would take until about \
             {} ms, past its budget of {budget_ms} ms; retry later",
            (elapsed + needed).as_millis()
        ),
    );
    let pace = (last * total as u32).as_secs_f64().ceil() as u64;
    busy.retry_after_s = Some(pace.clamp(1, budget_ms.div_ceil(1000)));
    Err(busy)
}

/// A number in [0, 1) from the host's randomness (std seeds RandomState from wasi's random_get),
/// different in every instance: requests under the same load must not all decide alike.
fn uniform() -> f64 {
    (RandomState::new().build_hasher().finish() >> 11) as f64 / (1u64 << 53) as f64
}
