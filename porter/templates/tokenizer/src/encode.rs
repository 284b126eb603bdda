//! The pipeline of `Tokenizer::encode`, stage by stage as `tokenizers` runs it: added tokens are
//! split off the original text, the rest is normalized, pre-tokenized into words and each word
//! tokenized by the model; the post-processor's template puts the special tokens around it (and
//! gives every token its type id), and the byte offsets are converted to code points.
//!
//! `encode_pair` encodes two texts through the pair template ([CLS] a [SEP] b [SEP] for BERT,
//! <s> a </s></s> b </s> for RoBERTa's and XLM-R's), each text's offsets into that text, after
//! cutting the two to fit a maximum length the way tokenizers' "longest_first" truncation does.

use crate::blob::{Tokenizer, CONTINUING_PREFIX_LENGTH, CONTINUING_PREFIX_OFFSET, MODEL_WORDPIECE, SEQUENCE_A, SEQUENCE_B, UNK_ID};
use crate::piece::{Aligned, Piece, PieceToken};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Encoding {
    pub ids: Vec<u32>,
    /// (start, end) in bytes of the original text (of its own text, for a pair).
    pub offsets: Vec<(u32, u32)>,
    /// (start, end) in code points of the original text.
    pub char_offsets: Vec<(u32, u32)>,
    /// The template's type id of each token (1 on a BERT pair's second text and its [SEP]).
    pub type_ids: Vec<u32>,
    /// Which tokens the post-processor added (tokenizers' special_tokens_mask).
    pub special: Vec<bool>,
    /// The code points of each token's vocabulary entry ("##ing": 5), 0 for a special token:
    /// what the Hugging Face token-classification pipeline compares with the text's to tell
    /// sub-words.
    pub token_chars: Vec<u32>,
}

/// One token of a text before the template: id, original byte range, vocabulary code points.
#[derive(Clone, Copy)]
struct TextToken {
    id: u32,
    range: (u32, u32),
    chars: u32,
}

/// How a pair is cut to fit: at most `max_length` tokens with the template's, each text cut
/// from its end (or its start with `from_left`).
#[derive(Clone, Copy)]
pub struct PairTruncation {
    pub max_length: usize,
    pub from_left: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PairError {
    /// The tokenizer.json has no pair template.
    NoPairTemplate,
    /// max_length is shorter than the template's own tokens.
    TooShort,
}

impl std::fmt::Display for PairError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PairError::NoPairTemplate => write!(f, "the tokenizer has no pair template"),
            PairError::TooShort => write!(f, "the maximum length is shorter than the pair template's special tokens"),
        }
    }
}

impl Tokenizer<'_> {
    pub fn encode(&self, text: &str) -> Encoding {
        let tokens = self.encode_text(text);
        self.apply_template(self.single_template, [(text, tokens.as_slice()), ("", &[])])
    }

    pub fn has_pair_template(&self) -> bool {
        self.pair_template.len() > 0
    }

    /// The pair (a, b) through the pair template, cut by `truncation` if given.
    pub fn encode_pair(&self, a: &str, b: &str, truncation: Option<PairTruncation>) -> Result<Encoding, PairError> {
        if !self.has_pair_template() {
            return Err(PairError::NoPairTemplate);
        }
        let (mut first, mut second) = (self.encode_text(a), self.encode_text(b));
        if let Some(truncation) = truncation {
            let added = (0..self.pair_template.len() / 2).filter(|&i| self.pair_template.get(2 * i) < SEQUENCE_B).count();
            let room = truncation.max_length.checked_sub(added).ok_or(PairError::TooShort)?;
            let (n1, n2) = longest_first(first.len(), second.len(), room);
            for (tokens, keep) in [(&mut first, n1), (&mut second, n2)] {
                cut(tokens, keep, truncation.from_left);
            }
        }
        Ok(self.apply_template(self.pair_template, [(a, first.as_slice()), (b, second.as_slice())]))
    }

    /// The continuing-subword prefix of the model ("##" for WordPiece), None for a model without one.
    pub fn continuing_subword_prefix(&self) -> Option<&str> {
        let prefix = self.string(self.params.get(CONTINUING_PREFIX_OFFSET), self.params.get(CONTINUING_PREFIX_LENGTH));
        (self.model == MODEL_WORDPIECE && !prefix.is_empty()).then_some(prefix)
    }

    fn apply_template(&self, template: crate::blob::Words<'_>, texts: [(&str, &[TextToken]); 2]) -> Encoding {
        let mut encoding = Encoding {
            ids: Vec::new(), offsets: Vec::new(), char_offsets: Vec::new(), type_ids: Vec::new(), special: Vec::new(),
            token_chars: Vec::new(),
        };
        for i in 0..template.len() / 2 {
            let (item, type_id) = (template.get(2 * i), template.get(2 * i + 1));
            if item == SEQUENCE_A || item == SEQUENCE_B {
                let (text, tokens) = texts[usize::from(item == SEQUENCE_B)];
                let offsets: Vec<(u32, u32)> = tokens.iter().map(|t| t.range).collect();
                encoding.char_offsets.extend(char_offsets(text, &offsets));
                encoding.offsets.extend(offsets);
                encoding.ids.extend(tokens.iter().map(|t| t.id));
                encoding.token_chars.extend(tokens.iter().map(|t| t.chars));
                encoding.type_ids.extend(std::iter::repeat(type_id).take(tokens.len()));
                encoding.special.extend(std::iter::repeat(false).take(tokens.len()));
            } else {
                encoding.ids.push(item);
                encoding.offsets.push((0, 0));
                encoding.char_offsets.push((0, 0));
                encoding.token_chars.push(0);
                encoding.type_ids.push(type_id);
                encoding.special.push(true);
            }
        }
        encoding
    }

    /// The text's tokens, without the post-processor's special tokens.
    fn encode_text(&self, text: &str) -> Vec<TextToken> {
        let mut tokens = Vec::new();
        let prefix_chars = self.continuing_subword_prefix().map_or(0, |p| p.chars().count()) as u32;
        for (start, end, added) in self.split_added_tokens(text) {
            if let Some((id, length)) = added {
                let content = text[start..end].trim_start_matches(|c| self.is_whitespace(c));
                let chars = content[..length.min(content.len())].chars().count() as u32;
                tokens.push(TextToken { id, range: (start as u32, end as u32), chars });
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
                    let continues = token.start > 0 && self.model == MODEL_WORDPIECE;
                    let chars = (token.end - token.start) as u32 + if continues { prefix_chars } else { 0 };
                    tokens.push(TextToken { id: token.id, range, chars });
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

/// How many tokens of each text tokenizers' "longest_first" keeps of n1 and n2 in `room`: the
/// shorter text whole if the longer one can give up the rest, else both cut to about half.
fn longest_first(n1: usize, n2: usize, room: usize) -> (usize, usize) {
    if n1 + n2 <= room {
        return (n1, n2);
    }
    let short = n1.min(n2);
    let (mut keep_short, mut keep_long) = (short, if short > room { short } else { short.max(room - short) });
    if keep_short + keep_long > room {
        keep_short = room / 2;
        keep_long = keep_short + room % 2;
    }
    if n1 > n2 {
        (keep_long, keep_short)
    } else {
        (keep_short, keep_long)
    }
}

/// Keeps `keep` tokens: the first ones, or the last ones when cutting from the left.
fn cut(tokens: &mut Vec<TextToken>, keep: usize, from_left: bool) {
    if tokens.len() <= keep {
        return;
    }
    if from_left {
        tokens.drain(..tokens.len() - keep);
    } else {
        tokens.truncate(keep);
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
