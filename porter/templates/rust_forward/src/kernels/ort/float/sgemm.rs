//! MLAS's SGEMM as onnxruntime runs the encoder's products: one output at a time in its block
//! order, the same four outputs (or columns) at a time with relaxed_madd, the M = 1 kernel, and
//! the Gemm Linear.

use core::arch::wasm32::*;

use super::lanes::{fused_madd, lanes};
use super::math::fma;
use crate::kernels::litert::linear_f32::FloatWeights;

/// MLAS's block sizes (MLAS_SGEMM_STRIDEN/K, MLAS_SGEMM_PACKED_STRIDEK), written as powers of
/// two: they are its constants, not a model's shapes.
const STRIDE: usize = 1 << 7;
/// The depth of MLAS's blocks of a prepacked B (a constant weight).
pub const PACKED_STRIDE_K: usize = 1 << 8;

/// The depth of MLAS's SGEMM blocks for an n-column product over k (porter/reference/ort/floats.py
/// stride_k): fixed for a prepacked B; otherwise 128, doubled while the N stride (128, halved
/// each time, down to 16) still covers n, when n < k.
pub fn stride_k(n: usize, k: usize, prepacked: bool) -> usize {
    if prepacked {
        return PACKED_STRIDE_K;
    }
    let (mut stride_n, mut depth) = (STRIDE, STRIDE);
    if n < k {
        while stride_n > 16 && stride_n / 2 >= n {
            stride_n /= 2;
            depth *= 2;
        }
    }
    depth
}

/// One output of MLAS's SGEMM: for each block of `block` along k an fma chain in k order from
/// zero, then c = fma(chain, alpha, c) (the first block is chain * alpha when there is no c).
#[inline(always)]
pub fn sgemm_dot(depth: usize, block: usize, a: impl Fn(usize) -> f32, b: impl Fn(usize) -> f32, c: Option<f32>, alpha: f32) -> f32 {
    let mut out = c;
    for start in (0..depth).step_by(block) {
        let mut chain = 0.0f32;
        for i in start..depth.min(start + block) {
            chain = fma(a(i), b(i), chain);
        }
        out = Some(out.map_or(chain * alpha, |v| fma(chain, alpha, v)));
    }
    out.unwrap_or(0.0)
}

/// One output of MLAS's M = 1 kernel (a one-row MatMul of two activations): k in groups of
/// four, then two, then one; each group's rounded products added left to right (no fma), then
/// added to the result, which starts at zero.
#[inline(always)]
pub fn m1_dot(depth: usize, a: impl Fn(usize) -> f32, b: impl Fn(usize) -> f32) -> f32 {
    let mut out = 0.0f32;
    let mut i = 0;
    for group in [4, 2, 1] {
        while depth - i >= group {
            let mut t = a(i) * b(i);
            for j in i + 1..i + group {
                t += a(j) * b(j);
            }
            out = t + out;
            i += group;
            if group < 4 {
                break;
            }
        }
    }
    out
}

/// FusedMatMul's one row at alpha 1 with B transposed (MLAS's SgemmKernelM1TransposeBAvx, every
/// target): out[j] = a . b[j * ldb ..][..a.len()] for j < n, each in eight lanes (lane l takes
/// k = l, l + 8, ...: products added in order, no fma; the masked tail adds 0 * 0), the lanes
/// summed as its shuffles sum them for a column in a group of four, a pair or a single one
/// (columns go in fours first), then +0.0 for C.
pub fn m1_transpose_b(a: &[f32], b: &[f32], ldb: usize, n: usize, out: &mut [f32]) {
    let k = a.len();
    let fours = n / 4 * 4;
    let pairs_end = fours + (n % 4) / 2 * 2;
    for (j, o) in out[..n].iter_mut().enumerate() {
        let row = &b[j * ldb..j * ldb + k];
        let mut l = [0.0f32; 8];
        for start in (0..k).step_by(8) {
            for (lane, acc) in l.iter_mut().enumerate() {
                let i = start + lane;
                *acc += if i < k { a[i] * row[i] } else { 0.0 * 0.0 };
            }
        }
        let sum = if j < fours {
            (((l[0] + l[1]) + l[2]) + l[3]) + (((l[4] + l[5]) + l[6]) + l[7])
        } else if j < pairs_end {
            ((l[0] + l[2]) + (l[4] + l[6])) + ((l[1] + l[3]) + (l[5] + l[7]))
        } else {
            ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]))
        };
        *o = sum + 0.0;
    }
}

