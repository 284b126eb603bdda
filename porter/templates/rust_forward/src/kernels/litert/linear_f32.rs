//! Float FULLY_CONNECTED as LiteRT's builtin kernel computes it: Eigen's matrix products, then
//! the bias, clamped to [-FLT_MAX, FLT_MAX] (porter/reference/litert/floats.py `fully_connected` is the
//! definition and says where each rule comes from).
//!
//!   linear_f32(x, rows, w, out, scratch)          all `rows` rows of the input tensor
//!   linear_f32_rows(x, rows, tensor_rows, ...)    the first `rows` of a `tensor_rows`-row tensor
//!   linear_f32_scalar / linear_f32_rows_scalar    the scalar references
//!
//! Eigen picks its product from the whole tensor's shape, and in its GEBP kernel a row's
//! summation order depends on whether it lies in a four-row panel, so a caller that computes
//! only the live rows passes the tensor's row count as `tensor_rows`. Each output is one of:
//!   k order            one accumulator (GEBP's two-packet blocks, every row outside a panel);
//!   even/odd           two accumulators over the first k / 8 * 8 (GEBP's one-packet block: the
//!                      four outputs after out / 8 * 8 when out % 8 >= 4);
//!   k mod 4            four accumulators over the first k / 4 * 4, (c0 + c1) + (c2 + c3) (GEBP's
//!                      last out % 4 outputs);
//!   GEMV lanes         four lanes over the first k / 4 * 4, (l0 + l2) + (l1 + l3) (a one-row
//!                      tensor, or a single output);
//!   inner product      four four-lane packets (one row and one output);
//!   coefficient-based  Eigen's vectorised sum of the products (k + out + rows < 20);
//! each followed by the rest of k in order, and in GEBP summed per depth block (Eigen's L1
//! blocking) into the result. The SIMD version runs the GEBP orders with four rows of the tensor
//! as the four lanes (the input transposed once, k-major), and the GEMV and inner-product lanes
//! as Eigen's own packets; every lane adds in the reference's order, so they are the same
//! computation. The coefficient-based product (tiny by definition) has only the scalar code.

use core::arch::wasm32::*;

use super::eigen::eigen_sum_scalar;
// Eigen's L1 data cache size as it reads it from CPUID on the golden's CPU: it sets the depth blocks
use crate::model::EIGEN_L1_BYTES;

#[derive(Clone, Copy)]
pub struct FloatWeights<'a> {
    pub w: &'a [f32], // [outs, k]
    pub bias: Option<&'a [f32]>,
    pub outs: usize,
    pub k: usize,
}

const PACKET: usize = 4;
const GEBP_OUTPUTS: usize = 8; // Eigen's mr for SSE floats without FMA: two packets
const PANEL_ROWS: usize = 4; // nr
const PEEL: usize = 8; // Eigen's k peeling
const COEFF_BASED_BELOW: usize = 20;

/// The product Eigen evaluates for a tensor of `tensor_rows` rows (cpu_backend_gemm_eigen.cc).
#[derive(Clone, Copy, PartialEq, Debug)]
enum Product {
    InnerProduct,
    /// dst.col(0) = W x: each output a GEMV row.
    GemvOverOutputs,
    /// dst.row(0) = w X: each input row a GEMV row.
    GemvOverRows,
    CoeffBased,
    Gebp { depth_block: usize },
}

fn product(tensor_rows: usize, outs: usize, k: usize) -> Product {
    match (tensor_rows, outs) {
        (1, 1) => Product::InnerProduct,
        (1, _) => Product::GemvOverOutputs,
        (_, 1) => Product::GemvOverRows,
        _ if k + outs + tensor_rows < COEFF_BASED_BELOW => Product::CoeffBased,
        _ => Product::Gebp { depth_block: depth_block(k, outs, tensor_rows) },
    }
}

