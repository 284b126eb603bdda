//! The pipeline of `Tokenizer::encode`, stage by stage as `tokenizers` runs it: added tokens are
//! split off the original text, the rest is normalized, pre-tokenized into words and each word
//! tokenized by the model; the post-processor's template puts the special tokens around it, and
//! the byte offsets are converted to code points.

use crate::blob::{Tokenizer, MODEL_WORDPIECE, SEQUENCE_A, UNK_ID};
use crate::piece::{Aligned, Piece, PieceToken};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Encoding {
    pub ids: Vec<u32>,
    /// (start, end) in bytes of the original text.
    pub offsets: Vec<(u32, u32)>,
    /// (start, end) in code points of the original text.
    pub char_offsets: Vec<(u32, u32)>,
}

impl Tokenizer<'_> {
    pub fn encode(&self, text: &str) -> Encoding {
        let mut ids = Vec::new();
        let mut offsets = Vec::new();
        for i in 0..self.post_template.len() {
            let item = self.post_template.get(i);
            if item == SEQUENCE_A {
                for (id, range) in self.encode_text(text) {
                    ids.push(id);
                    offsets.push(range);
                }
            } else {
                ids.push(item);
                offsets.push((0, 0));
            }
        }
        let char_offsets = char_offsets(text, &offsets);
        Encoding { ids, offsets, char_offsets }
    }

    /// (id, original byte range) for the text, without the post-processor's special tokens.
    fn encode_text(&self, text: &str) -> Vec<(u32, (u32, u32))> {
        let mut tokens = Vec::new();
        for (start, end, added_id) in self.split_added_tokens(text) {
            if let Some(id) = added_id {
                tokens.push((id, (start as u32, end as u32)));
                continue;
            }
            let mut piece = Piece {
                chars: text[start..end]
                    .char_indices()
                    .map(|(b, c)| Aligned { c, start: (start + b) as u32, end: (start + b + c.len_utf8()) as u32 })
                    .collect(),
                shift: start as u32,
            };
            self.normalize(&mut piece);
            if piece.chars.is_empty() {
                continue;
            }
            for word in self.pre_tokenize(piece) {
                for token in self.tokenize(&word) {
                    let range = (word.chars[token.start].start, word.chars[token.end - 1].end);
                    tokens.push((token.id, range));
                }
            }
        }
        tokens
    }

    fn tokenize(&self, word: &Piece) -> Vec<PieceToken> {
        let text = word.text();
        let unk = self.params.get(UNK_ID);
        match self.model {
            MODEL_WORDPIECE => self.wordpiece(&text, unk),
            _ => self.unigram(&text, unk),
        }
    }
}

/// Byte offsets to code point offsets, the way tokenizers' BytesToCharOffsetConverter does it: an
/// end at the end of the text becomes the char count; a start at the end is left as it is.
fn char_offsets(text: &str, offsets: &[(u32, u32)]) -> Vec<(u32, u32)> {
    let mut char_at_byte = vec![0u32; text.len()];
    for (i, (b, c)) in text.char_indices().enumerate() {
        char_at_byte[b..b + c.len_utf8()].fill(i as u32);
    }
    offsets
        .iter()
        .map(|&(start, end)| {
            let (start, end) = (start as usize, end as usize);
            match (char_at_byte.get(start), char_at_byte.get(end)) {
                (Some(&s), Some(&e)) => (s, e),
                (Some(&s), None) => {
                    let last = end.checked_sub(1).and_then(|b| char_at_byte.get(b)).map_or(s + 1, |&l| l + 1);
                    (s, last)
                }
                _ => (start as u32, end as u32),
            }
        })
        .collect()
}
