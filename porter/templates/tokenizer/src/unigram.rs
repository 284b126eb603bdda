//! The Unigram model (sentencepiece vocabularies such as XLM-R's): the best-scoring split of a
//! word by Viterbi.

use crate::blob::Tokenizer;
use crate::piece::PieceToken;

/// Unigram: an unknown character scores this much below the lowest piece.
const UNKNOWN_PENALTY: f64 = 10.0;

impl Tokenizer<'_> {
    fn score(&self, id: u32) -> f64 {
        let at = 8 * id as usize;
        f64::from_le_bytes(self.scores[at..at + 8].try_into().unwrap())
    }

    /// Viterbi over byte positions, as tokenizers' Unigram::encode_optimized: candidates are
    /// tried shortest first and replace the best only when strictly better; a character with no
    /// single-character piece may be covered by an unknown token scoring min_score - 10; runs of
    /// unknown tokens are fused, and every resulting string is looked up in the vocabulary again.
    pub(crate) fn unigram(&self, sentence: &str, unk: u32) -> Vec<PieceToken> {
        #[derive(Clone, Copy)]
        struct Best {
            score: f64,
            starts_at: Option<usize>,
            id: u32,
        }
        let bytes = sentence.as_bytes();
        let unknown_score = self.min_score - UNKNOWN_PENALTY;
        let mut best = vec![Best { score: 0.0, starts_at: None, id: 0 }; bytes.len() + 1];
        let offer = |best: &mut Vec<Best>, end: usize, start: usize, score: f64, id: u32| {
            let target = &mut best[end];
            if target.starts_at.is_none() || score > target.score {
                *target = Best { score, starts_at: Some(start), id };
            }
        };
        let mut start = 0;
        while start < bytes.len() {
            let here = best[start].score;
            let char_length = sentence[start..].chars().next().map_or(1, char::len_utf8);
            let mut has_single_char_piece = false;
            let mut node = 0;
            for (k, &b) in bytes[start..].iter().enumerate() {
                match self.trie.child(node, b) {
                    Some(child) => node = child,
                    None => break,
                }
                if let Some(id) = self.trie.token_id(node) {
                    offer(&mut best, start + k + 1, start, self.score(id) + here, id);
                    has_single_char_piece |= k + 1 == char_length;
                }
            }
            if !has_single_char_piece {
                offer(&mut best, start + char_length, start, unknown_score + here, unk);
            }
            start += char_length;
        }
        // Backtrack into byte ranges, fusing consecutive unknowns.
        let mut ranges: Vec<(usize, usize)> = Vec::new();
        let mut end = bytes.len();
        let mut fused_unknown_start: Option<usize> = None;
        let mut fused_unknown_end = 0;
        while end > 0 {
            let node = best[end];
            let begin = node.starts_at.unwrap_or(0);
            if node.id == unk {
                if fused_unknown_start.is_none() {
                    fused_unknown_end = end;
                }
                fused_unknown_start = Some(begin);
            } else {
                if let Some(s) = fused_unknown_start.take() {
                    ranges.push((s, fused_unknown_end));
                }
                ranges.push((begin, end));
            }
            end = begin;
        }
        if let Some(s) = fused_unknown_start {
            ranges.push((s, fused_unknown_end));
        }
        ranges.reverse();
        let mut tokens = Vec::with_capacity(ranges.len());
        let mut start_char = 0;
        for (s, e) in ranges {
            let piece = &sentence[s..e];
            let end_char = start_char + piece.chars().count();
            let id = self.trie.lookup(piece).unwrap_or(unk);
            tokens.push(PieceToken { id, start: start_char, end: end_char });
            start_char = end_char;
        }
        tokens
    }
}