/// Eigen's kc (evaluateProductBlockingSizesHeuristic, one thread).
fn depth_block(k: usize, outs: usize, rows: usize) -> usize {
    if k.max(outs).max(rows) < 48 {
        return k;
    }
    let per_k = (GEBP_OUTPUTS + PANEL_ROWS) * 4;
    let max_kc = (((EIGEN_L1_BYTES - GEBP_OUTPUTS * PANEL_ROWS * 4) / per_k) & !(PEEL - 1)).max(1);
    if k <= max_kc {
        k
    } else if k % max_kc == 0 {
        max_kc
    } else {
        // the last block as large as possible for the same number of blocks
        max_kc - PEEL * ((max_kc - 1 - k % max_kc) / (PEEL * (k / max_kc + 1)))
    }
}

/// How GEBP sums one output of one row within a depth block.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Chains {
    /// One accumulator.
    One,
    /// Even and odd k over the first depth / 8 * 8.
    EvenOdd,
    /// k mod 4 over the first depth / 4 * 4.
    ModFour,
}

impl Chains {
    fn count(self) -> usize {
        match self {
            Chains::One => 1,
            Chains::EvenOdd => 2,
            Chains::ModFour => 4,
        }
    }

    /// The k the chains take turns over; the rest of the block is added in order after them.
    fn span(self, depth: usize) -> usize {
        match self {
            Chains::One => depth,
            Chains::EvenOdd => depth / PEEL * PEEL,
            Chains::ModFour => depth / PACKET * PACKET,
        }
    }
}

/// GEBP's register block for output o of a row inside (`in_panel`) or outside the four-row panels.
fn chains(o: usize, outs: usize, in_panel: bool) -> Chains {
    let (two_packets, one_packet) = (outs / GEBP_OUTPUTS * GEBP_OUTPUTS, outs / PACKET * PACKET);
    if !in_panel || o < two_packets {
        Chains::One
    } else if o < one_packet {
        Chains::EvenOdd
    } else {
        Chains::ModFour
    }
}

/// std::min(v, FLT_MAX) then std::max(v, lowest), as Eigen's cwiseMin / cwiseMax: a NaN stays.
#[inline(always)]
fn clamp_activation(v: f32) -> f32 {
    let v = if f32::MAX < v { f32::MAX } else { v };
    if v < -f32::MAX {
        -f32::MAX
    } else {
        v
    }
}

/// out = clamp(out + bias) over `rows` rows: the bias and the activation range of NONE.
fn finish(out: &mut [f32], rows: usize, w: &FloatWeights) {
    for row in out[..rows * w.outs].chunks_exact_mut(w.outs) {
        for (o, v) in row.iter_mut().enumerate() {
            let biased = match w.bias {
                Some(b) => *v + b[o],
                None => *v,
            };
            *v = clamp_activation(biased);
        }
    }
}

// ---- scalar references ----------------------------------------------------------------------

/// GEBP's sum of x[i] * w[i] over one depth block, from +0.
fn gebp_block_scalar(x: &[f32], w: &[f32], chains: Chains) -> f32 {
    let n = chains.count();
    let span = chains.span(x.len());
    let mut acc = [0.0f32; 4];
    for i in 0..span {
        acc[i % n] += x[i] * w[i];
    }
    let mut sum = match chains {
        Chains::One => acc[0],
        Chains::EvenOdd => acc[0] + acc[1],
        Chains::ModFour => (acc[0] + acc[1]) + (acc[2] + acc[3]),
    };
    for i in span..x.len() {
        sum += x[i] * w[i];
    }
    sum
}

/// Eigen's row-major GEMV row: four lanes (k mod 4) from +0, reduced (l0 + l2) + (l1 + l3),
/// then the rest in order.
fn gemv_row_scalar(m: &[f32], v: &[f32]) -> f32 {
    let quads = m.len() / PACKET * PACKET;
    let mut lanes = [0.0f32; PACKET];
    for i in 0..quads {
        lanes[i % PACKET] += m[i] * v[i];
    }
    let mut sum = (lanes[0] + lanes[2]) + (lanes[1] + lanes[3]);
    for i in quads..m.len() {
        sum += m[i] * v[i];
    }
    sum
}

