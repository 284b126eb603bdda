//! The WordPiece model (BERT's vocabularies).

use crate::blob::{Tokenizer, CONTINUING_PREFIX_LENGTH, CONTINUING_PREFIX_OFFSET, MAX_INPUT_CHARS_PER_WORD};
use crate::piece::PieceToken;

impl Tokenizer<'_> {
    /// Greedy longest-match-first; one unknown token for the whole word if any part fails.
    pub(crate) fn wordpiece(&self, word: &str, unk: u32) -> Vec<PieceToken> {
        let char_count = word.chars().count();
        let whole_unknown = vec![PieceToken { id: unk, start: 0, end: char_count }];
        if char_count > self.params.get(MAX_INPUT_CHARS_PER_WORD) as usize {
            return whole_unknown;
        }
        let prefix = self.string(self.params.get(CONTINUING_PREFIX_OFFSET), self.params.get(CONTINUING_PREFIX_LENGTH));
        let continuation_root = self.trie.walk(0, prefix.as_bytes());
        let bytes = word.as_bytes();
        let mut tokens = Vec::new();
        let (mut start, mut start_char) = (0, 0);
        while start < bytes.len() {
            let root = if start == 0 { Some(0) } else { continuation_root };
            let Some(mut node) = root else { return whole_unknown };
            let mut longest: Option<(usize, u32)> = None;
            for (k, &b) in bytes[start..].iter().enumerate() {
                match self.trie.child(node, b) {
                    Some(child) => node = child,
                    None => break,
                }
                if let Some(id) = self.trie.token_id(node) {
                    longest = Some((start + k + 1, id));
                }
            }
            let Some((end, id)) = longest else { return whole_unknown };
            let end_char = start_char + word[start..end].chars().count();
            tokens.push(PieceToken { id, start: start_char, end: end_char });
            (start, start_char) = (end, end_char);
        }
        tokens
    }
}
