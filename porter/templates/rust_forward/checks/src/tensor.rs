//! Checks of the tensor steps (kernels/common/tensor.rs): LiteRT's BATCH_MATMUL row kernel,
//! simd128 against scalar on random shapes, and every tensor kernel on cases porter's tests make
//! and compare with their numpy twin (porter.reference.execute.tensor_step).
//!
//! `tensor-cases` reads stdin: cases one after the other, each a u32 byte count and a header
//!     KERNEL out=DTYPE:D0,D1,D2,D3 counts=C0,C1,C2,C3 operands=DTYPE:D0,D1,D2,D3;...
//! (KERNEL: see `kernel`), then a u32 word count and the operands' values as 32-bit words, each operand
//! in a slot of its own; it writes for each case a u32 word count and the output slot's words
//! (zeros outside the box `counts`).

use std::io::{Read, Write};

use crate::kernels::common::exact::{Arithmetic, Comparison};
use crate::kernels::common::tensor::{run, Data, ElementType, Pointwise, TensorKernel, TensorOperand, TensorStep};
use crate::kernels::litert::batch_matmul::{row_product, row_product_scalar};
use crate::{Rng, Tally};

/// `tensor-simd SEED`: LiteRT's BATCH_MATMUL rows, simd128 against scalar.
pub fn check_batch_matmul(seed: u64) -> ! {
    let mut rng = Rng(seed | 1);
    let mut tally = Tally::new("tensor-simd");
    for trial in 0..400 {
        let (k, n) = (1 + rng.below(70) as usize, 1 + rng.below(40) as usize);
        let ldb = n + rng.below(5) as usize;
        let a: Vec<f32> = (0..k).map(|_| rng.unit() * 8.0).collect();
        let b: Vec<f32> = (0..k * ldb).map(|_| rng.unit() * 8.0).collect();
        let (mut simd, mut scalar) = (vec![0.0f32; n], vec![0.0f32; n]);
        row_product(&a, &b, ldb, &mut simd);
        row_product_scalar(&a, &b, ldb, &mut scalar);
        tally.record(crate::same_values(&simd, &scalar), || format!("batch_matmul row trial {trial}: k={k} n={n}"));
    }
    tally.finish()
}

fn dtype(name: &str) -> ElementType {
    match name {
        "F32" => ElementType::F32,
        "I32" => ElementType::I32,
        "I64" => ElementType::I64,
        "Bool" => ElementType::Bool,
        _ => panic!("tensor-cases: dtype {name}"),
    }
}

fn numbers(list: &str) -> Vec<usize> {
    list.split(',').map(|v| v.parse().expect("tensor-cases: a number")).collect()
}

fn four(list: &str) -> [usize; 4] {
    numbers(list).try_into().expect("tensor-cases: four axes")
}

fn typed(spec: &str) -> (ElementType, [usize; 4]) {
    let (d, shape) = spec.split_once(':').expect("tensor-cases: DTYPE:SHAPE");
    (dtype(d), four(shape))
}