/// Eigen's inner product: packets j (four products each) into accumulators j mod 4 (the first
/// four packets start them), combined p0 + (p1 + (p2 + p3)), reduced as a packet, then the rest.
fn inner_product_scalar(x: &[f32], w: &[f32]) -> f32 {
    let packets = x.len() / PACKET;
    if packets == 0 {
        return x.iter().zip(w).map(|(a, b)| a * b).reduce(|s, p| s + p).unwrap_or(0.0);
    }
    let mut acc = [[0.0f32; PACKET]; 4];
    for j in 0..packets {
        for l in 0..PACKET {
            let p = x[j * PACKET + l] * w[j * PACKET + l];
            acc[j % 4][l] = if j < 4 { p } else { acc[j % 4][l] + p };
        }
    }
    let used = packets.min(4);
    let mut combined = acc[used - 1];
    for a in acc[..used - 1].iter().rev() {
        combined = [a[0] + combined[0], a[1] + combined[1], a[2] + combined[2], a[3] + combined[3]];
    }
    let mut sum = (combined[0] + combined[2]) + (combined[1] + combined[3]);
    for i in packets * PACKET..x.len() {
        sum += x[i] * w[i];
    }
    sum
}

/// Output o of row r of a `tensor_rows`-row tensor, before the bias.
fn output_scalar(xr: &[f32], wo: &[f32], r: usize, o: usize, tensor_rows: usize, outs: usize) -> f32 {
    match product(tensor_rows, outs, xr.len()) {
        Product::InnerProduct => 0.0 + inner_product_scalar(xr, wo),
        Product::GemvOverOutputs | Product::GemvOverRows => 0.0 + gemv_row_scalar(xr, wo),
        Product::CoeffBased => {
            let products: Vec<f32> = xr.iter().zip(wo).map(|(a, b)| a * b).collect();
            eigen_sum_scalar(&products)
        }
        Product::Gebp { depth_block } => {
            let chains = chains(o, outs, r < tensor_rows / PANEL_ROWS * PANEL_ROWS);
            let mut sum = 0.0;
            for (xb, wb) in xr.chunks(depth_block).zip(wo.chunks(depth_block)) {
                sum += gebp_block_scalar(xb, wb, chains);
            }
            sum
        }
    }
}

pub fn linear_f32_scalar(x: &[f32], rows: usize, w: &FloatWeights, out: &mut [f32]) {
    linear_f32_rows_scalar(x, rows, rows, w, out);
}

pub fn linear_f32_rows_scalar(x: &[f32], rows: usize, tensor_rows: usize, w: &FloatWeights, out: &mut [f32]) {
    let k = w.k;
    assert!(rows <= tensor_rows);
    for r in 0..rows {
        for o in 0..w.outs {
            out[r * w.outs + o] = output_scalar(&x[r * k..(r + 1) * k], &w.w[o * k..(o + 1) * k], r, o, tensor_rows, w.outs);
        }
    }
    finish(out, rows, w);
}

// ---- SIMD --------------------------------------------------------------------------------------

/// The k-order outputs per pass of the four-row kernel.
const OUTS_PER_PASS: usize = 4;

/// `x_t` is scratch of at least k * rows floats.
pub fn linear_f32(x: &[f32], rows: usize, w: &FloatWeights, out: &mut [f32], x_t: &mut [f32]) {
    linear_f32_rows(x, rows, rows, w, out, x_t);
}

/// The first `rows` rows of a `tensor_rows`-row input; `x_t` is scratch of at least k * rows.
pub fn linear_f32_rows(x: &[f32], rows: usize, tensor_rows: usize, w: &FloatWeights, out: &mut [f32], x_t: &mut [f32]) {
    let k = w.k;
    assert!(rows <= tensor_rows && x.len() >= rows * k && out.len() >= rows * w.outs && w.w.len() >= w.outs * k);
    match product(tensor_rows, w.outs, k) {
        Product::InnerProduct if rows == 1 => out[0] = 0.0 + inner_product(&x[..k], &w.w[..k]),
        Product::GemvOverOutputs if rows == 1 => gemv(&w.w[..w.outs * k], &x[..k], k, &mut out[..w.outs]),
        Product::GemvOverRows => gemv(&x[..rows * k], &w.w[..k], k, &mut out[..rows]),
        Product::Gebp { depth_block } => gebp(x, rows, tensor_rows, w, depth_block, out, x_t),
        // the coefficient-based product (k + outs + rows < 20), or no row at all
        _ => return linear_f32_rows_scalar(x, rows, tensor_rows, w, out),
    }
    finish(out, rows, w);
}

