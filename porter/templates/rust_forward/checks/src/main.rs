//! Kernel checks: every SIMD kernel against its scalar reference, in wasm, bit for bit.
//!
//!   gelu START COUNT STEP            GELU on f32 bit patterns START, START+STEP, ... (COUNT of them)
//!   litert-fn tanh|logistic|gelu-tanh|exp|exp-nonpositive START COUNT STEP
//!                                     LiteRT's TANH, LOGISTIC and GELU(approximate=True), and
//!                                     SOFTMAX's exp (in general, and for inputs <= 0: each
//!                                     positive pattern with its sign set), on the same patterns (the logistic
//!                                     in tensors of 1 to 67 values, some passed as a prefix, so
//!                                     packets, lone packet values and the scalar tail all run)
//!   ort-fn erf|gelu|gelu-mul|fast-gelu|exp|exp-scalef|exp-op|exp-op-scalef START COUNT STEP
//!                                     onnxruntime's one-input functions over a slice (relaxed_madd
//!                                     lanes where the engine fuses it) against the scalar emulation
//!                                     (exp: softmax's on AVX2, exp-scalef: on AVX-512F; exp-op,
//!                                     exp-op-scalef: the Exp op's, a float16 graph's softmax body)
//!   round-half START COUNT STEP      onnxruntime's float16 rounding of a float16 graph's values
//!                                     (ort_float round_half_in_place, simd128) against its scalar
//!                                     definition, bit for bit NaNs included, in slices of 1 to 11
//!                                     and of 2000 values
//!   ort-scale START COUNT STEP       softmax's scaling of a subnormal (ort_float scaled_subnormal)
//!                                     against f32.mul, for patterns START, START+STEP, ... of its 24
//!                                     bits (sign, 23-bit significand), each by scales across the range
//!   quant sym|asym START COUNT STEP   rows of 16 whose range is fixed so the scale is exactly 1
//!                                     (127, and -128 for asym), the other 15 values bit patterns
//!   quant-random sym|asym SEED ROWS   random rows: scales 2^-20..2^20, .5 ties, zeros, -0, all-zero
//!   dequant SEED SCALES               weight-only int8 widening (dequantize_rows): rows holding every
//!                                     int8 value, each under one of SCALES random scales (any
//!                                     finite bit pattern, subnormals included), rows of 1 to 300
//!                                     values and per-tensor scales, SIMD against scalar
//!   halves START COUNT                float16 widening (widen_halves) of the halves START.. (all 65536
//!                                     with 0 65536), in slices of 1 to 40, SIMD against scalar
//!   int4                              int4 unpacking (unpack_int4): every byte value in every lane of
//!                                     a block, SIMD against scalar
//!   int8 SEED                         the full-integer kernels' int8 dot (kernels/litert/int8/dot.rs),
//!                                     alone on every length to 300 and in FULLY_CONNECTED and
//!                                     BATCH_MATMUL (each adjoint), simd128 against scalar
//!   qdq SEED                          onnxruntime's QLinearMatMul / QGemm with a constant B
//!                                     (kernels/ort/qdq.rs): the GEMM tiles against the scalar
//!                                     reference on random shapes, outputs and saturation
//!   tensor-simd SEED                  LiteRT's BATCH_MATMUL rows of the tensor steps, simd128 against
//!                                     scalar (tensor.rs)
//!   tensor-cases                      the tensor steps (kernels/common/tensor.rs) on stdin cases,
//!                                     for porter's numpy comparison (tensor.rs says the format)
//!   kernels SEED                      GEMM (int8 and LiteRT's int4 output), attention, Eigen sums, float Linear (every Eigen
//!                                     product and GEBP block, live rows of longer tensors, depth
//!                                     blocks), onnxruntime's
//!                                     u8 x s8 dot (saturating and exact) and its SGEMM and M = 1
//!                                     products (relaxed_madd tiles against the exact scalar
//!                                     emulation) on random data; the GEMMs and attention also in
//!                                     every candidate tile of `porter build --tune` (tiles.rs)
//!   reference OP                      scalar references on stdin data, for porter's numpy tests
//!                                     (LiteRT's: gelu gelu-tanh exp erfc tanh logistic logistic-tail exp-op
//!                                     eigen-sum quant-sym quant-asym, dequant whose rows are a
//!                                     scale then int8 values as floats, halves whose values are
//!                                     float16 bit patterns as floats, logistic-rows with each row a
//!                                     tensor, l2-norm over each row, linear-f32 ROWS TENSOR_ROWS
//!                                     OUTS BIAS whose stdin is one row: x[ROWS][cols], w[OUTS][cols],
//!                                     bias[OUTS], int4-linear ROWS OUTS BIAS (x, int4 w as floats,
//!                                     w_scale, bias: LiteRT's 4-bit layer), and reduce-sum|reduce-mean|reduce-max D0 D1 D2 D3
//!                                     AXES, stdin the tensor, AXES a 4-bit mask, axis 0 highest;
//!                                     onnxruntime's: ort-erf ort-gelu ort-fast-gelu ort-exp ort-exp-scalef
//!                                     ort-softmax ort-softmax-avx512 (the AVX2 and AVX-512F
//!                                     kernels') ort-quantize, and of a float16 graph: ort-round-half,
//!                                     its Exp op's kernels ort-exp-fma3 ort-exp-avx512, its Softmax
//!                                     function body ort-softmax-function ort-softmax-function-avx512, and ort-layer-norm ort-skip-layer-norm whose
//!                                     first two rows are gamma and beta, eps 1e-12); the full-integer
//!                                     kernels' (int8/): int8-requantize XZ M SHIFT OZ, int8-dequantize and
//!                                     int8-output ZP SCALE_BITS, int8-table (the first 256 values the
//!                                     table), int8-binary add|sub|squared-difference|mul|div
//!                                     scalar|vector|broadcast-vector XZ YZ LEFT_SHIFT MX SX MY SY MO
//!                                     SO OZ (rows x and y: one loop's formula; div's third row its
//!                                     reciprocal table as int32 bits), int8-walk add|mul -
//!                                     (the same) XLEN flat|five Y0 Y1 Y2 Y3 Y4 SWAPPED (one row: x's
//!                                     XLEN values then y's, through LiteRT's walk), int8-mean-4d M
//!                                     SHIFT BIAS (rows of raw sums, a row the depth)); onnxruntime's QDQ
//!                                     kernels' (qdq.rs, float arguments as their bits): qdq-quantize and
//!                                     qdq-requantize SCALE ZP LO HI (requantize's values are int32 bits),
//!                                     qdq-dequantize SCALE ZP, qdq-add RA RB FIXED A_SCALAR B_SCALAR LO
//!                                     HI (rows a and b), qdq-softmax MULTIPLIER ZP ROW (the first 256
//!                                     values the table), qdq-gemm M K N A_ZP OUTPUT ZP SATURATING BIAS B_CONST)
//!
//! Exit status 1 and a MISMATCH line on the first differences; 0 and a summary line otherwise.
//! NaN results compare equal to each other whatever their payload.

#![allow(dead_code)]