/// each output as `sgemm_dot` computes it, with c[o] as its initial C when given.
#[allow(clippy::too_many_arguments)]
pub fn sgemm_outputs(x: &[f32], w: &[f32], ldw: usize, outs: usize, block: usize, alpha: f32, c: Option<&[f32]>, out: &mut [f32]) {
    let k = x.len();
    for o in fused_output_tiles(x, w, ldw, outs, block, alpha, c, out)..outs {
        let row = &w[o * ldw..o * ldw + k];
        out[o] = sgemm_dot(k, block, |i| x[i], |i| row[i], c.map(|c| c[o]), alpha);
    }
}

/// The outputs sgemm_outputs takes with relaxed_madd, in tiles of two groups of four outputs
/// (two independent chains hide relaxed_madd's latency; four measured slower on the Linears),
/// then of one group: how many it computed.
#[cfg(feature = "fused-madd")]
#[allow(clippy::too_many_arguments)]
fn fused_output_tiles(x: &[f32], w: &[f32], ldw: usize, outs: usize, block: usize, alpha: f32, c: Option<&[f32]>, out: &mut [f32]) -> usize {
    if !fused_madd() {
        return 0;
    }
    // SAFETY (both tiles): fused_madd() was probed above; tile_outputs checks its slice bounds.
    let o = fill_tiles::<2>(0, outs, out, |o| unsafe { tile_outputs::<2>(x, &w[o * ldw..], ldw, block, alpha, c.map(|c| &c[o..o + 8])) });
    fill_tiles::<1>(o, outs, out, |o| unsafe { tile_outputs::<1>(x, &w[o * ldw..], ldw, block, alpha, c.map(|c| &c[o..o + 4])) })
}

#[cfg(not(feature = "fused-madd"))]
#[allow(clippy::too_many_arguments)]
fn fused_output_tiles(_: &[f32], _: &[f32], _: usize, _: usize, _: usize, _: f32, _: Option<&[f32]>, _: &mut [f32]) -> usize {
    0
}

/// out[i..] in tiles of G groups of four values, tile(i) computing the tile at i, from `first`
/// on while a whole tile fits in n: the index after the last tile.
#[cfg(feature = "fused-madd")]
#[inline(always)]
fn fill_tiles<const G: usize>(first: usize, n: usize, out: &mut [f32], tile: impl Fn(usize) -> [v128; G]) -> usize {
    let mut i = first;
    while i + 4 * G <= n {
        for (g, group) in tile(i).into_iter().enumerate() {
            out[i + 4 * g..i + 4 * g + 4].copy_from_slice(&lanes(group));
        }
        i += 4 * G;
    }
    i
}

/// 4G rows of w against x: each four-by-four block of a group is transposed so that one
/// relaxed_madd advances its four outputs' chains by one step of k, in k order.
#[cfg(feature = "fused-madd")]
#[target_feature(enable = "relaxed-simd")]
unsafe fn tile_outputs<const G: usize>(x: &[f32], w: &[f32], ldw: usize, block: usize, alpha: f32, c: Option<&[f32]>) -> [v128; G] {
    let k = x.len();
    assert!(w.len() >= (4 * G - 1) * ldw + k);
    let mut result = c.map(|c| core::array::from_fn::<v128, G, _>(|g| f32x4(c[4 * g], c[4 * g + 1], c[4 * g + 2], c[4 * g + 3])));
    for start in (0..k).step_by(block) {
        let end = k.min(start + block);
        let mut chains = [f32x4_splat(0.0); G];
        let mut i = start;
        while i + 4 <= end {
            // SAFETY: i + 4 <= k and the tile's rows lie inside w (asserted).
            let xs = lane_splats(unsafe { v128_load(x.as_ptr().add(i) as *const v128) });
            for (group, chain) in chains.iter_mut().enumerate() {
                let p = unsafe { w.as_ptr().add(group * 4 * ldw + i) };
                let r = unsafe { [0, 1, 2, 3].map(|row| v128_load(p.add(row * ldw) as *const v128)) };
                for (step, column) in transpose(r).into_iter().enumerate() {
                    *chain = f32x4_relaxed_madd(xs[step], column, *chain);
                }
            }
            i += 4;
        }
        for i in i..end {
            for (group, chain) in chains.iter_mut().enumerate() {
                let row = |r: usize| w[(group * 4 + r) * ldw + i];
                *chain = f32x4_relaxed_madd(f32x4_splat(x[i]), f32x4(row(0), row(1), row(2), row(3)), *chain);
            }
        }
        result = Some(add_block(result, chains, alpha));
    }
    result.unwrap_or([f32x4_splat(0.0); G])
}

