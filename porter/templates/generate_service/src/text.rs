//! Token bytes to text as they come: byte-level tokens can split a character, so an incomplete
//! UTF-8 sequence at the end is held back until the next token completes it. Invalid bytes
//! become U+FFFD exactly as `String::from_utf8_lossy` (and the reference tokenizer's decoder)
//! replaces them, so the pieces joined equal the lossy decoding of all the bytes at once.

#[derive(Default)]
pub struct Utf8Stream {
    pending: Vec<u8>,
}

impl Utf8Stream {
    /// The text that `bytes` complete.
    pub fn push(&mut self, bytes: &[u8]) -> String {
        self.pending.extend_from_slice(bytes);
        let mut text = String::new();
        loop {
            let error = match std::str::from_utf8(&self.pending) {
                Ok(valid) => {
                    text.push_str(valid);
                    self.pending.clear();
                    return text;
                }
                Err(error) => error,
            };
            let valid = error.valid_up_to();
            text.push_str(&String::from_utf8_lossy(&self.pending[..valid]));
            match error.error_len() {
                Some(invalid) => {
                    text.push('\u{FFFD}');
                    self.pending.drain(..valid + invalid);
                }
                // An incomplete sequence at the end: wait for more bytes.
                None => {
                    self.pending.drain(..valid);
                    return text;
                }
            }
        }
    }

    /// What is left once no more bytes will come.
    pub fn finish(self) -> String {
        String::from_utf8_lossy(&self.pending).into_owned()
    }
}