#[path = "../../src/kernels/mod.rs"]
mod kernels;
#[path = "../../src/tuning.rs"]
mod tuning;
// The shapes the kernels are specialised for (the model's embedded weights are not used here).
#[path = "../../src/model.rs"]
mod model;
#[path = "../../src/program.rs"]
mod program;
#[path = "../../src/integer.rs"]
mod integer;
#[path = "../../src/profile.rs"]
mod profile;
mod tiles;
mod int8;
mod qdq;
mod tensor;
mod typed;

use std::io::{Read, Write};
use std::process::exit;

use kernels::litert::attention::{attention, attention_scalar, AttentionParams, AttentionScratch, ScoreTerms};
use kernels::litert::eigen::{eigen_sum_from, eigen_sum_from_scalar};
use kernels::common::dequantize::{dequantize_rows, dequantize_rows_scalar, half_to_f32, widen_halves, widen_halves_scalar};
use kernels::common::gemm::{gemm, gemm_int4, gemm_int4_scalar, gemm_scalar, Int8Weights};
use kernels::common::int4::{unpack_int4, unpack_int4_scalar, BLOCK_BYTES};
use kernels::litert::activation::{gelu_tanh_in_place, gelu_tanh_in_place_scalar, gelu_tanh_scalar, logistic_in_place,
                          logistic_in_place_scalar, logistic_scalar, logistic_tail_scalar, tanh_in_place,
                          tanh_in_place_scalar, tanh_scalar};
use kernels::litert::libm::expf;
use kernels::litert::linear_f32::{linear_f32_rows, linear_f32_rows_scalar, FloatWeights};
use kernels::litert::mathfn::{erfc_scalar, exp_in_place, exp_nonpositive_x4, exp_scalar, exp_x4, gelu_in_place, gelu_in_place_scalar, gelu_scalar};
use kernels::ort::float as ort_float;
use kernels::ort::quant::{self as ort_quant, TensorQuantized};
use kernels::litert::quantize::*;
use kernels::litert::reduce::{l2_normalization, reduce_litert};
use model::GEMM_DEPTHS;

const MAX_REPORTED: usize = 5;

/// Counts checked values and reports the first mismatches.
struct Tally {
    name: &'static str,
    checked: u64,
    mismatches: u64,
}

impl Tally {
    fn new(name: &'static str) -> Self {
        Tally { name, checked: 0, mismatches: 0 }
    }

    fn record(&mut self, same: bool, describe: impl FnOnce() -> String) {
        self.checked += 1;
        if !same {
            if self.mismatches < MAX_REPORTED as u64 {
                println!("MISMATCH {}: {}", self.name, describe());
            }
            self.mismatches += 1;
        }
    }

    fn finish(self) -> ! {
        println!("{}: {} checked, {} mismatches", self.name, self.checked, self.mismatches);
        exit(if self.mismatches == 0 { 0 } else { 1 })
    }
}

fn same_f32(a: f32, b: f32) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

fn same_values(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same_f32(*x, *y))
}

/// Bit patterns START, START+STEP, ... modulo 2^32.
fn patterns(start: u64, count: u64, step: u64) -> impl Iterator<Item = u32> {
    (0..count).map(move |i| (start + i * step) as u32)
}

fn check_gelu(start: u64, count: u64, step: u64) -> ! {
    let mut tally = Tally::new("gelu");
    compare_in_place(&mut tally, "gelu", patterns(start, count, step), gelu_in_place, gelu_in_place_scalar);
    tally.finish()
}

fn check_litert_function(name: &str, start: u64, count: u64, step: u64) -> ! {
    let mut tally = Tally::new("litert-fn");
    match name {
        "tanh" => compare_in_place(&mut tally, name, patterns(start, count, step), tanh_in_place, tanh_in_place_scalar),
        "gelu-tanh" => compare_in_place(&mut tally, name, patterns(start, count, step), gelu_tanh_in_place,
                                        gelu_tanh_in_place_scalar),
        "logistic" => compare_in_place(&mut tally, name, patterns(start, count, step),
                                       |v| in_tensors(v, logistic_in_place), |v| in_tensors(v, logistic_in_place_scalar)),
        "exp" => compare_in_place(&mut tally, name, patterns(start, count, step), |v| exp_in_place(v, exp_x4),
                                  |v| v.iter_mut().for_each(|x| *x = exp_scalar(*x))),
        "exp-nonpositive" => compare_in_place(&mut tally, name, patterns(start, count, step).map(nonpositive),
                                              |v| exp_in_place(v, exp_nonpositive_x4),
                                              |v| v.iter_mut().for_each(|x| *x = exp_scalar(*x))),
        _ => usage(),
    }
    tally.finish()
}

/// The pattern of a positive number with its sign set, any other as it is: every pattern becomes
/// an input of exp_nonpositive_x4 (<= 0 or NaN), and every such input is reached.
fn nonpositive(bits: u32) -> u32 {
    if f32::from_bits(bits) > 0.0 { bits | 0x8000_0000 } else { bits }
}

/// Splits values into consecutive tensors of 1 to 67 values; f gets each one's values, given
/// either as the whole tensor or as the prefix of one that is longer by 1 to 4 values.
fn in_tensors(values: &mut [f32], f: impl Fn(&mut [f32], usize)) {
    const LENGTHS: [usize; 9] = [1, 2, 3, 4, 5, 7, 8, 13, 67];
    const BEYOND: [usize; 5] = [0, 0, 1, 3, 4];
    let mut rest = values;
    let mut t = 0;
    while !rest.is_empty() {
        let n = LENGTHS[t % LENGTHS.len()].min(rest.len());
        let (tensor, tail) = rest.split_at_mut(n);
        f(tensor, n + BEYOND[t % BEYOND.len()]);
        rest = tail;
        t += 1;
    }
}

fn check_ort_function(name: &str, start: u64, count: u64, step: u64) -> ! {
    let f = match name {
        "erf" => ort_float::Elementwise::Erf,
        "gelu" => ort_float::Elementwise::Gelu,
        "gelu-mul" => ort_float::Elementwise::GeluMul,
        "fast-gelu" => ort_float::Elementwise::FastGelu,
        "exp" => ort_float::Elementwise::Exp,
        "exp-scalef" => ort_float::Elementwise::ExpScalef,
        "exp-op" => ort_float::Elementwise::ExpOp,
        "exp-op-scalef" => ort_float::Elementwise::ExpOpScalef,
        _ => usage(),
    };
    let mut tally = Tally::new("ort-fn");
    compare_in_place(&mut tally, name, patterns(start, count, step), |v| ort_float::apply_in_place(f, v),
                     |v| ort_float::apply_in_place_scalar(f, v));
    println!("fused={}", ort_float::fused_madd());
    tally.finish()
}

/// onnxruntime's float16 rounding four lanes at a time against the scalar definition, bit for bit
/// (a NaN's payload is part of it), in slices of 1 to 11 values (the scalar tail) and of 2000.
fn check_round_half(start: u64, count: u64, step: u64) -> ! {
    let mut tally = Tally::new("round-half");
    let mut inputs = patterns(start, count, step).map(f32::from_bits).peekable();
    let mut len = 1;
    while inputs.peek().is_some() {
        let slice: Vec<f32> = inputs.by_ref().take(len).collect();
        let (mut ours, mut reference) = (slice.clone(), slice.clone());
        ort_float::round_half_in_place(&mut ours);
        ort_float::round_half_in_place_scalar(&mut reference);
        for ((a, b), x) in ours.iter().zip(&reference).zip(&slice) {
            tally.record(a.to_bits() == b.to_bits(), || format!("round-half x={:#010x}: simd {:#010x} scalar {:#010x}",
                                                              x.to_bits(), a.to_bits(), b.to_bits()));
        }
        len = if len >= 11 { 2000 } else { len + 1 };
    }
    tally.finish()
}