/// One block's chains into the result as MLAS combines them (sgemm_dot): chain * alpha for the
/// first block when there is no C, else fma(chain, alpha, c).
#[cfg(feature = "fused-madd")]
#[target_feature(enable = "relaxed-simd")]
unsafe fn add_block<const G: usize>(result: Option<[v128; G]>, chains: [v128; G], alpha: f32) -> [v128; G] {
    let alpha = f32x4_splat(alpha);
    match result {
        None => chains.map(|chain| f32x4_mul(chain, alpha)),
        Some(c) => core::array::from_fn(|g| f32x4_relaxed_madd(chains[g], alpha, c[g])),
    }
}

/// Each lane of v in all four lanes (Cranelift turns a scalar load and splat into a load, a
/// move and a broadcast; one vector load and four shuffles are cheaper).
#[inline(always)]
pub fn lane_splats(v: v128) -> [v128; 4] {
    [i32x4_shuffle::<0, 0, 0, 0>(v, v), i32x4_shuffle::<1, 1, 1, 1>(v, v), i32x4_shuffle::<2, 2, 2, 2>(v, v), i32x4_shuffle::<3, 3, 3, 3>(v, v)]
}

/// Rows r[0..4] of four values -> columns: column j holds r[0][j], r[1][j], r[2][j], r[3][j].
#[inline(always)]
pub fn transpose(r: [v128; 4]) -> [v128; 4] {
    let (t0, t1) = (i32x4_shuffle::<0, 4, 1, 5>(r[0], r[1]), i32x4_shuffle::<2, 6, 3, 7>(r[0], r[1]));
    let (t2, t3) = (i32x4_shuffle::<0, 4, 1, 5>(r[2], r[3]), i32x4_shuffle::<2, 6, 3, 7>(r[2], r[3]));
    [
        i32x4_shuffle::<0, 1, 4, 5>(t0, t2),
        i32x4_shuffle::<2, 3, 6, 7>(t0, t2),
        i32x4_shuffle::<0, 1, 4, 5>(t1, t3),
        i32x4_shuffle::<2, 3, 6, 7>(t1, t3),
    ]
}

/// out[c] = the SGEMM product of p (k values) with column c of v (rows `ldv` apart), c < d.
pub fn sgemm_columns(p: &[f32], v: &[f32], ldv: usize, d: usize, block: usize, alpha: f32, out: &mut [f32]) {
    let k = p.len();
    for c in fused_column_groups(p, v, ldv, d, block, alpha, out)..d {
        out[c] = sgemm_dot(k, block, |j| p[j], |j| v[j * ldv + c], None, alpha);
    }
}

/// The columns sgemm_columns takes with relaxed_madd, eight groups of four at a time (eight
/// independent chains: one alone waits on relaxed_madd's latency at every step), then one group:
/// how many it computed.
#[cfg(feature = "fused-madd")]
fn fused_column_groups(p: &[f32], v: &[f32], ldv: usize, d: usize, block: usize, alpha: f32, out: &mut [f32]) -> usize {
    if !fused_madd() {
        return 0;
    }
    // SAFETY (both tiles): fused_madd() was probed above; columns checks its slice bounds.
    let c = fill_tiles::<8>(0, d, out, |c| unsafe { columns::<8>(p, &v[c..], ldv, block, alpha) });
    fill_tiles::<1>(c, d, out, |c| unsafe { columns::<1>(p, &v[c..], ldv, block, alpha) })
}

#[cfg(not(feature = "fused-madd"))]
fn fused_column_groups(_: &[f32], _: &[f32], _: usize, _: usize, _: usize, _: f32, _: &mut [f32]) -> usize {
    0
}

