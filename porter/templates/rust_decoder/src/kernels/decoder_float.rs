//! onnxruntime's float kernels a decoder needs beyond the encoder's (porter/reference/ort/floats.py
//! defines each; porter's tests run every one here against it on millions of inputs):
//! MLAS's logistic and tanh, the fused FastGelu and Gelu kernels, RMSNorm's ops, rotary
//! positions, and an activation spelled out op by op, run as a small program.
//!
//! wasm has no fma and Rust never contracts `a * b + c`, so each product and sum rounds where
//! onnxruntime's rounds; MLAS's fused multiply-adds go through `ort_float::fma`.

use super::litert::eigen::eigen_mean;
use super::ort::float::{erf, fma, gelu_erf_in_place, gelu_erf_mul_in_place};

// ---- MLAS's logistic (MlasLogisticKernelFma3: Sigmoid and QuickGelu on AVX2) ---------------

const LOGISTIC_RANGE: f32 = 18.0;
// the float32 bit patterns of porter/reference/ort/floats.py's _LOGISTIC_P and _LOGISTIC_Q
const LOGISTIC_P: [u32; 5] = [0x2e403551, 0x33f84ecb, 0x387f413b, 0x3c0b7d58, 0x3e7e3f32];
const LOGISTIC_Q: [u32; 6] = [0x2b2bc4f5, 0x31c5f27b, 0x36d317dd, 0x3adf153f, 0x3def3e18, 0x3f7e3f34];

/// x clamped to [-18, 18]; p(x^2) * x and q(x^2) by fma; max(0, p / q + 0.5).
pub fn logistic(x: f32) -> f32 {
    let v = if x < -LOGISTIC_RANGE { -LOGISTIC_RANGE } else if x > LOGISTIC_RANGE { LOGISTIC_RANGE } else { x };
    let v2 = v * v;
    let mut p = fma(v2, f32::from_bits(LOGISTIC_P[0]), f32::from_bits(LOGISTIC_P[1]));
    for &c in &LOGISTIC_P[2..] {
        p = fma(v2, p, f32::from_bits(c));
    }
    let mut q = fma(v2, f32::from_bits(LOGISTIC_Q[0]), f32::from_bits(LOGISTIC_Q[1]));
    for &c in &LOGISTIC_Q[2..] {
        q = fma(v2, q, f32::from_bits(c));
    }
    let r = v * p / q + 0.5;
    // vmaxps(0, r): r unless 0 is larger; a NaN r gives r
    if r < 0.0 { 0.0 } else { r }
}

/// QuickGelu (alpha 1): x * logistic(x); on AVX-512F CPUs MLAS's path for it never lets the
/// logistic exceed 1, which the FMA3 polynomial does near x = 17.84.
pub fn quick_gelu(x: f32, capped: bool) -> f32 {
    let y = logistic(x);
    x * if capped && y > 1.0 { 1.0 } else { y }
}

// ---- MLAS's tanh (Eigen's coefficients) -------------------------------------------------------

// The encoder crate's kernels/ort/float/math.rs holds the same function (tanh, with FastGelu), in
// a module built around the encoder's lanes and program types; the decoder crate cannot include it.
const TANH_P: [u32; 7] = [0xa59f25c0, 0x2a61337e, 0xaebd37ff, 0x335c0041, 0x3779434a, 0x3a270ded, 0x3ba059dc];
const TANH_Q: [u32; 4] = [0x35a0d3d8, 0x38f895d6, 0x3b14aa05, 0x3ba059dd];

/// x clamped to [-9, 9]; odd and even polynomials in x^2 by fma; their quotient.
pub fn tanh(x: f32) -> f32 {
    let v = if x < -9.0 { -9.0 } else if x > 9.0 { 9.0 } else { x };
    let v2 = v * v;
    let mut p = fma(v2, f32::from_bits(TANH_P[0]), f32::from_bits(TANH_P[1]));
    for &c in &TANH_P[2..] {
        p = fma(p, v2, f32::from_bits(c));
    }
    let p = p * v;
    let mut q = fma(v2, f32::from_bits(TANH_Q[0]), f32::from_bits(TANH_Q[1]));
    for &c in &TANH_Q[2..] {
        q = fma(q, v2, f32::from_bits(c));
    }
    p / q
}