/// Every subnormal pattern given (bit 23 of the pattern is the sign) times each scale: the exact
/// integer-and-f64 product against the multiply instruction's.
fn check_ort_scale(start: u64, count: u64, step: u64) -> ! {
    const SCALES: [f32; 10] = [1.0, 0.5, 0.999_999_9, 1.0 / 3.0, 1.0 / 256.0, 0.037, 1.5, 3.0e5, -0.7, 1.175_494_4e-38];
    let mut tally = Tally::new("ort-scale");
    for pattern in (0..count).map(|i| (start + i * step) as u32 & 0x00ff_ffff) {
        let a = f32::from_bits((pattern & 0x007f_ffff) | (pattern >> 23) << 31);
        for scale in SCALES {
            let (ours, reference) = (ort_float::scaled_subnormal(a, scale), a * scale);
            tally.record(same_f32(ours, reference), || format!("{:#010x} * {scale:e}: {:#010x}, f32.mul {:#010x}", a.to_bits(), ours.to_bits(), reference.to_bits()));
        }
    }
    tally.finish()
}

/// A one-input kernel over slices of the given bit patterns, SIMD against scalar.
fn compare_in_place(tally: &mut Tally, name: &str, inputs: impl Iterator<Item = u32>, simd: impl Fn(&mut [f32]),
                    scalar: impl Fn(&mut [f32])) {
    const BLOCK: usize = 2000;
    let mut inputs = inputs.peekable();
    while inputs.peek().is_some() {
        let originals: Vec<f32> = inputs.by_ref().take(BLOCK).map(f32::from_bits).collect();
        let (mut ours, mut reference) = (originals.clone(), originals.clone());
        simd(&mut ours);
        scalar(&mut reference);
        for i in 0..originals.len() {
            tally.record(same_f32(ours[i], reference[i]), || {
                format!("{name} x={:#010x} ({:e}) simd={:e} scalar={:e}", originals[i].to_bits(), originals[i], ours[i], reference[i])
            });
        }
    }
}

fn quantize_both(row: &[f32], asymmetric: bool, simd: &mut [i16], scalar: &mut [i16]) -> (RowParams, RowParams) {
    if asymmetric {
        (quantize_row_asymmetric(row, simd), quantize_row_asymmetric_scalar(row, scalar))
    } else {
        (quantize_row_symmetric(row, simd), quantize_row_symmetric_scalar(row, scalar))
    }
}

fn compare_rows(tally: &mut Tally, row: &[f32], asymmetric: bool) {
    let mut simd = vec![0i16; row.len()];
    let mut scalar = vec![0i16; row.len()];
    let (ps, pr) = quantize_both(row, asymmetric, &mut simd, &mut scalar);
    let params_same = same_f32(ps.scale, pr.scale) && ps.zero_point == pr.zero_point;
    tally.record(params_same, || format!("row {:?}: simd {:?} scalar {:?}", row, ps, pr));
    for i in 0..row.len() {
        tally.record(simd[i] == scalar[i], || {
            format!("x={:#010x} ({:e}) in row {:?}: simd={} scalar={}", row[i].to_bits(), row[i], row, simd[i], scalar[i])
        });
    }
}

const QUANT_ROW: usize = 16;

fn check_quant_patterns(asymmetric: bool, start: u64, count: u64, step: u64) -> ! {
    let mut tally = Tally::new(if asymmetric { "quant-asym" } else { "quant-sym" });
    // The fixed values make the range exactly [-128, 127] (asym) or max|x| = 127 (sym), so the
    // scale is 1 and every pattern inside the range is quantised as itself.
    let fixed: &[f32] = if asymmetric { &[127.0, -128.0] } else { &[127.0] };
    let free = QUANT_ROW - fixed.len();
    let mut row = [0.0f32; QUANT_ROW];
    row[..fixed.len()].copy_from_slice(fixed);
    let mut inputs = patterns(start, count, step).peekable();
    while inputs.peek().is_some() {
        let mut filled = fixed.len();
        for (slot, bits) in row[fixed.len()..].iter_mut().zip(inputs.by_ref().take(free)) {
            *slot = f32::from_bits(bits);
            filled += 1;
        }
        compare_rows(&mut tally, &row[..filled], asymmetric);
    }
    tally.finish()
}

/// xorshift64*: reproducible random numbers without dependencies.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// Uniform in [-1, 1).
    fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }

    fn i8(&mut self) -> i8 {
        self.next() as i8
    }
}

/// A random row with the awkward values quantisation must get right.
fn awkward_row(rng: &mut Rng, len: usize) -> Vec<f32> {
    let scale = 2f32.powi(rng.below(41) as i32 - 20);
    let mut row: Vec<f32> = (0..len).map(|_| rng.unit() * scale).collect();
    match rng.below(6) {
        0 => row.fill(0.0),
        1 => {
            // Exact .5 ties: with max|x| = 127 * 2^e the inverse scale is exactly 2^-e, so
            // the values (j / 2) * 2^e scale to exact halves.
            for v in row.iter_mut() {
                *v = (rng.below(255) as f32 - 127.0) * 0.5 * scale;
            }
            row[0] = 127.0 * scale;
        }
        2 => {
            for v in row.iter_mut().step_by(3) {
                *v = if rng.below(2) == 0 { 0.0 } else { -0.0 };
            }
        }
        3 => {
            let all_positive = rng.below(2) == 0;
            for v in row.iter_mut() {
                *v = if all_positive { v.abs() } else { -v.abs() };
            }
        }
        _ => {}
    }
    row
}

fn check_quant_random(asymmetric: bool, seed: u64, rows: u64) -> ! {
    let mut tally = Tally::new(if asymmetric { "quant-random-asym" } else { "quant-random-sym" });
    let mut rng = Rng(seed | 1);
    for _ in 0..rows {
        let len = [1, 3, 4, 7, 8, 15, 16, 17, 31, 33, 65, 200, 1000][rng.below(13) as usize];
        let row = awkward_row(&mut rng, len);
        compare_rows(&mut tally, &row, asymmetric);
    }
    tally.finish()
}

/// Weight-only int8 widening, SIMD against scalar: each trial a [outs, k] weight whose rows run
/// through every int8 value (from a random start), under per-row or one scale.
fn check_dequant(seed: u64, scales: u64) -> ! {
    let mut tally = Tally::new("dequant");
    let mut rng = Rng(seed | 1);
    let mut done = 0;
    while done < scales {
        let k = [1, 3, 15, 16, 17, 31, 64, 256, 263, 300][rng.below(10) as usize];
        let outs = 1 + rng.below(4) as usize;
        let per_tensor = rng.below(4) == 0;
        let scale: Vec<f32> = (0..if per_tensor { 1 } else { outs }).map(|_| loop {
            let s = f32::from_bits(rng.next() as u32);
            if s.is_finite() { break s; }
        }).collect();
        let start = rng.below(256) as usize;
        let q: Vec<i8> = (0..outs * k).map(|i| ((start + i) % 256) as u8 as i8).collect();
        let (mut simd, mut scalar) = (vec![0.0; outs * k], vec![0.0; outs * k]);
        dequantize_rows(&q, &scale, k, &mut simd);
        dequantize_rows_scalar(&q, &scale, k, &mut scalar);
        tally.record(same_values(&simd, &scalar), || format!("dequant {outs}x{k} scales {scale:?}"));
        done += scale.len() as u64;
    }
    tally.finish()
}

