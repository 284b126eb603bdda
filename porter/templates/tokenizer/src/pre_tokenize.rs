//! The pre-tokenizers: a normalized piece split into words (BERT's whitespace and punctuation
//! splits, sentencepiece's Metaspace), each word then tokenized on its own.

use crate::blob::{
    Tokenizer, Words, BERT_PUNCTUATION, OP_METASPACE, OP_SPLIT_BERT_PUNCTUATION_ISOLATED, OP_SPLIT_WHITESPACE_REMOVED,
    PREPEND_ALWAYS, PREPEND_FIRST,
};
use crate::piece::{Piece, Split};

impl Tokenizer<'_> {
    pub(crate) fn pre_tokenize(&self, piece: Piece) -> Vec<Piece> {
        let mut pieces = vec![piece];
        for i in 0..self.pre_tokenizer.len() / 4 {
            let op = self.pre_tokenizer.from(4 * i);
            let mut next = Vec::with_capacity(pieces.len());
            for piece in pieces {
                match op.get(0) {
                    OP_SPLIT_WHITESPACE_REMOVED => piece.split(|c| self.is_whitespace(c), Split::Removed, &mut next),
                    OP_SPLIT_BERT_PUNCTUATION_ISOLATED => {
                        piece.split(|c| self.props(c) & BERT_PUNCTUATION != 0, Split::Isolated, &mut next)
                    }
                    OP_METASPACE => metaspace(piece, op, &mut next),
                    _ => next.push(piece),
                }
            }
            pieces = next;
        }
        pieces
    }
}

/// Replace each space with the replacement, prepend one if the scheme says so, then split
/// before every replacement character (Metaspace).
fn metaspace(mut piece: Piece, op: Words, out: &mut Vec<Piece>) {
    let replacement = char::from_u32(op.get(1)).unwrap_or('\u{2581}');
    let spaces: Vec<(usize, usize)> =
        piece.chars.iter().enumerate().filter(|(_, a)| a.c == ' ').map(|(i, _)| (i, i + 1)).collect();
    if !spaces.is_empty() {
        piece.replace_matches(&spaces, replacement.encode_utf8(&mut [0u8; 4]));
    }
    let prepend = match op.get(2) {
        PREPEND_ALWAYS => true,
        PREPEND_FIRST => piece.shift == 0,
        _ => false,
    };
    if prepend && piece.chars.first().is_some_and(|a| a.c != replacement) {
        let first = piece.chars[0].c;
        let mut changes = vec![(replacement, 0), (first, 1)];
        changes.extend(piece.chars[1..].iter().map(|a| (a.c, 0)));
        piece.transform(&changes, 0);
    }
    if op.get(3) != 0 {
        piece.split(|c| c == replacement, Split::MergedWithNext, out);
    } else if !piece.chars.is_empty() {
        out.push(piece);
    }
}
