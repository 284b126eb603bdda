//! Sums in Eigen's SSE order, as LiteRT's MEAN and SOFTMAX compute them.
//!
//! Eigen adds 4-lane packets into two accumulators (even and odd packets), combines them, adds
//! one more packet if an odd one is left, reduces the packet as (p0 + p2) + (p1 + p3), then adds
//! the elements that do not fill a packet one by one. Packets start at the first 16-byte
//! boundary: a row that starts `head` values before one (a MEAN row of a width that is not a
//! multiple of four) has those values added after the packets (`eigen_sum_from`). A 4-lane
//! f32x4 follows that order exactly, so the SIMD version is the same computation, not an
//! approximation of it.

use core::arch::wasm32::*;

const PACKET: usize = 4;

/// Scalar reference: the packets as [f32; 4] arrays.
pub fn eigen_sum_scalar(x: &[f32]) -> f32 {
    eigen_sum_from_scalar(x, 0)
}

/// The same order with f32x4 packets.
pub fn eigen_sum(x: &[f32]) -> f32 {
    eigen_sum_from(x, 0)
}

/// The packets cover x[head..head + full]: the values before and after them, in that order.
fn add_outside_packets(mut sum: f32, x: &[f32], head: usize, full: usize) -> f32 {
    for &v in x[..head].iter().chain(&x[head + full..]) {
        sum += v;
    }
    sum
}

/// Scalar reference for a row whose first 16-byte boundary is `head` values in.
pub fn eigen_sum_from_scalar(x: &[f32], head: usize) -> f32 {
    let head = head.min(x.len());
    let full = (x.len() - head) / PACKET * PACKET;
    if full == 0 {
        return sequential_sum(x);
    }
    let body = &x[head..head + full];
    let pairs = full / (2 * PACKET) * 2 * PACKET;
    let mut acc0 = packet(body, 0);
    if full > PACKET {
        let mut acc1 = packet(body, PACKET);
        let mut i = 2 * PACKET;
        while i < pairs {
            acc0 = add_packets(acc0, packet(body, i));
            acc1 = add_packets(acc1, packet(body, i + PACKET));
            i += 2 * PACKET;
        }
        acc0 = add_packets(acc0, acc1);
        if full > pairs {
            acc0 = add_packets(acc0, packet(body, pairs));
        }
    }
    add_outside_packets((acc0[0] + acc0[2]) + (acc0[1] + acc0[3]), x, head, full)
}

/// The same order with f32x4 packets.
pub fn eigen_sum_from(x: &[f32], head: usize) -> f32 {
    let head = head.min(x.len());
    let full = (x.len() - head) / PACKET * PACKET;
    if full == 0 {
        return sequential_sum(x);
    }
    let pairs = full / (2 * PACKET) * 2 * PACKET;
    // SAFETY: every load reads PACKET floats starting below head + full <= len.
    unsafe {
        let p = x.as_ptr().add(head);
        let mut acc0 = v128_load(p as *const v128);
        if full > PACKET {
            let mut acc1 = v128_load(p.add(PACKET) as *const v128);
            let mut i = 2 * PACKET;
            while i < pairs {
                acc0 = f32x4_add(acc0, v128_load(p.add(i) as *const v128));
                acc1 = f32x4_add(acc1, v128_load(p.add(i + PACKET) as *const v128));
                i += 2 * PACKET;
            }
            acc0 = f32x4_add(acc0, acc1);
            if full > pairs {
                acc0 = f32x4_add(acc0, v128_load(p.add(pairs) as *const v128));
            }
        }
        let sum = (f32x4_extract_lane::<0>(acc0) + f32x4_extract_lane::<2>(acc0))
            + (f32x4_extract_lane::<1>(acc0) + f32x4_extract_lane::<3>(acc0));
        add_outside_packets(sum, x, head, full)
    }
}

/// MEAN over a row: the Eigen-order sum divided by the length.
pub fn eigen_mean(x: &[f32]) -> f32 {
    eigen_sum(x) / x.len() as f32
}

fn sequential_sum(x: &[f32]) -> f32 {
    let mut sum = x[0];
    for &v in &x[1..] {
        sum += v;
    }
    sum
}

fn packet(x: &[f32], at: usize) -> [f32; PACKET] {
    [x[at], x[at + 1], x[at + 2], x[at + 3]]
}

fn add_packets(a: [f32; PACKET], b: [f32; PACKET]) -> [f32; PACKET] {
    [a[0] + b[0], a[1] + b[1], a[2] + b[2], a[3] + b[3]]
}