/// int4 unpacking, SIMD against scalar: the 256 byte values in 16 blocks, starting from each of
/// the 16 lanes, so every byte value is unpacked in every lane.
fn check_int4() -> ! {
    let mut tally = Tally::new("int4");
    for start in 0..BLOCK_BYTES {
        let packed: Vec<u8> = (0..256).map(|i| ((start + i) % 256) as u8).collect();
        let (mut simd, mut scalar) = (vec![0i8; 2 * packed.len()], vec![0i8; 2 * packed.len()]);
        unpack_int4(&packed, &mut simd);
        unpack_int4_scalar(&packed, &mut scalar);
        for (i, (a, b)) in simd.iter().zip(&scalar).enumerate() {
            tally.record(a == b, || format!("start {start} value {i}: simd {a} scalar {b}"));
        }
    }
    tally.finish()
}

/// float16 widening, SIMD against scalar, on the halves START.. in slices of varying length.
fn check_halves(start: u64, count: u64) -> ! {
    let mut tally = Tally::new("halves");
    let halves: Vec<u16> = (0..count).map(|i| (start + i) as u16).collect();
    let mut at = 0;
    let mut len = 1;
    while at < halves.len() {
        let slice = &halves[at..(at + len).min(halves.len())];
        let (mut simd, mut scalar) = (vec![0.0; slice.len()], vec![0.0; slice.len()]);
        widen_halves(slice, &mut simd);
        widen_halves_scalar(slice, &mut scalar);
        for ((a, b), h) in simd.iter().zip(&scalar).zip(slice) {
            tally.record(same_f32(*a, *b), || format!("half {h:#06x}: simd {a:e} scalar {b:e}"));
        }
        at += slice.len();
        len = len % 40 + 1;
    }
    tally.finish()
}

/// GEMM, attention, Eigen sums and float Linear: SIMD against scalar on random shapes.
fn check_kernels(seed: u64) -> ! {
    let mut tally = Tally::new("kernels");
    let mut rng = Rng(seed | 1);
    for t in 0..20 {
        // the first trials at the model's own depths: the GEMM's constant-k paths
        let depth = |t: usize, rng: &mut Rng, most: u64| if t < GEMM_DEPTHS.len() { GEMM_DEPTHS[t] } else { 1 + rng.below(most) as usize };
        let (rows, k, outs) = (1 + rng.below(13) as usize, depth(t, &mut rng, 70), 1 + rng.below(11) as usize);
        let a: Vec<i16> = (0..rows * k).map(|_| rng.below(511) as i16 - 255).collect();
        let scales: Vec<f32> = (0..rows).map(|_| rng.unit().abs() + 0.01).collect();
        let w: Vec<i8> = (0..outs * k).map(|_| rng.i8()).collect();
        let wscale: Vec<f32> = (0..outs).map(|_| rng.unit().abs() * 0.1).collect();
        let bias: Vec<f32> = (0..outs).map(|_| rng.unit()).collect();
        let weights = Int8Weights { w: &w, scale: &wscale, bias: Some(&bias), outs, k };
        let (mut y1, mut y2) = (vec![0.0; rows * outs], vec![0.0; rows * outs]);
        gemm(&a, &scales, rows, false, &weights, &mut y1);
        gemm_scalar(&a, &scales, rows, false, &weights, &mut y2);
        tally.record(same_values(&y1, &y2), || format!("gemm {rows}x{k}x{outs}"));
        // LiteRT's int4 layer: weights -7..7, with and without a bias
        let w4: Vec<i8> = (0..outs * k).map(|_| rng.below(15) as i8 - 7).collect();
        let int4 = Int8Weights { w: &w4, scale: &wscale, bias: if t % 2 == 0 { Some(&bias[..]) } else { None }, outs, k };
        let (mut z1, mut z2, mut sums) = (vec![0.0; rows * outs], vec![0.0; rows * outs], Vec::new());
        gemm_int4(&a, &scales, rows, &int4, &mut sums, &mut z1);
        gemm_int4_scalar(&a, &scales, rows, &int4, &mut sums, &mut z2);
        tally.record(same_values(&z1, &z2), || format!("gemm_int4 {rows}x{k}x{outs}"));
        for tile in &tiles::GEMM_TILES {
            (tile.gemm)(&a, &scales, rows, false, &weights, &mut y1);
            tally.record(same_values(&y1, &y2), || format!("gemm {rows}x{k}x{outs} in tile {}x{}", tile.rows, tile.outs));
        }

        check_float_linear(&mut tally, &mut rng, t);

        let (n, head) = (1 + rng.below(600) as usize, rng.below(4) as usize);
        let v: Vec<f32> = (0..n).map(|_| rng.unit() * 100.0).collect();
        tally.record(same_f32(eigen_sum_from(&v, head), eigen_sum_from_scalar(&v, head)), || format!("eigen_sum n={n} head={head}"));

        // uint8 activations against int8 weights; large weights make int16 pair sums saturate.
        let (rows, k, outs) = (1 + rng.below(13) as usize, depth(t, &mut rng, 100), 1 + rng.below(11) as usize);
        let values: Vec<i16> = (0..rows * k).map(|_| rng.below(u8::MAX as u64 + 1) as i16).collect();
        let w: Vec<i8> = (0..outs * k).map(|_| if rng.below(2) == 0 { rng.i8() } else { [-128, 127, -100, 120][rng.below(4) as usize] }).collect();
        let xq = TensorQuantized { values, rows, cols: k, scale: rng.unit().abs() + 0.01, zero_point: rng.below(u8::MAX as u64 + 1) as i32 };
        let wscale: Vec<f32> = (0..outs).map(|_| rng.unit().abs() * 0.1).collect();
        let per_tensor = rng.below(2) == 0;
        let bias: Vec<f32> = (0..outs).map(|_| rng.unit()).collect();
        let weights = Int8Weights { w: &w, scale: &wscale[..if per_tensor { 1 } else { outs }], bias: Some(&bias), outs, k };
        for saturating in [true, false] {
            let (mut y1, mut y2) = (vec![0.0; rows * outs], vec![0.0; rows * outs]);
            ort_quant::linear(&xq, rows, &weights, saturating, &mut y1, &mut Vec::new());
            ort_quant::linear_scalar(&xq, rows, &weights, saturating, &mut y2);
            tally.record(same_values(&y1, &y2), || format!("ort linear {rows}x{k}x{outs} saturating={saturating}"));
            for tile in &tiles::GEMM_TILES {
                (tile.ort_linear)(&xq, rows, &weights, saturating, &mut y1, &mut Vec::new());
                tally.record(same_values(&y1, &y2), || {
                    format!("ort linear {rows}x{k}x{outs} saturating={saturating} in tile {}x{}", tile.rows, tile.outs)
                });
            }
        }
        check_ort_products(&mut tally, &mut rng);
    }
    for trial in 0..12 {
        let heads = 1 + rng.below(3) as usize;
        // the first trials at the model's own head width: the context's whole-head path (attention.rs)
        let head_dim = if trial < 4 { model::MAX_HEAD_DIM } else { [4, 8, 12, 16, 20, 36, 48][rng.below(7) as usize] };
        // the first two past one and two panels of 32 keys, and not a whole number of them: the
        // scores' register tiles take whole panels, the stepped loops the rest
        let keys = match trial {
            0 => 65 + rng.below(8) as usize,
            1 => 33 + rng.below(31) as usize,
            _ => 1 + rng.below(40) as usize,
        };
        let rows = 1 + rng.below(keys as u64) as usize;
        let hidden = heads * head_dim;
        // a replacing mask's value close to the scores, so that replacing and adding differ; with
        // and without score terms (the mask is applied as the scores are written without them)
        let mask_replaces = trial % 4 >= 2;
        // softmax's beta: 1 (no product), a positive one (the exps of inputs <= 0 after it), and a
        // negative one (the general exp; with a replacing mask, so that every exp is finite)
        let softmax_beta = match trial { 6 => 0.5, 7 => -0.25, _ => 1.0 };
        let p = AttentionParams {
            heads,
            head_dim,
            scale: 1.0 / (head_dim as f32).sqrt(),
            scale_on_query: trial % 2 == 1,
            softmax_beta,
            mask_value: if mask_replaces { -1.5 } else { -3.402_823_5e38 },
            mask_replaces,
            masked: true,
            key_scale: 1.0,
            onnxruntime: None,
            softmax_body: false,
        };
        let rand = |rng: &mut Rng, n: usize| -> Vec<f32> { (0..n).map(|_| rng.unit() * 4.0).collect() };
        let (q, k, v) = (rand(&mut rng, keys * hidden), rand(&mut rng, keys * hidden), rand(&mut rng, keys * hidden));
        let keep: Vec<bool> = (0..keys).map(|j| j == 0 || rng.below(4) != 0).collect();
        let keep = (trial % 3 != 0).then_some(&keep[..]);
        // a relative-position bias on every other trial: [heads, keys, keys]
        let bias = rand(&mut rng, heads * keys * keys);
        let bias_arrays = [&bias[..]];
        let terms = if trial % 2 == 0 { ScoreTerms { arrays: &bias_arrays, window: keys } } else { ScoreTerms::NONE };
        let (mut c1, mut c2) = (vec![0.0; rows * hidden], vec![0.0; rows * hidden]);
        let mut scratch = AttentionScratch::new(keys, keys, head_dim);
        attention(&p, &q, &k, &v, keep, terms, rows, keys, &mut c1, &mut scratch);
        attention_scalar(&p, &q, &k, &v, keep, terms, rows, keys, &mut c2);
        tally.record(same_values(&c1, &c2), || format!("attention h={heads} d={head_dim} keys={keys} rows={rows} beta={softmax_beta}"));
        for &(query_rows, attention_in_blocks) in &tiles::QUERY_ROWS {
            let mut scratch = AttentionScratch::for_query_rows(keys, keys, head_dim, query_rows);
            attention_in_blocks(&p, &q, &k, &v, keep, terms, rows, keys, &mut c1, &mut scratch);
            tally.record(same_values(&c1, &c2), || {
                format!("attention h={heads} d={head_dim} keys={keys} rows={rows} in blocks of {query_rows} query rows")
            });
        }
    }
    for trial in 0..8 {
        check_negligible_products(&mut tally, &mut rng, trial);
    }
    for trial in 0..24 {
        check_ort_attention(&mut tally, &mut rng, trial);
    }
    tally.finish()
}

