//! Batch check program: encodes many texts in one process so they can be compared with the
//! reference `tokenizers` library.
//!
//! stdin:  count u32, then count x (length u32, UTF-8 bytes), little-endian. A length with its
//!         top bit set (PAIR) starts a pair: its text, then the second's (length u32, bytes) and
//!         the truncation (max_length u32, 0 for none; from_left u32).
//! stdout: for each text or pair: n u32, then n x (id, byte start, byte end, char start, char end,
//!         type id, special) u32; a pair the tokenizer cannot encode: u32::MAX.
//! stderr: one line of timings, `load_ns=... encode_ns=... texts=... tokens=...`.
//! Exit code 2 for malformed input or a bad blob.

use std::io::{Read, Write};
use std::process::exit;
use std::time::Instant;

use tokenizer::{embedded, Encoding, PairTruncation};

/// The top bit of a text's length: the text is the first of a pair.
const PAIR: u32 = 1 << 31;

fn fail(message: &str) -> ! {
    eprintln!("{message}");
    exit(2)
}

fn read_u32(input: &[u8], at: &mut usize) -> u32 {
    let Some(bytes) = input.get(*at..*at + 4) else { fail("input is truncated") };
    *at += 4;
    u32::from_le_bytes(bytes.try_into().unwrap())
}

fn read_text<'a>(input: &'a [u8], at: &mut usize, length: u32) -> &'a str {
    let end = at.checked_add(length as usize).unwrap_or(usize::MAX);
    let Some(bytes) = input.get(*at..end) else { fail("input is truncated") };
    *at = end;
    let Ok(text) = std::str::from_utf8(bytes) else { fail("a text is not UTF-8") };
    text
}

fn write_encoding(encoding: &Encoding, output: &mut Vec<u8>) {
    output.extend((encoding.ids.len() as u32).to_le_bytes());
    for i in 0..encoding.ids.len() {
        let (bytes, chars) = (encoding.offsets[i], encoding.char_offsets[i]);
        let row = [encoding.ids[i], bytes.0, bytes.1, chars.0, chars.1, encoding.type_ids[i], u32::from(encoding.special[i])];
        for value in row {
            output.extend(value.to_le_bytes());
        }
    }
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
        let length = read_u32(&input, &mut at);
        let text = read_text(&input, &mut at, length & !PAIR);
        let encoding_started = Instant::now();
        let encoding = if length & PAIR == 0 {
            Some(tokenizer.encode(text))
        } else {
            let second_length = read_u32(&input, &mut at);
            let second = read_text(&input, &mut at, second_length);
            let (max_length, from_left) = (read_u32(&input, &mut at) as usize, read_u32(&input, &mut at) != 0);
            let truncation = (max_length > 0).then_some(PairTruncation { max_length, from_left });
            tokenizer.encode_pair(text, second, truncation).ok()
        };
        encode_ns += encoding_started.elapsed().as_nanos();
        match encoding {
            Some(encoding) => {
                tokens += encoding.ids.len();
                write_encoding(&encoding, &mut output);
            }
            None => output.extend(u32::MAX.to_le_bytes()),
        }
    }
    std::io::stdout().write_all(&output).unwrap_or_else(|_| fail("cannot write stdout"));
    eprintln!("load_ns={load_ns} encode_ns={encode_ns} texts={count} tokens={tokens}");
}