/// GEBP: live rows in four-row panels as lanes, each output class in its order; the other live
/// rows one output at a time.
fn gebp(x: &[f32], rows: usize, tensor_rows: usize, w: &FloatWeights, depth_block: usize, out: &mut [f32], x_t: &mut [f32]) {
    let k = w.k;
    assert!(x_t.len() >= rows * k);
    for r in 0..rows {
        for i in 0..k {
            x_t[i * rows + r] = x[r * k + i];
        }
    }
    // Rows of the tensor's panels that fill four lanes here; the live rows after them (inside a
    // panel of the tensor or not) are summed one output at a time, in their own block's order.
    let tensor_panel_rows = tensor_rows / PANEL_ROWS * PANEL_ROWS;
    let lane_rows = tensor_panel_rows.min(rows / PANEL_ROWS * PANEL_ROWS);
    let (two_packets, one_packet) = (w.outs / GEBP_OUTPUTS * GEBP_OUTPUTS, w.outs / PACKET * PACKET);
    let mut k0 = 0;
    while k0 < k {
        let block = KBlock { k0, depth: depth_block.min(k - k0), first: k0 == 0 };
        let mut r0 = 0;
        while r0 < lane_rows {
            // SAFETY: r0 + 4 <= rows, every output below outs, k0 + depth <= k; slices checked above.
            unsafe {
                let xp = x_t.as_ptr().add(r0);
                let mut o = 0;
                while o + OUTS_PER_PASS <= two_packets {
                    four_rows::<OUTS_PER_PASS, 1>(xp, rows, w, o, r0, &block, out);
                    o += OUTS_PER_PASS;
                }
                for single in o..two_packets {
                    four_rows::<1, 1>(xp, rows, w, single, r0, &block, out);
                }
                for o in two_packets..one_packet {
                    four_rows::<1, 2>(xp, rows, w, o, r0, &block, out);
                }
                for o in one_packet..w.outs {
                    four_rows::<1, 4>(xp, rows, w, o, r0, &block, out);
                }
            }
            r0 += PANEL_ROWS;
        }
        for r in lane_rows..rows {
            for o in 0..w.outs {
                let (xb, wb) = (&x[r * k + k0..][..block.depth], &w.w[o * k + k0..][..block.depth]);
                let sum = gebp_block_scalar(xb, wb, chains(o, w.outs, r < tensor_panel_rows));
                let at = r * w.outs + o;
                out[at] = if block.first { 0.0 + sum } else { out[at] + sum };
            }
        }
        k0 += block.depth;
    }
}

struct KBlock {
    k0: usize,
    depth: usize,
    first: bool,
}