/// Attention whose rows' scores spread past 104, so that exps fall below 2^-116 and into the
/// subnormals and zero: the context leaves such an exp's products out where every sum of the row
/// is large enough to absorb them (attention.rs context_group_by_keys), and only there. In half
/// the trials the values of the keys with large exps are zero, so that the sums stay small (at
/// first zero) and the tiny products are all the context has: leaving them out would show.
fn check_negligible_products(tally: &mut Tally, rng: &mut Rng, trial: usize) {
    let (heads, head_dim) = (1 + rng.below(2) as usize, model::MAX_HEAD_DIM);
    let keys = 40 + rng.below(60) as usize;
    let rows = 1 + rng.below(keys as u64) as usize;
    let hidden = heads * head_dim;
    let scale = 1.0 / (head_dim as f32).sqrt();
    // score(i, j) = (1 + i / 100) level_j, about: query i all (1 + i / 100), key j all level_j * scale
    let q: Vec<f32> = (0..rows * hidden).map(|x| 1.0 + (x / hidden) as f32 / 100.0).collect();
    let level: Vec<f32> = (0..keys).map(|j| if j % 5 == 0 { -5.0 * (rng.unit() + 1.0) } else { -70.0 + 20.0 * rng.unit() - 20.0 }).collect();
    let k: Vec<f32> = (0..keys * hidden).map(|x| level[x / hidden] * scale * (1.0 + rng.unit() / 100.0)).collect();
    let small_sums = trial % 2 == 1;
    let v: Vec<f32> = (0..keys * hidden).map(|x| if small_sums && level[x / hidden] > -60.0 { 0.0 } else { rng.unit() }).collect();
    let keep: Vec<bool> = (0..keys).map(|j| j == 0 || rng.below(8) != 0).collect();
    let keep = (trial % 4 >= 2).then_some(&keep[..]);
    let p = AttentionParams {
        heads,
        head_dim,
        scale,
        scale_on_query: false,
        softmax_beta: 1.0,
        mask_value: -3.402_823_5e38,
        mask_replaces: false,
        masked: true,
        key_scale: 1.0,
        onnxruntime: None,
        softmax_body: false,
    };
    let (mut c1, mut c2) = (vec![0.0; rows * hidden], vec![0.0; rows * hidden]);
    attention_scalar(&p, &q, &k, &v, keep, ScoreTerms::NONE, rows, keys, &mut c2);
    for &(query_rows, attention_in_blocks) in &tiles::QUERY_ROWS {
        let mut scratch = AttentionScratch::for_query_rows(keys, keys, head_dim, query_rows);
        attention_in_blocks(&p, &q, &k, &v, keep, ScoreTerms::NONE, rows, keys, &mut c1, &mut scratch);
        tally.record(same_values(&c1, &c2), || {
            format!("attention with negligible products, small sums {small_sums}, keys={keys} rows={rows} in blocks of {query_rows}")
        });
    }
}

