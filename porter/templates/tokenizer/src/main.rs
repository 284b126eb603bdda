//! Batch check program: encodes many texts in one process so they can be compared with the
//! reference `tokenizers` library.
//!
//! stdin:  count u32, then count x (length u32, UTF-8 bytes), little-endian.
//! stdout: for each text: n u32, then n x (id, byte start, byte end, char start, char end) u32.
//! stderr: one line of timings, `load_ns=... encode_ns=... texts=... tokens=...`.
//! Exit code 2 for malformed input or a bad blob.

use std::io::{Read, Write};
use std::process::exit;
use std::time::Instant;

use tokenizer::embedded;

fn fail(message: &str) -> ! {
    eprintln!("{message}");
    exit(2)
}

fn read_u32(input: &[u8], at: &mut usize) -> u32 {
    let Some(bytes) = input.get(*at..*at + 4) else { fail("input is truncated") };
    *at += 4;
    u32::from_le_bytes(bytes.try_into().unwrap())
}

fn main() {
    let loading = Instant::now();
    let tokenizer = embedded().unwrap_or_else(|e| fail(&e.to_string()));
    let load_ns = loading.elapsed().as_nanos();

    let mut input = Vec::new();
    if std::io::stdin().read_to_end(&mut input).is_err() {
        fail("cannot read stdin");
    }
    let mut at = 0;
    let count = read_u32(&input, &mut at);
    let mut output: Vec<u8> = Vec::new();
    let (mut encode_ns, mut tokens) = (0u128, 0usize);
    for _ in 0..count {
        let length = read_u32(&input, &mut at) as usize;
        let Some(bytes) = input.get(at..at + length) else { fail("input is truncated") };
        at += length;
        let Ok(text) = std::str::from_utf8(bytes) else { fail("a text is not UTF-8") };
        let encoding_started = Instant::now();
        let encoding = tokenizer.encode(text);
        encode_ns += encoding_started.elapsed().as_nanos();
        tokens += encoding.ids.len();
        output.extend((encoding.ids.len() as u32).to_le_bytes());
        for i in 0..encoding.ids.len() {
            let (bytes, chars) = (encoding.offsets[i], encoding.char_offsets[i]);
            for value in [encoding.ids[i], bytes.0, bytes.1, chars.0, chars.1] {
                output.extend(value.to_le_bytes());
            }
        }
    }
    std::io::stdout().write_all(&output).unwrap_or_else(|_| fail("cannot write stdout"));
    eprintln!("load_ns={load_ns} encode_ns={encode_ns} texts={count} tokens={tokens}");
}