/// KERNEL: KIND:FIELD=VALUE,FIELD=VALUE,... with porter.codegen.tensor.kernel_spec's fields: a
/// number, true or false, a float as b<its bits>, four numbers joined by '.'; Pointwise:op=NAME
/// (Arithmetic and Compare with how=NAME).
fn kernel(spec: &str) -> TensorKernel {
    let (kind, fields) = spec.split_once(':').unwrap_or((spec, ""));
    let value = |name: &str| -> &str {
        fields.split(',').find_map(|f| f.strip_prefix(name).and_then(|v| v.strip_prefix('=')))
            .unwrap_or_else(|| panic!("tensor-cases: {kind} without {name}"))
    };
    let n = |name: &str| -> usize { value(name).parse().expect("tensor-cases: a number") };
    let b = |name: &str| value(name) == "true";
    let list = |name: &str| -> [usize; 4] { numbers(&value(name).replace('.', ",")).try_into().expect("four values") };
    match kind {
        "MatMul" => TensorKernel::MatMul {
            adj_b: b("adj_b"),
            alpha: f32::from_bits(value("alpha").strip_prefix('b').unwrap().parse().unwrap()),
            onnxruntime: b("onnxruntime"),
        },
        "Move" => TensorKernel::Move { perm: list("perm") },
        "GatherElements" => TensorKernel::GatherElements { axis: n("axis"), negative_wraps: b("negative_wraps") },
        "Gather" => TensorKernel::Gather { axis_len: n("axis_len"), inner: n("inner"),
                                           indices: n("indices"), negative_wraps: b("negative_wraps") },
        "GatherNd" => TensorKernel::GatherNd { depth: n("depth"), dims: list("dims"), strides: list("strides"),
                                               inner: n("inner"), negative_wraps: b("negative_wraps") },
        "CumSum" => TensorKernel::CumSum { axis: n("axis"), exclusive: b("exclusive"), reverse: b("reverse") },
        "Lookup" => TensorKernel::Lookup { rows: n("rows"), width: n("width"), scaled: b("scaled") },
        "Dequantize" => TensorKernel::Dequantize {
            scale: f32::from_bits(value("scale").strip_prefix('b').unwrap().parse().unwrap()),
            zero_point: value("zero_point").parse().unwrap(),
        },
        "Pointwise" => TensorKernel::Pointwise(match value("op") {
            "Arithmetic" => Pointwise::Arithmetic(match value("how") {
                "Add" => Arithmetic::Add,
                "Sub" => Arithmetic::Sub,
                "Mul" => Arithmetic::Mul,
                "Maximum" => Arithmetic::Maximum,
                "Minimum" => Arithmetic::Minimum,
                other => panic!("tensor-cases: arithmetic {other}"),
            }),
            "Compare" => Pointwise::Compare(match value("how") {
                "Equal" => Comparison::Equal,
                "NotEqual" => Comparison::NotEqual,
                "Less" => Comparison::Less,
                "LessEqual" => Comparison::LessEqual,
                "Greater" => Comparison::Greater,
                "GreaterEqual" => Comparison::GreaterEqual,
                other => panic!("tensor-cases: comparison {other}"),
            }),
            "Div" => Pointwise::Div,
            "Neg" => Pointwise::Neg,
            "Abs" => Pointwise::Abs,
            "Sign" => Pointwise::Sign,
            "Ceil" => Pointwise::Ceil,
            "Floor" => Pointwise::Floor,
            "Log" => Pointwise::Log,
            "LogOrt" => Pointwise::LogOrt,
            "Cast" => Pointwise::Cast,
            "And" => Pointwise::And,
            "Or" => Pointwise::Or,
            "Not" => Pointwise::Not,
            "Where" => Pointwise::Where,
            other => panic!("tensor-cases: pointwise {other}"),
        }),
        other => panic!("tensor-cases: kernel {other}"),
    }
}

/// `tensor-cases`: every case on stdin through its kernel (see the module's comment).
pub fn run_cases() -> ! {
    let mut input = Vec::new();
    std::io::stdin().read_to_end(&mut input).expect("read stdin");
    let word = |at: usize| u32::from_le_bytes(input[at..at + 4].try_into().unwrap());
    let mut at = 0;
    let mut out = Vec::new();
    while at < input.len() {
        let length = word(at) as usize;
        let header = String::from_utf8(input[at + 4..at + 4 + length].to_vec()).expect("tensor-cases: header");
        at += 4 + length;
        let count = word(at) as usize;
        let words: Vec<f32> = (0..count).map(|i| f32::from_bits(word(at + 4 + 4 * i))).collect();
        at += 4 + 4 * count;
        let result = run_case(&header, &words);
        out.extend_from_slice(&(result.len() as u32).to_le_bytes());
        result.iter().for_each(|v| out.extend_from_slice(&v.to_bits().to_le_bytes()));
    }
    std::io::stdout().write_all(&out).expect("write stdout");
    std::process::exit(0)
}

fn run_case(header: &str, words: &[f32]) -> Vec<f32> {
    let mut fields = header.split(' ');
    let kernel = kernel(fields.next().unwrap());
    let field = |name: &str, fields: &mut std::str::Split<char>| {
        let f = fields.next().expect("tensor-cases: field");
        f.strip_prefix(name).expect("tensor-cases: field name").to_string()
    };
    let (out_dtype, shape) = typed(&field("out=", &mut fields));
    let counts = four(&field("counts=", &mut fields));
    let specs: Vec<(ElementType, [usize; 4])> = field("operands=", &mut fields).split(';').map(typed).collect();
    // each operand in a slot of its own, slot i + 1 (slot 0 is the output's)
    let mut slots = vec![Vec::new()];
    let mut start = 0;
    for (d, s) in &specs {
        let len = s.iter().product::<usize>() * d.words();
        slots.push(words[start..start + len].to_vec());
        start += len;
    }
    let operands = specs.iter().enumerate()
        .map(|(i, &(dtype, shape))| TensorOperand { data: Data::Slot(i + 1), dtype, shape })
        .collect();
    let step = TensorStep { kernel, operands, out: 0, dtype: out_dtype, shape };
    let mut y = vec![0.0f32; shape.iter().product::<usize>() * out_dtype.words()];
    run(&step, counts, &slots, &[], &mut y);
    y
}