/// onnxruntime's attention with its context chains cut at a right-padded window's masked keys
/// (ort/float/masked_tail.rs) against every chain over all keys, on both float families (AVX-512F
/// gives masked keys subnormal probabilities): ordinary values, where the cut applies; value
/// rows so large behind the padding that a masked key's product counts, and a value column
/// zero over the live keys, where it must not.
fn check_ort_attention(tally: &mut Tally, rng: &mut Rng, trial: usize) {
    let floats = if trial % 2 == 0 { ort_float::OrtFloats::Avx512 } else { ort_float::OrtFloats::Avx2 };
    let (heads, d) = (1 + rng.below(3) as usize, [4, 8, 12, 16, 32][rng.below(5) as usize]);
    let keys = 2 + rng.below(63) as usize;
    let rows = [keys, 1 + rng.below(keys as u64) as usize][rng.below(2) as usize];
    let live = 1 + rng.below(keys as u64 - 1) as usize;
    let hidden = heads * d;
    let rand = |rng: &mut Rng, n: usize| -> Vec<f32> { (0..n).map(|_| rng.unit() * 4.0).collect() };
    let (q, k, mut v) = (rand(rng, keys * hidden), rand(rng, keys * hidden), rand(rng, keys * hidden));
    let keep: Vec<bool> = (0..keys).map(|j| j < live && (j == 0 || rng.below(5) != 0)).collect();
    if trial % 3 == 1 {
        v[live * hidden..].iter_mut().for_each(|x| *x *= 1e37);
    } else if trial % 3 == 2 {
        let c = rng.below(hidden as u64) as usize;
        (0..live).for_each(|j| v[j * hidden + c] = 0.0);
    }
    let (mut cut, mut full) = (vec![0.0; rows * hidden], vec![0.0; rows * hidden]);
    let (mut scores, mut keys_t, mut scaled) = (vec![0.0; keys], vec![0.0; d * keys], vec![0.0; d]);
    let p = ort_float::OrtAttention {
        floats,
        heads,
        head_dim: d,
        scale: 1.0 / (d as f32).sqrt(),
        scale_on_query: trial % 4 == 1,
        key_scale: 1.0,
        mask_value: -3.402_823_5e38,
        softmax_body: trial % 5 == 3,
        mask_replaces: trial % 5 == 0,
        window: keys,
    };
    // a relative-position bias on half the trials: the cut context must hold with it too
    let bias: Vec<f32> = (0..heads * keys * keys).map(|_| rng.unit() * 4.0).collect();
    let bias_arrays = [&bias[..]];
    let terms = if trial % 4 < 2 { ScoreTerms { arrays: &bias_arrays, window: keys } } else { ScoreTerms::NONE };
    ort_float::attention(&p, &q, &k, &v, Some(&keep), terms, rows, keys, &mut cut,
                         ort_float::OrtAttentionScratch { scores: &mut scores, keys_t: &mut keys_t, scaled: &mut scaled });
    ort_float::attention_all_keys(&p, &q, &k, &v, Some(&keep), terms, rows, keys, &mut full,
                                  ort_float::OrtAttentionScratch { scores: &mut scores, keys_t: &mut keys_t, scaled: &mut scaled });
    tally.record(same_values(&cut, &full), || {
        format!("ort attention {floats:?} h={heads} d={d} keys={keys} live={live} rows={rows} trial={trial}")
    });
}

/// The float Linear on a random shape: a tensor of 1 to 70 rows (a one-row tensor, a single
/// output and the tiny coefficient-based products included) with its first 1 to all of them
/// live, 1 to 40 outputs (every GEBP block), k up to 200 and, one trial in five, past Eigen's
/// first depth block (700 to 1600); values of scales far apart, so that orders differ.
fn check_float_linear(tally: &mut Tally, rng: &mut Rng, trial: usize) {
    let tensor_rows = [1, 1 + rng.below(3) as usize, 1 + rng.below(70) as usize][rng.below(3) as usize];
    let rows = 1 + rng.below(tensor_rows as u64) as usize;
    let outs = if rng.below(4) == 0 { 1 } else { 1 + rng.below(40) as usize };
    let k = if trial % 5 == 4 { 700 + rng.below(900) as usize } else { 1 + rng.below(200) as usize };
    let value = |rng: &mut Rng| rng.unit() * [1e-3, 1.0, 300.0][rng.below(3) as usize];
    let x: Vec<f32> = (0..rows * k).map(|_| value(rng)).collect();
    let w: Vec<f32> = (0..outs * k).map(|_| value(rng)).collect();
    let bias: Vec<f32> = (0..outs).map(|_| value(rng)).collect();
    let fw = FloatWeights { w: &w, bias: (rng.below(2) == 0).then_some(&bias[..]), outs, k };
    let (mut simd, mut scalar, mut xt) = (vec![0.0; rows * outs], vec![0.0; rows * outs], vec![0.0; rows * k]);
    linear_f32_rows(&x, rows, tensor_rows, &fw, &mut simd, &mut xt);
    linear_f32_rows_scalar(&x, rows, tensor_rows, &fw, &mut scalar);
    let bad = simd.iter().zip(&scalar).filter(|(a, b)| !same_f32(**a, **b)).count();
    tally.record(bad == 0, || format!("linear_f32 rows {rows} of {tensor_rows}, k {k}, outs {outs}: {bad} outputs differ"));
}

/// onnxruntime's products as the crates run them (relaxed_madd tiles, where the engine fuses
/// it) against one output at a time through the exact scalar fma emulation.
fn check_ort_products(tally: &mut Tally, rng: &mut Rng) {
    // up to 70 outputs: tiles of eight and four outputs, of 32 and 4 columns, and the scalar rest
    let (k, outs) = (1 + rng.below(700) as usize, 1 + rng.below(70) as usize);
    let ldw = k + rng.below(3) as usize; // rows with and without a gap
    let block = [1usize << 7, 1 << 8, 1 << 9][rng.below(3) as usize];
    let alpha = [1.0, 0.125, 0.3][rng.below(3) as usize];
    // scales far apart make the chains' roundings matter
    let x: Vec<f32> = (0..k).map(|_| rng.unit() * [1e-3, 1.0, 300.0][rng.below(3) as usize]).collect();
    let w: Vec<f32> = (0..outs * ldw).map(|_| rng.unit()).collect();
    let c: Vec<f32> = (0..outs).map(|_| rng.unit() * 10.0).collect();
    let c = (rng.below(2) == 0).then_some(&c[..]);
    let mut simd = vec![0.0; outs];
    ort_float::sgemm_outputs(&x, &w, ldw, outs, block, alpha, c, &mut simd);
    let scalar: Vec<f32> = (0..outs).map(|o| ort_float::sgemm_dot(k, block, |i| x[i], |i| w[o * ldw + i], c.map(|c| c[o]), alpha)).collect();
    tally.record(simd.iter().zip(&scalar).all(|(a, b)| same_f32(*a, *b)), || format!("sgemm_outputs k={k} outs={outs} block={block} fused={}", ort_float::fused_madd()));
    let d = outs;
    let (mut columns, mut m1) = (vec![0.0; d], vec![0.0; d]);
    ort_float::sgemm_columns(&x, &w, d, d, block, alpha, &mut columns);
    ort_float::m1_columns(&x, &w, d, d, &mut m1);
    let ok = (0..d).all(|c| {
        same_f32(columns[c], ort_float::sgemm_dot(k, block, |j| x[j], |j| w[j * d + c], None, alpha))
            && same_f32(m1[c], ort_float::m1_dot(k, |j| x[j], |j| w[j * d + c]))
    });
    tally.record(ok, || format!("sgemm_columns / m1_columns k={k} d={d} block={block} alpha={alpha}"));

    // the Gemm Linear: whole panels of outputs (rows in pairs and one alone), the rest row by row
    let rows = 1 + rng.below(5) as usize;
    let xs: Vec<f32> = (0..rows * k).map(|_| rng.unit() * [1e-3, 1.0, 300.0][rng.below(3) as usize]).collect();
    let bias: Vec<f32> = (0..outs).map(|_| rng.unit() * 10.0).collect();
    let fw = FloatWeights { w: &w[..outs * k], bias: (rng.below(2) == 0).then_some(&bias[..]), outs, k };
    let mut linear = vec![0.0; rows * outs];
    ort_float::linear(&xs, rows, &fw, &mut linear, &mut Vec::new());
    let ok = (0..rows * outs).all(|i| {
        let (r, o) = (i / outs, i % outs);
        same_f32(linear[i], ort_float::sgemm_dot(k, ort_float::PACKED_STRIDE_K, |j| xs[r * k + j], |j| w[o * k + j], fw.bias.map(|b| b[o]), 1.0))
    });
    tally.record(ok, || format!("ort linear_f32 {rows}x{k}x{outs} bias={}", fw.bias.is_some()));
}

