//! porter bench's tract peer: one request on stdin, one reply on stdout (little endian).
//!
//! Request:
//!     magic  b"PTR1"
//!     u32    runs             forward passes to time on the same inputs
//!     u32    inputs           the ONNX graph's inputs, in the graph's order
//!     per input:
//!         u8     dtype        0: int64, 1: int32
//!         u32    rank, u32 dims[rank], values (8 or 4 bytes each)
//!     u64    model_len, model bytes (the .onnx file)
//! Reply:
//!     magic  b"PTR1"
//!     f64    load_ms          parse + input facts + into_optimized + into_runnable
//!     u32    runs, f64 ms[runs]   each forward pass (run) alone
//!     u32    rank, u32 dims[rank], f32 values    output 0 of the last run
//!
//! Load is timed apart from the forward pass: tract parses and optimises the graph when an
//! instance starts, which a Spin component pays on every request.

use std::io::{Read, Write};
use std::sync::Arc;
use std::time::Instant;

use tract_onnx::prelude::*;

const MAGIC: &[u8; 4] = b"PTR1";

fn fail(message: String) -> TractError {
    TractError::msg(message)
}

struct Feed {
    dtype: u8,
    dims: Vec<usize>,
    bytes: Vec<u8>,
}

struct Reader<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> TractResult<&'a [u8]> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.data.len());
        let end = end.ok_or_else(|| fail(format!("request truncated at byte {}", self.at)))?;
        let slice = &self.data[self.at..end];
        self.at = end;
        Ok(slice)
    }

    fn u32(&mut self) -> TractResult<usize> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into()?) as usize)
    }

    fn u64(&mut self) -> TractResult<usize> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into()?) as usize)
    }

    fn feed(&mut self) -> TractResult<Feed> {
        let dtype = self.take(1)?[0];
        let width = match dtype {
            0 => 8,
            1 => 4,
            other => return Err(fail(format!("unknown input dtype code {other}"))),
        };
        let rank = self.u32()?;
        let dims = (0..rank).map(|_| self.u32()).collect::<TractResult<Vec<_>>>()?;
        let count: usize = dims.iter().product();
        let bytes = self.take(count * width)?.to_vec();
        Ok(Feed { dtype, dims, bytes })
    }
}

impl Feed {
    fn datum_type(&self) -> DatumType {
        if self.dtype == 0 { i64::datum_type() } else { i32::datum_type() }
    }

    fn tensor(&self) -> TractResult<Tensor> {
        if self.dtype == 0 {
            let values: Vec<i64> =
                self.bytes.chunks_exact(8).map(|b| i64::from_le_bytes(b.try_into().unwrap())).collect();
            Tensor::from_shape(&self.dims, &values)
        } else {
            let values: Vec<i32> =
                self.bytes.chunks_exact(4).map(|b| i32::from_le_bytes(b.try_into().unwrap())).collect();
            Tensor::from_shape(&self.dims, &values)
        }
    }
}

fn load(model: &[u8], feeds: &[Feed]) -> TractResult<Arc<TypedRunnableModel>> {
    let mut graph = onnx().model_for_read(&mut &*model)?;
    for (slot, feed) in feeds.iter().enumerate() {
        let fact = InferenceFact::dt_shape(feed.datum_type(), &feed.dims);
        graph = graph.with_input_fact(slot, fact)?;
    }
    graph.into_optimized()?.into_runnable()
}

fn put_f64s(out: &mut Vec<u8>, values: &[f64]) {
    for v in values {
        out.extend_from_slice(&v.to_le_bytes());
    }
}

fn reply(load_ms: f64, run_ms: &[f64], logits: &Tensor) -> TractResult<Vec<u8>> {
    let mut out = MAGIC.to_vec();
    put_f64s(&mut out, &[load_ms]);
    out.extend_from_slice(&(run_ms.len() as u32).to_le_bytes());
    put_f64s(&mut out, run_ms);
    out.extend_from_slice(&(logits.rank() as u32).to_le_bytes());
    for &d in logits.shape() {
        out.extend_from_slice(&(d as u32).to_le_bytes());
    }
    for v in logits.to_plain_array_view::<f32>()?.iter() {
        out.extend_from_slice(&v.to_le_bytes());
    }
    Ok(out)
}

fn serve(request: &[u8]) -> TractResult<Vec<u8>> {
    let mut reader = Reader { data: request, at: 0 };
    if reader.take(4)? != MAGIC {
        return Err(fail(format!("request does not start with {MAGIC:?}")));
    }
    let runs = reader.u32()?;
    let inputs = reader.u32()?;
    let feeds = (0..inputs).map(|_| reader.feed()).collect::<TractResult<Vec<_>>>()?;
    let model_len = reader.u64()?;
    let model = reader.take(model_len)?;

    let start = Instant::now();
    let runnable = load(model, &feeds)?;
    let load_ms = start.elapsed().as_secs_f64() * 1e3;

    let tensors = feeds.iter().map(Feed::tensor).collect::<TractResult<Vec<_>>>()?;
    let mut run_ms = Vec::with_capacity(runs);
    let mut last = None;
    for _ in 0..runs {
        let values: TVec<TValue> = tensors.iter().map(|t| t.clone().into_tvalue()).collect();
        let start = Instant::now();
        let outputs = runnable.run(values)?;
        run_ms.push(start.elapsed().as_secs_f64() * 1e3);
        last = Some(outputs);
    }
    let outputs = last.ok_or_else(|| fail("the request asks for no runs".into()))?;
    let logits = outputs[0].cast_to::<f32>()?.into_owned();
    reply(load_ms, &run_ms, &logits)
}

/// Debian's wasi-libc (git 2022-05-10, what porter's Debian route links against) has no
/// realpath, which std's fs::canonicalize calls on wasm32-wasip1 and tract's path-based loaders
/// reach, so the module would not link. The runner never resolves a path (the model comes on
/// stdin): this realpath fails every call. Where wasi-libc has its own (rustup's self-contained
/// one) the linker takes this definition and leaves that archive member out.
#[no_mangle]
pub extern "C" fn realpath(_path: *const std::ffi::c_char, _resolved: *mut std::ffi::c_char) -> *mut std::ffi::c_char {
    std::ptr::null_mut()
}

fn main() {
    let mut request = Vec::new();
    let answer = std::io::stdin()
        .read_to_end(&mut request)
        .map_err(TractError::from)
        .and_then(|_| serve(&request));
    match answer {
        Ok(bytes) => std::io::stdout().write_all(&bytes).expect("stdout"),
        Err(e) => {
            eprintln!("tract peer: {e:?}");
            std::process::exit(2);
        }
    }
}