// ---- the fused GELU kernels (contrib_ops/cpu/bert/bias_gelu.cc) --------------------------------

const FAST_GELU_B: f32 = f32::from_bits(0x3f4c422a); // sqrt(2 / pi)
const FAST_GELU_C: f32 = f32::from_bits(0x3d122279); // 0.044715 * sqrt(2 / pi)
const SQRT1_2: f32 = f32::from_bits(0x3f3504f3);

/// FastGelu: t = x * ((C * x) * x + B); (x * 0.5) * (tanh(t) + 1).
pub fn fast_gelu(x: f32) -> f32 {
    let t = (FAST_GELU_C * x * x + FAST_GELU_B) * x;
    (x * 0.5) * (tanh(t) + 1.0)
}

/// Gelu and BiasGelu (after the bias add): (x * 0.5) * (erf(x * (1 / sqrt 2)) + 1).
pub fn gelu(x: f32) -> f32 {
    (x * 0.5) * (erf(x * SQRT1_2) + 1.0)
}

// ---- an activation spelled out op by op ---------------------------------------------------------

/// An operand: the activation's input, an earlier instruction's result, or a constant.
#[derive(Clone, Copy, Debug)]
pub enum Arg {
    X,
    T(usize),
    C(f32),
}

/// The graph's elementwise ops (porter/reference/ops.py), each as onnxruntime computes it.
#[derive(Clone, Copy, Debug)]
pub enum Op {
    Add,
    Sub,
    Mul,
    Div,
    Maximum,
    Minimum,
    Square,
    Cube,
    Erf,
    Tanh,
    Sigmoid,
    Neg,
    Sqrt,
    Abs,
    Relu,
    Reciprocal,
}

#[derive(Clone, Copy, Debug)]
pub struct Instr {
    pub op: Op,
    pub a: Arg,
    pub b: Arg,
}

/// The most instructions a program may have (porter's codegen checks it).
pub const MAX_INSTRUCTIONS: usize = 16;

fn operate(op: Op, a: f32, b: f32) -> f32 {
    match op {
        Op::Add => a + b,
        Op::Sub => a - b,
        Op::Mul => a * b,
        Op::Div => a / b,
        // std::max / std::min as onnxruntime's kernels call them: a unless b is strictly beyond it
        Op::Maximum => if a < b { b } else { a },
        Op::Minimum => if b < a { b } else { a },
        Op::Square => a * a,
        Op::Cube => a * a * a, // onnxruntime's Pow with exponent 3
        Op::Erf => erf(a),
        Op::Tanh => tanh(a),
        Op::Sigmoid => logistic(a),
        Op::Neg => -a,
        Op::Sqrt => a.sqrt(),
        Op::Abs => a.abs(),
        // numpy's maximum(x, 0): NaN stays NaN
        Op::Relu => if a.is_nan() || a > 0.0 { a } else { 0.0 },
        Op::Reciprocal => 1.0 / a,
    }
}

/// The program's last result for one input value.
pub fn run(program: &[Instr], x: f32) -> f32 {
    let mut t = [0.0f32; MAX_INSTRUCTIONS];
    let value = |arg: Arg, t: &[f32; MAX_INSTRUCTIONS]| match arg {
        Arg::X => x,
        Arg::T(k) => t[k],
        Arg::C(c) => c,
    };
    for (k, instr) in program.iter().enumerate() {
        t[k] = operate(instr.op, value(instr.a, &t), value(instr.b, &t));
    }
    t[program.len() - 1]
}