/// Scalar references for porter's tests: stdin u32 rows, u32 cols, f32 data[rows * cols].
fn reference(op: &str, args: &[String]) -> ! {
    let mut input = Vec::new();
    std::io::stdin().read_to_end(&mut input).expect("read stdin");
    let word = |i: usize| u32::from_le_bytes(input[4 * i..4 * i + 4].try_into().unwrap());
    let (rows, cols) = (word(0) as usize, word(1) as usize);
    let data: Vec<f32> = (0..rows * cols).map(|i| f32::from_bits(word(2 + i))).collect();
    let mut out = Vec::new();
    if let Some(bytes) = int8::reference_int8(op, args, &data, cols).or_else(|| qdq::reference_qdq(op, args, &data, cols))
        .or_else(|| typed::reference_typed(op, args, &data)) {
        std::io::stdout().write_all(&bytes).expect("write stdout");
        exit(0)
    }
    if op == "linear-f32" {
        let arg = |i: usize| -> usize { args.get(i).and_then(|s| s.parse().ok()).unwrap_or_else(|| usage()) };
        let (live, tensor_rows, outs, bias) = (arg(0), arg(1), arg(2), arg(3) == 1);
        let k = (cols - if bias { outs } else { 0 }) / (live + outs);
        let (x, rest) = data.split_at(live * k);
        let (w, b) = rest.split_at(outs * k);
        let fw = FloatWeights { w, bias: bias.then_some(b), outs, k };
        let mut y = vec![0.0f32; live * outs];
        linear_f32_rows_scalar(x, live, tensor_rows, &fw, &mut y);
        y.iter().for_each(|v| out.extend_from_slice(&v.to_le_bytes()));
        std::io::stdout().write_all(&out).expect("write stdout");
        exit(0)
    }
    if op == "int4-linear" {
        // one stdin row: x[ROWS][k], w[OUTS][k] (values -7..7), w_scale[OUTS], bias[OUTS] if BIAS
        let arg = |i: usize| -> usize { args.get(i).and_then(|s| s.parse().ok()).unwrap_or_else(|| usage()) };
        let (rows, outs, bias) = (arg(0), arg(1), arg(2) == 1);
        let k = (cols - outs - if bias { outs } else { 0 }) / (rows + outs);
        let (x, rest) = data.split_at(rows * k);
        let (w, rest) = rest.split_at(outs * k);
        let (scale, b) = rest.split_at(outs);
        let (mut q, mut row_scales) = (vec![0i16; rows * k], vec![0.0f32; rows]);
        for r in 0..rows {
            row_scales[r] = quantize_row_symmetric_scalar(&x[r * k..][..k], &mut q[r * k..][..k]).scale;
        }
        let w: Vec<i8> = w.iter().map(|&v| v as i8).collect();
        let weights = Int8Weights { w: &w, scale, bias: if bias { Some(&b[..outs]) } else { None }, outs, k };
        let mut y = vec![0.0f32; rows * outs];
        gemm_int4_scalar(&q, &row_scales, rows, &weights, &mut Vec::new(), &mut y);
        y.iter().for_each(|v| out.extend_from_slice(&v.to_le_bytes()));
        std::io::stdout().write_all(&out).expect("write stdout");
        exit(0)
    }
    if let Some(kind) = op.strip_prefix("reduce-") {
        let op = match kind { "sum" => program::Reduce::Sum, "mean" => program::Reduce::Mean, "max" => program::Reduce::Max, _ => usage() };
        let arg = |i: usize| -> usize { args.get(i).and_then(|s| s.parse().ok()).unwrap_or_else(|| usage()) };
        let shape = [arg(0), arg(1), arg(2), arg(3)];
        let axes: [bool; 4] = std::array::from_fn(|a| arg(4) >> (3 - a) & 1 == 1);
        let out_shape: [usize; 4] = std::array::from_fn(|a| if axes[a] { 1 } else { shape[a] });
        let mut y = vec![0.0f32; out_shape.iter().product()];
        reduce_litert(op, &data, shape, axes, out_shape, &mut y);
        y.iter().for_each(|v| out.extend_from_slice(&v.to_le_bytes()));
        std::io::stdout().write_all(&out).expect("write stdout");
        exit(0)
    }
    if op == "ort-m1-transpose-b" {
        // row 0: A (k values); rows 1..: B transposed, one row of k per output
        let (a, b) = data.split_at(cols);
        let n = rows - 1;
        let mut y = vec![0.0f32; n];
        ort_float::m1_transpose_b(a, b, cols, n, &mut y);
        y.iter().for_each(|v| out.extend_from_slice(&v.to_le_bytes()));
        std::io::stdout().write_all(&out).expect("write stdout");
        exit(0)
    }
    if op == "ort-layer-norm" || op == "ort-skip-layer-norm" || op == "ort-embed-layer-norm" {
        let kernel = match op {
            "ort-layer-norm" => ort_float::layer_norm_row,
            "ort-skip-layer-norm" => ort_float::skip_layer_norm_row,
            _ => ort_float::embed_layer_norm_row,
        };
        let (gamma, rest) = data.split_at(cols);
        let (beta, x) = rest.split_at(cols);
        let mut y = vec![0.0f32; cols];
        for row in x.chunks(cols) {
            kernel(row, gamma, beta, 1e-12, &mut y);
            y.iter().for_each(|v| out.extend_from_slice(&v.to_le_bytes()));
        }
        std::io::stdout().write_all(&out).expect("write stdout");
        exit(0)
    }
    for row in data.chunks(cols.max(1)).take(rows) {
        match op {
            "gelu" | "gelu-tanh" | "exp" | "erfc" | "tanh" | "logistic" | "logistic-tail" | "exp-op" => {
                let f = match op {
                    "gelu" => gelu_scalar,
                    "gelu-tanh" => gelu_tanh_scalar,
                    "exp" => exp_scalar,
                    "erfc" => erfc_scalar,
                    "tanh" => tanh_scalar,
                    "logistic" => logistic_scalar,
                    "logistic-tail" => logistic_tail_scalar,
                    _ => expf,
                };
                row.iter().for_each(|&x| out.extend_from_slice(&f(x).to_le_bytes()));
            }
            "logistic-rows" => {
                let mut r = row.to_vec();
                logistic_in_place_scalar(&mut r, cols);
                r.iter().for_each(|v| out.extend_from_slice(&v.to_le_bytes()));
            }
            "eigen-sum" => out.extend_from_slice(&eigen_sum_from_scalar(row, 0).to_le_bytes()),
            "halves" => row.iter().for_each(|&h| out.extend_from_slice(&half_to_f32(h as u16).to_le_bytes())),
            "int4" => {
                // a row of packed bytes (as floats, whole blocks) -> its values (as floats)
                let packed: Vec<u8> = row.iter().map(|&v| v as u8).collect();
                let mut values = vec![0i8; 2 * packed.len()];
                unpack_int4_scalar(&packed, &mut values);
                values.iter().for_each(|&v| out.extend_from_slice(&(v as f32).to_le_bytes()));
            }
            "dequant" => {
                let q: Vec<i8> = row[1..].iter().map(|&v| v as i8).collect();
                let mut y = vec![0.0f32; q.len()];
                dequantize_rows_scalar(&q, &row[..1], q.len(), &mut y);
                y.iter().for_each(|v| out.extend_from_slice(&v.to_le_bytes()));
            }
            "l2-norm" => {
                let mut y = vec![0.0f32; cols];
                l2_normalization(row, cols, &mut y);
                y.iter().for_each(|v| out.extend_from_slice(&v.to_le_bytes()));
            }
            "ort-erf" | "ort-gelu" | "ort-fast-gelu" | "ort-exp" | "ort-exp-scalef" | "ort-round-half" | "ort-exp-fma3"
            | "ort-exp-avx512" => {
                let f = match op {
                    "ort-erf" => ort_float::erf,
                    "ort-gelu" => ort_float::gelu_erf,
                    "ort-fast-gelu" => ort_float::fast_gelu,
                    "ort-exp" => ort_float::sum_exp,
                    "ort-round-half" => ort_float::round_half,
                    "ort-exp-fma3" => ort_float::exp_fma3,
                    "ort-exp-avx512" => ort_float::exp_scalef,
                    _ => ort_float::sum_exp_scalef,
                };
                row.iter().for_each(|&x| out.extend_from_slice(&f(x).to_le_bytes()));
            }
            "ort-softmax" | "ort-softmax-avx512" => {
                let mut r = row.to_vec();
                ort_float::softmax(&mut r, if op == "ort-softmax" { ort_float::OrtFloats::Avx2 } else { ort_float::OrtFloats::Avx512 });
                r.iter().for_each(|v| out.extend_from_slice(&v.to_le_bytes()));
            }
            "ort-softmax-function" | "ort-softmax-function-avx512" => {
                let mut r = row.to_vec();
                let floats = if op == "ort-softmax-function" { ort_float::OrtFloats::Avx2 } else { ort_float::OrtFloats::Avx512 };
                ort_float::softmax_function(&mut r, floats);
                r.iter().for_each(|v| out.extend_from_slice(&v.to_le_bytes()));
            }
            "quant-sym" | "quant-asym" => {
                let mut q = vec![0i16; cols];
                let p = if op == "quant-sym" { quantize_row_symmetric_scalar(row, &mut q) } else { quantize_row_asymmetric_scalar(row, &mut q) };
                out.extend_from_slice(&p.scale.to_le_bytes());
                out.extend_from_slice(&p.zero_point.to_le_bytes());
                q.iter().for_each(|v| out.extend_from_slice(&v.to_le_bytes()));
            }
            "ort-quantize" => {}
            _ => usage(),
        }
    }
    if op == "ort-quantize" {
        // The whole input is one tensor: f32 scale, i32 zero point, then i16 values.
        let mut t = TensorQuantized::new();
        t.quantize(&data, rows, cols);
        out.extend_from_slice(&t.scale.to_le_bytes());
        out.extend_from_slice(&t.zero_point.to_le_bytes());
        t.values[..rows * cols].iter().for_each(|v| out.extend_from_slice(&v.to_le_bytes()));
    }
    std::io::stdout().write_all(&out).expect("write stdout");
    exit(0)
}

