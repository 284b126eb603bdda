//! LiteRT's float BATCH_MATMUL (its reference kernel, the one the wheel registers): each output
//! `total = 0; total += a[k] * b[k]` in k order, no fma (porter/reference/litert/floats.py
//! `batch_matmul`). The SIMD version takes four output columns at a time, one chain per lane in
//! the same order, so every output is the scalar one's bit for bit.

use core::arch::wasm32::*;

/// out[j] = the product of row `a` (k values) with column j of b ([k][ldb] row-major), j < out.len().
pub fn row_product(a: &[f32], b: &[f32], ldb: usize, out: &mut [f32]) {
    let n = out.len();
    let mut j = 0;
    while j + 4 <= n {
        let mut acc = f32x4_splat(0.0);
        for (k, &x) in a.iter().enumerate() {
            // SAFETY: column j + 3 of row k is inside b (k < a.len() rows of ldb >= n values).
            let column = unsafe { v128_load(b.as_ptr().add(k * ldb + j) as *const v128) };
            acc = f32x4_add(acc, f32x4_mul(f32x4_splat(x), column));
        }
        // SAFETY: j + 3 < n = out.len().
        unsafe { v128_store(out.as_mut_ptr().add(j) as *mut v128, acc) };
        j += 4;
    }
    row_product_columns(a, b, ldb, j, out);
}

/// The scalar reference: every column one chain at a time.
pub fn row_product_scalar(a: &[f32], b: &[f32], ldb: usize, out: &mut [f32]) {
    row_product_columns(a, b, ldb, 0, out);
}

fn row_product_columns(a: &[f32], b: &[f32], ldb: usize, from: usize, out: &mut [f32]) {
    for (j, o) in out.iter_mut().enumerate().skip(from) {
        let mut total = 0.0f32;
        for (k, &x) in a.iter().enumerate() {
            total += x * b[k * ldb + j];
        }
        *o = total;
    }
}
