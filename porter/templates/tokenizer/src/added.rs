//! Added tokens: leftmost-longest matches in the original text, before any normalisation, with
//! the optional stripping of the whitespace around them.

use crate::blob::{Tokenizer, ADDED_LSTRIP, ADDED_RSTRIP};

impl Tokenizer<'_> {
    /// (start, end, Some((id, the token's own length in bytes)) for an added token) covering the
    /// text, in bytes (an added token's range takes the whitespace it strips).
    pub(crate) fn split_added_tokens(&self, text: &str) -> Vec<(usize, usize, Option<(u32, usize)>)> {
        let mut splits = Vec::new();
        let mut done = 0;
        let mut position = 0;
        while position < text.len() {
            let Some((length, id, flags)) = self.added_token_at(&text[position..]) else {
                position += text[position..].chars().next().map_or(1, char::len_utf8);
                continue;
            };
            let mut start = position;
            let mut stop = position + length;
            if flags & ADDED_LSTRIP != 0 {
                let spaces: usize = text[..start].chars().rev().take_while(|&c| self.is_whitespace(c)).map(char::len_utf8).sum();
                start = (start - spaces).max(done);
            }
            if flags & ADDED_RSTRIP != 0 {
                stop += text[stop..].chars().take_while(|&c| self.is_whitespace(c)).map(char::len_utf8).sum::<usize>();
            }
            if done < start {
                splits.push((done, start, None));
            }
            splits.push((start, stop, Some((id, length))));
            done = stop;
            position = stop;
        }
        if done < text.len() {
            splits.push((done, text.len(), None));
        }
        splits
    }

    /// The longest added token at the start of `rest` (they are stored longest first).
    pub(crate) fn added_token_at(&self, rest: &str) -> Option<(usize, u32, u32)> {
        (0..self.added_tokens.len() / 4).find_map(|i| {
            let entry = self.added_tokens.from(4 * i);
            let content = self.string(entry.get(0), entry.get(1));
            rest.starts_with(content).then(|| (content.len(), entry.get(2), entry.get(3)))
        })
    }
}