fn usage() -> ! {
    eprintln!("usage: gelu START COUNT STEP | litert-fn tanh|logistic|gelu-tanh|exp|exp-nonpositive START COUNT STEP | ort-fn erf|gelu|gelu-mul|fast-gelu|exp|exp-scalef|exp-op|exp-op-scalef START COUNT STEP | ort-scale START COUNT STEP | round-half START COUNT STEP | quant sym|asym START COUNT STEP | quant-random sym|asym SEED ROWS | dequant SEED SCALES | halves START COUNT | int4 | int8 SEED | tensor-simd SEED | tensor-cases (stdin) | kernels SEED | reference gelu|gelu-tanh|exp|erfc|tanh|logistic|logistic-tail|exp-op|logistic-rows|l2-norm|eigen-sum|quant-sym|quant-asym|dequant|halves|int4|ort-erf|ort-gelu|ort-fast-gelu|ort-exp|ort-exp-scalef|ort-round-half|ort-exp-fma3|ort-exp-avx512|ort-softmax|ort-softmax-avx512|ort-softmax-function|ort-softmax-function-avx512|ort-quantize|ort-layer-norm|ort-skip-layer-norm|ort-m1-transpose-b | reference linear-f32 ROWS TENSOR_ROWS OUTS BIAS | reference int4-linear ROWS OUTS BIAS | reference reduce-sum|reduce-mean|reduce-max D0 D1 D2 D3 AXES | reference int8-requantize|int8-dequantize|int8-output|int8-table|int8-binary|int8-walk|int8-mean-4d ARGS");
    exit(2)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let number = |i: usize| -> u64 { args.get(i).and_then(|s| s.parse().ok()).unwrap_or_else(|| usage()) };
    let asymmetric = |i: usize| match args.get(i).map(String::as_str) {
        Some("sym") => false,
        Some("asym") => true,
        _ => usage(),
    };
    match args.first().map(String::as_str) {
        Some("gelu") => check_gelu(number(1), number(2), number(3)),
        Some("litert-fn") => check_litert_function(args.get(1).map(String::as_str).unwrap_or_else(|| usage()), number(2), number(3), number(4)),
        Some("ort-fn") => check_ort_function(args.get(1).map(String::as_str).unwrap_or_else(|| usage()), number(2), number(3), number(4)),
        Some("ort-scale") => check_ort_scale(number(1), number(2), number(3)),
        Some("round-half") => check_round_half(number(1), number(2), number(3)),
        Some("quant") => check_quant_patterns(asymmetric(1), number(2), number(3), number(4)),
        Some("quant-random") => check_quant_random(asymmetric(1), number(2), number(3)),
        Some("kernels") => check_kernels(number(1)),
        Some("dequant") => check_dequant(number(1), number(2)),
        Some("halves") => check_halves(number(1), number(2)),
        Some("int4") => check_int4(),
        Some("int8") => int8::check_int8(number(1)),
        Some("qdq") => qdq::check_qdq(number(1)),
        Some("tensor-simd") => tensor::check_batch_matmul(number(1)),
        Some("tensor-cases") => tensor::run_cases(),
        Some("reference") => reference(args.get(1).map(String::as_str).unwrap_or_else(|| usage()), &args[2.min(args.len())..]),
        _ => usage(),
    }
}