/// G groups of four columns of the SGEMM product of p with v: per block of `block` products
/// one relaxed_madd chain per group in k order, the blocks combined with alpha as MLAS does.
///
/// The chains go through memory (volatile) once per four products rather than being carried in
/// loop variables, as every hot loop of these crates keeps its running sums. Cranelift keeps each
/// load where the wasm has it but places each pure operation just before its first use, and it
/// spills every vector live across a loop header (the epoch check's slow path is a call): carried
/// sums would be formed only at the loop's end, with every vector loaded in the step live until
/// then, and spilled anyway. Read and written once per step, each sum's arithmetic runs right
/// after its own loads and no vector is live across the header.
#[cfg(feature = "fused-madd")]
#[target_feature(enable = "relaxed-simd")]
unsafe fn columns<const G: usize>(p: &[f32], v: &[f32], ldv: usize, block: usize, alpha: f32) -> [v128; G] {
    let k = p.len();
    assert!(k == 0 || v.len() >= (k - 1) * ldv + 4 * G);
    let mut result: Option<[v128; G]> = None;
    for start in (0..k).step_by(block) {
        let mut chains = [f32x4_splat(0.0); G];
        let sums = chains.as_mut_ptr();
        let end = k.min(start + block);
        let mut j = start;
        // SAFETY (both loops): j + u < end <= k, so p[j + u] and row j + u's 4G values lie inside
        // p and v (asserted).
        while j + 4 <= end {
            let pj = lane_splats(v128_load(p.as_ptr().add(j) as *const v128));
            for g in 0..G {
                let mut chain = sums.add(g).read_volatile();
                for (u, &pu) in pj.iter().enumerate() {
                    chain = f32x4_relaxed_madd(pu, v128_load(v.as_ptr().add((j + u) * ldv + 4 * g) as *const v128), chain);
                }
                sums.add(g).write_volatile(chain);
            }
            j += 4;
        }
        for j in j..end {
            let pj = f32x4_splat(p[j]);
            for g in 0..G {
                let row = v128_load(v.as_ptr().add(j * ldv + 4 * g) as *const v128);
                sums.add(g).write_volatile(f32x4_relaxed_madd(pj, row, sums.add(g).read_volatile()));
            }
        }
        let chains: [v128; G] = core::array::from_fn(|g| sums.add(g).read_volatile());
        result = Some(add_block(result, chains, alpha));
    }
    result.unwrap_or([f32x4_splat(0.0); G])
}

/// out[c] = `m1_dot` of p with column c of v (rows `ldv` apart), c < d: no fma, so plain SIMD.
pub fn m1_columns(p: &[f32], v: &[f32], ldv: usize, d: usize, out: &mut [f32]) {
    let k = p.len();
    assert!(k == 0 || v.len() >= (k - 1) * ldv + d);
    let mut c = 0;
    while c + 4 <= d {
        // SAFETY: j < k and c + 4 <= d, inside v (asserted).
        let row = |j: usize| unsafe { v128_load(v.as_ptr().add(j * ldv + c) as *const v128) };
        let mut result = f32x4_splat(0.0);
        let mut j = 0;
        for group in [4, 2, 1] {
            while k - j >= group {
                let mut t = f32x4_mul(f32x4_splat(p[j]), row(j));
                for i in j + 1..j + group {
                    t = f32x4_add(t, f32x4_mul(f32x4_splat(p[i]), row(i)));
                }
                result = f32x4_add(t, result);
                j += group;
                if group < 4 {
                    break;
                }
            }
        }
        out[c..c + 4].copy_from_slice(&lanes(result));
        c += 4;
    }
    for c in c..d {
        out[c] = m1_dot(k, |j| p[j], |j| v[j * ldv + c]);
    }
}

/// Gemm with the bias as C (MLAS SGEMM, its B prepacked): the outputs in whole panels
/// (panel_outputs) where the engine fuses relaxed_madd, the rest row by row (sgemm_outputs).
/// `panel` is the caller's buffer for one panel's weights.
pub fn linear(x: &[f32], rows: usize, w: &FloatWeights, out: &mut [f32], panel: &mut Vec<f32>) {
    let (k, outs) = (w.k, w.outs);
    let done = panel_outputs(x, rows, w, out, panel);
    if done == outs {
        return;
    }
    for r in 0..rows {
        let y = &mut out[r * outs + done..(r + 1) * outs];
        sgemm_outputs(&x[r * k..(r + 1) * k], &w.w[done * k..], k, outs - done, PACKED_STRIDE_K, 1.0, w.bias.map(|b| &b[done..]), y);
    }
}

/// Outputs per panel: four groups of four.
#[cfg(feature = "fused-madd")]
const PANEL: usize = 16;