/// How an MLP's activation is computed: onnxruntime's fused kernel, or the graph's own ops
/// (`GeluDiv` when they are x * ((erf(x / sqrt 2) + 1) * 0.5), which the encoder's vectorised
/// kernel computes in that order).
#[derive(Clone, Copy, Debug)]
pub enum Activation {
    Gelu,
    GeluDiv,
    FastGelu,
    /// onnxruntime's QuickGelu (alpha 1): x * logistic(x), the logistic capped at 1 on AVX-512F
    /// CPUs (porter/reference/ort/floats.py quick_gelu)
    QuickGelu { capped: bool },
    Ops(&'static [Instr]),
}

pub fn activate_in_place(act: Activation, values: &mut [f32]) {
    match act {
        // (x * 0.5) * (e + 1) and x * ((e + 1) * 0.5) are the same float: both halvings are exact
        // (e + 1 rounds to 1 wherever x is too small for x * 0.5 to be)
        Activation::Gelu => gelu_erf_mul_in_place(values),
        Activation::GeluDiv => gelu_erf_in_place(values),
        Activation::FastGelu => values.iter_mut().for_each(|v| *v = fast_gelu(*v)),
        Activation::QuickGelu { capped } => values.iter_mut().for_each(|v| *v = quick_gelu(*v, capped)),
        Activation::Ops(program) => values.iter_mut().for_each(|v| *v = run(program, *v)),
    }
}

// ---- RMSNorm's ops and rotary positions -------------------------------------------------------

/// mean(x^2) in Eigen's order (onnxruntime's ReduceMean over a row), + eps, sqrt, then
/// x * (1 / that) (`reciprocal`) or x / that, then * gamma: each op rounded on its own.
pub fn rms_norm_row(x: &[f32], gamma: Option<&[f32]>, eps: f32, reciprocal: bool, squares: &mut [f32], out: &mut [f32]) {
    let n = x.len();
    for (s, &v) in squares[..n].iter_mut().zip(x) {
        *s = v * v;
    }
    let std = (eigen_mean(&squares[..n]) + eps).sqrt();
    let inverse = 1.0 / std;
    for i in 0..n {
        let y = if reciprocal { x[i] * inverse } else { x[i] / std };
        out[i] = gamma.map_or(y, |g| y * g[i]);
    }
}

/// SimplifiedLayerNormalization's kernel on one row (at least 16 values): the sum of squares in
/// eight fma lanes over blocks of eight, reduced ((0 + 4) + (2 + 6)) + ((1 + 5) + (3 + 7)); a
/// tail of four or more adds four rounded squares in order, the last one to three are fma'd
/// (LayerNormalization's variance, of x itself: kernels/ort/float/ keeps that one private);
/// then 1 / sqrt(sum / n + eps), then (x * that) * gamma.
pub fn simplified_layer_norm_row(x: &[f32], gamma: &[f32], eps: f32, out: &mut [f32]) {
    let n = x.len();
    let mut lanes = [0.0f32; 8];
    let blocks = n - n % 8;
    for block in x[..blocks].chunks_exact(8) {
        for (lane, &v) in lanes.iter_mut().zip(block) {
            *lane = fma(v, v, *lane);
        }
    }
    let half = [lanes[0] + lanes[4], lanes[1] + lanes[5], lanes[2] + lanes[6], lanes[3] + lanes[7]];
    let mut total = (half[0] + half[2]) + (half[1] + half[3]);
    let mut i = blocks;
    if n - blocks >= 4 {
        for &v in &x[blocks..blocks + 4] {
            total += v * v;
        }
        i += 4;
    }
    for &v in &x[i..] {
        total = fma(v, v, total);
    }
    let inv_std = 1.0 / (total / n as f32 + eps).sqrt();
    for i in 0..n {
        out[i] = x[i] * inv_std * gamma[i];
    }
}

/// How rotary positions turn a head's values: halves (x1, x2) -> (-x2, x1), or pairs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rotate {
    Half,
    Pairs,
}

/// out = x * cos + rotate(x) * sin for one head (the tables' row of its position).
pub fn rotary(x: &[f32], cos: &[f32], sin: &[f32], style: Rotate, out: &mut [f32]) {
    let n = x.len();
    let half = n / 2;
    for d in 0..n {
        let turned = match style {
            Rotate::Half => if d < half { -x[d + half] } else { x[d - half] },
            Rotate::Pairs => if d % 2 == 0 { -x[d + 1] } else { x[d - 1] },
        };
        out[d] = x[d] * cos[d] + turned * sin[d];
    }
}