/// Outputs o0..o0 + N of four rows (the lanes) over one depth block, each in CHAINS
/// accumulators (1: k order; 2: even/odd over depth / 8 * 8; 4: k mod 4 over depth / 4 * 4),
/// combined as Eigen combines them, then the rest of the block in order; the block's sums are
/// added to the result (the first block to +0).
#[inline(always)]
unsafe fn four_rows<const N: usize, const CHAINS: usize>(x_t: *const f32, stride: usize, w: &FloatWeights, o0: usize,
                                                        r0: usize, block: &KBlock, out: &mut [f32]) {
    let k = w.k;
    let wp = w.w.as_ptr().add(block.k0);
    let xp = x_t.add(block.k0 * stride);
    let span = match CHAINS {
        1 => block.depth,
        2 => block.depth / PEEL * PEEL,
        _ => block.depth / PACKET * PACKET,
    };
    let mut acc = [[f32x4_splat(0.0); CHAINS]; N];
    let mut i = 0;
    while i < span {
        for chain in 0..CHAINS {
            let xi = v128_load(xp.add((i + chain) * stride) as *const v128);
            for c in 0..N {
                let product = f32x4_mul(xi, f32x4_splat(*wp.add((o0 + c) * k + i + chain)));
                acc[c][chain] = f32x4_add(acc[c][chain], product);
            }
        }
        i += CHAINS;
    }
    let mut sums = [f32x4_splat(0.0); N];
    for c in 0..N {
        sums[c] = match CHAINS {
            1 => acc[c][0],
            2 => f32x4_add(acc[c][0], acc[c][1]),
            _ => f32x4_add(f32x4_add(acc[c][0], acc[c][1]), f32x4_add(acc[c][2], acc[c][3])),
        };
    }
    for i in span..block.depth {
        let xi = v128_load(xp.add(i * stride) as *const v128);
        for c in 0..N {
            sums[c] = f32x4_add(sums[c], f32x4_mul(xi, f32x4_splat(*wp.add((o0 + c) * k + i))));
        }
    }
    for c in 0..N {
        let lanes = [
            f32x4_extract_lane::<0>(sums[c]),
            f32x4_extract_lane::<1>(sums[c]),
            f32x4_extract_lane::<2>(sums[c]),
            f32x4_extract_lane::<3>(sums[c]),
        ];
        for (l, &v) in lanes.iter().enumerate() {
            let at = (r0 + l) * w.outs + o0 + c;
            out[at] = if block.first { 0.0 + v } else { out[at] + v };
        }
    }
}

/// Eigen's GEMV: out[j] = 0 + row j of m (rows of `k`) dotted with v, in four lanes.
fn gemv(m: &[f32], v: &[f32], k: usize, out: &mut [f32]) {
    let quads = k / PACKET * PACKET;
    for (row, o) in m.chunks_exact(k).zip(out.iter_mut()) {
        // SAFETY: every load reads PACKET floats below quads <= k of row and v.
        let lanes = unsafe {
            let mut lanes = f32x4_splat(0.0);
            let mut i = 0;
            while i < quads {
                let product = f32x4_mul(v128_load(row.as_ptr().add(i) as *const v128), v128_load(v.as_ptr().add(i) as *const v128));
                lanes = f32x4_add(lanes, product);
                i += PACKET;
            }
            lanes
        };
        let mut sum = (f32x4_extract_lane::<0>(lanes) + f32x4_extract_lane::<2>(lanes))
            + (f32x4_extract_lane::<1>(lanes) + f32x4_extract_lane::<3>(lanes));
        for i in quads..k {
            sum += row[i] * v[i];
        }
        *o = 0.0 + sum;
    }
}

/// Eigen's inner product with its own packets (see inner_product_scalar).
fn inner_product(x: &[f32], w: &[f32]) -> f32 {
    let packets = x.len() / PACKET;
    if packets == 0 {
        return inner_product_scalar(x, w);
    }
    let product = |j: usize| unsafe {
        // SAFETY: j < packets, so the packet lies inside both slices.
        f32x4_mul(v128_load(x.as_ptr().add(j * PACKET) as *const v128), v128_load(w.as_ptr().add(j * PACKET) as *const v128))
    };
    let used = packets.min(4);
    let mut acc = [f32x4_splat(0.0); 4];
    for (j, a) in acc.iter_mut().enumerate().take(used) {
        *a = product(j);
    }
    for j in 4..packets {
        acc[j % 4] = f32x4_add(acc[j % 4], product(j));
    }
    let mut combined = acc[used - 1];
    for a in acc[..used - 1].iter().rev() {
        combined = f32x4_add(*a, combined);
    }
    let mut sum = (f32x4_extract_lane::<0>(combined) + f32x4_extract_lane::<2>(combined))
        + (f32x4_extract_lane::<1>(combined) + f32x4_extract_lane::<3>(combined));
    for i in packets * PACKET..x.len() {
        sum += x[i] * w[i];
    }
    sum
}