/// The Linear's outputs in panels of PANEL, every row of each: how many it computed. A panel's
/// weights are first copied k-major (panel[i][j] = w[o0 + j][i]), once for all rows, so that one
/// load gives four outputs' weights at one k; each output's chain is sgemm_dot's, in k order.
#[cfg(feature = "fused-madd")]
fn panel_outputs(x: &[f32], rows: usize, w: &FloatWeights, out: &mut [f32], panel: &mut Vec<f32>) -> usize {
    if !fused_madd() {
        return 0;
    }
    let (k, outs) = (w.k, w.outs);
    assert!(x.len() >= rows * k && out.len() >= rows * outs && w.w.len() >= outs * k);
    panel.resize(PANEL * k, 0.0);
    let mut o0 = 0;
    while o0 + PANEL <= outs {
        for (i, at_k) in panel.chunks_exact_mut(PANEL).enumerate() {
            for (j, value) in at_k.iter_mut().enumerate() {
                *value = w.w[(o0 + j) * k + i];
            }
        }
        let bias = w.bias.map(|b| &b[o0..o0 + PANEL]);
        let mut r = 0;
        // SAFETY (both): fused_madd() was probed above; the rows and outputs lie inside x and out (asserted).
        while r + 2 <= rows {
            unsafe { panel_rows::<2>(x.as_ptr().add(r * k), k, panel, bias, out.as_mut_ptr().add(r * outs + o0), outs) };
            r += 2;
        }
        if r < rows {
            unsafe { panel_rows::<1>(x.as_ptr().add(r * k), k, panel, bias, out.as_mut_ptr().add(r * outs + o0), outs) };
        }
        o0 += PANEL;
    }
    o0
}

#[cfg(not(feature = "fused-madd"))]
fn panel_outputs(_: &[f32], _: usize, _: &FloatWeights, _: &mut [f32], _: &mut Vec<f32>) -> usize {
    0
}

/// R rows (x, k apart) times one k-major panel, each output as sgemm_dot computes it with C =
/// the bias and alpha 1, into out (rows `ld_out` apart). The chains go through memory once per
/// four values of k, as `columns` explains.
#[cfg(feature = "fused-madd")]
#[target_feature(enable = "relaxed-simd")]
unsafe fn panel_rows<const R: usize>(x: *const f32, k: usize, panel: &[f32], bias: Option<&[f32]>, out: *mut f32, ld_out: usize) {
    const G: usize = PANEL / 4;
    let p = panel.as_ptr();
    let bias = bias.map(|b| core::array::from_fn::<v128, G, _>(|g| v128_load(b.as_ptr().add(4 * g) as *const v128)));
    let mut result: [Option<[v128; G]>; R] = [bias; R];
    for start in (0..k).step_by(PACKED_STRIDE_K) {
        let end = k.min(start + PACKED_STRIDE_K);
        let mut chains = [[f32x4_splat(0.0); G]; R];
        let sums = chains.as_mut_ptr() as *mut v128;
        let mut i = start;
        while i + 4 <= end {
            let xv: [v128; R] = core::array::from_fn(|r| v128_load(x.add(r * k + i) as *const v128));
            for r in 0..R {
                let mut acc: [v128; G] = core::array::from_fn(|g| sums.add(r * G + g).read_volatile());
                let xs = lane_splats(xv[r]);
                for (u, &xu) in xs.iter().enumerate() {
                    for (g, a) in acc.iter_mut().enumerate() {
                        *a = f32x4_relaxed_madd(xu, v128_load(p.add((i + u) * PANEL + 4 * g) as *const v128), *a);
                    }
                }
                for (g, &a) in acc.iter().enumerate() {
                    sums.add(r * G + g).write_volatile(a);
                }
            }
            i += 4;
        }
        for i in i..end {
            for r in 0..R {
                let xs = f32x4_splat(*x.add(r * k + i));
                for g in 0..G {
                    let chain = f32x4_relaxed_madd(xs, v128_load(p.add(i * PANEL + 4 * g) as *const v128), sums.add(r * G + g).read_volatile());
                    sums.add(r * G + g).write_volatile(chain);
                }
            }
        }
        for (r, result) in result.iter_mut().enumerate() {
            let chains: [v128; G] = core::array::from_fn(|g| sums.add(r * G + g).read_volatile());
            *result = Some(add_block(*result, chains, 1.0));
        }
    }
    for (r, result) in result.iter().enumerate() {
        for (g, &v) in result.unwrap_or([f32x4_splat(0.0); G]).iter().enumerate() {
            v128_store(out.add(r * ld_out + 4 * g) as *mut v128, v);
        }
    }
}
