//! The normalizers, each a rewrite of a piece that keeps its alignment (piece.rs): BERT's text
//! cleaning and Chinese spacing, NFD, stripping accents, lowercasing, Replace, and
//! sentencepiece's Precompiled character map.

use std::cmp::Ordering;

use crate::blob::{
    Tokenizer, CHINESE, CLEAN_REMOVE, CLEAN_WHITESPACE, COMBINING_MARK, NONSPACING_MARK, OP_CHINESE_SPACING,
    OP_CLEAN_TEXT, OP_LOWERCASE, OP_NFD, OP_PRECOMPILED, OP_REPLACE, OP_STRIP_COMBINING_MARKS,
    OP_STRIP_NONSPACING_MARKS,
};
use crate::piece::{Aligned, Piece};

/// The Precompiled normalizer looks a grapheme up whole only when it is shorter than this (bytes).
const WHOLE_GRAPHEME_LIMIT: usize = 6;

impl<'a> Tokenizer<'a> {
    pub(crate) fn normalize(&self, piece: &mut Piece) {
        for i in 0..self.normalizer.len() / 2 {
            let (op, argument) = (self.normalizer.get(2 * i), self.normalizer.get(2 * i + 1));
            match op {
                OP_CLEAN_TEXT => {
                    piece.filter(|c| self.props(c) & CLEAN_REMOVE == 0);
                    piece.map(|c| if self.props(c) & CLEAN_WHITESPACE != 0 { ' ' } else { c });
                }
                OP_CHINESE_SPACING => self.space_chinese(piece),
                OP_NFD => self.nfd(piece),
                OP_STRIP_NONSPACING_MARKS => piece.filter(|c| self.props(c) & NONSPACING_MARK == 0),
                OP_STRIP_COMBINING_MARKS => piece.filter(|c| self.props(c) & COMBINING_MARK == 0),
                OP_LOWERCASE => self.lowercase(piece),
                OP_PRECOMPILED => self.precompiled(piece),
                OP_REPLACE => self.replace(piece, argument as usize),
                _ => {}
            }
        }
    }

    fn space_chinese(&self, piece: &mut Piece) {
        let mut changes = Vec::with_capacity(piece.chars.len());
        for a in &piece.chars {
            if self.props(a.c) & CHINESE != 0 {
                changes.extend([(' ', 0), (a.c, 1), (' ', 1)]);
            } else {
                changes.push((a.c, 0));
            }
        }
        piece.transform(&changes, 0);
    }

    fn ccc(&self, c: char) -> u8 {
        (self.props(c) >> 8) as u8
    }

    /// Canonical decomposition, then the canonical reordering of each run of non-starters. As in
    /// the reference, the change marks (0 for the first character of a decomposition, 1 for the
    /// rest) travel with the characters when they are reordered.
    fn nfd(&self, piece: &mut Piece) {
        let mut buffer: Vec<(u8, char, isize)> = Vec::with_capacity(piece.chars.len());
        let mut pending = 0;
        for a in &piece.chars {
            let mut one = [0u8; 4];
            let decomposed = self.nfd.get(a.c, self.strings).unwrap_or_else(|| a.c.encode_utf8(&mut one));
            for (k, d) in decomposed.chars().enumerate() {
                let class = self.ccc(d);
                if class == 0 {
                    buffer[pending..].sort_by_key(|entry| entry.0);
                    pending = buffer.len();
                }
                buffer.push((class, d, if k == 0 { 0 } else { 1 }));
            }
        }
        buffer[pending..].sort_by_key(|entry| entry.0);
        let changes: Vec<(char, isize)> = buffer.into_iter().map(|(_, c, change)| (c, change)).collect();
        piece.transform(&changes, 0);
    }

    fn lowercase(&self, piece: &mut Piece) {
        let mut changes = Vec::with_capacity(piece.chars.len());
        for a in &piece.chars {
            match self.lowercase.get(a.c, self.strings) {
                Some(lower) => changes.extend(lower.chars().enumerate().map(|(k, c)| (c, (k > 0) as isize))),
                None => changes.push((a.c, 0)),
            }
        }
        piece.transform(&changes, 0);
    }

    fn replace(&self, piece: &mut Piece, rule: usize) {
        let rule = self.replace_rules.from(5 * rule);
        let pattern: Vec<char> = self.string(rule.get(0), rule.get(1)).chars().collect();
        let min_repeat = rule.get(2) as usize;
        let content = self.string(rule.get(3), rule.get(4));
        let matches = if min_repeat == 0 {
            literal_matches(&piece.chars, &pattern)
        } else {
            run_matches(&piece.chars, pattern[0], min_repeat)
        };
        if !matches.is_empty() {
            piece.replace_matches(&matches, content);
        }
    }

    /// The sentencepiece character map: a grapheme shorter than WHOLE_GRAPHEME_LIMIT bytes is
    /// replaced whole by the entry for its shortest mapped prefix, if any; otherwise each
    /// character is looked up alone.
    fn precompiled(&self, piece: &mut Piece) {
        let text = piece.text();
        let mut byte_at = Vec::with_capacity(piece.chars.len() + 1);
        byte_at.push(0);
        for a in &piece.chars {
            byte_at.push(byte_at[byte_at.len() - 1] + a.c.len_utf8());
        }
        let mut changes: Vec<(char, isize)> = Vec::with_capacity(piece.chars.len());
        let mut modified = false;
        for (first, last) in self.graphemes(&piece.chars) {
            let grapheme = &text[byte_at[first]..byte_at[last]];
            if grapheme.len() < WHOLE_GRAPHEME_LIMIT {
                if let Some(replacement) = self.charsmap_lookup(grapheme) {
                    push_replacement(&mut changes, grapheme, replacement);
                    modified = true;
                    continue;
                }
            }
            for (b, c) in grapheme.char_indices() {
                let single = &grapheme[b..b + c.len_utf8()];
                match self.charsmap_lookup(single) {
                    Some(replacement) => {
                        push_replacement(&mut changes, single, replacement);
                        modified = true;
                    }
                    None => changes.push((c, 0)),
                }
            }
        }
        if modified {
            piece.transform(&changes, 0);
        }
    }

    /// The replacement of the shortest key that prefixes `chunk` (a search stops at NUL).
    fn charsmap_lookup(&self, chunk: &str) -> Option<&'a str> {
        let units = self.charsmap;
        if units.len() == 0 {
            return None;
        }
        let offset = |unit: u32| ((unit >> 10) << ((unit & (1 << 9)) >> 6)) as usize;
        let mut node = offset(units.get(0));
        for &byte in chunk.as_bytes() {
            if byte == 0 {
                return None;
            }
            node ^= byte as usize;
            if node >= units.len() {
                return None;
            }
            let unit = units.get(node);
            if unit & ((1 << 31) | 0xFF) != byte as u32 {
                return None;
            }
            node ^= offset(unit);
            if (unit >> 8) & 1 == 1 {
                let value = (units.get(node) & ((1 << 31) - 1)) as usize;
                let tail = self.charsmap_text.get(value..)?;
                let length = tail.iter().position(|&b| b == 0).unwrap_or(tail.len());
                return std::str::from_utf8(&tail[..length]).ok();
            }
        }
        None
    }
}

/// Non-overlapping matches of a literal, left to right, as char ranges.
fn literal_matches(chars: &[Aligned], pattern: &[char]) -> Vec<(usize, usize)> {
    let mut matches = Vec::new();
    let mut i = 0;
    while !pattern.is_empty() && i + pattern.len() <= chars.len() {
        if chars[i..i + pattern.len()].iter().zip(pattern).all(|(a, &p)| a.c == p) {
            matches.push((i, i + pattern.len()));
            i += pattern.len();
        } else {
            i += 1;
        }
    }
    matches
}

/// Maximal runs of `c` at least `min_repeat` long (the regex `c{n,}`), as char ranges.
fn run_matches(chars: &[Aligned], c: char, min_repeat: usize) -> Vec<(usize, usize)> {
    let mut matches = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let run = chars[i..].iter().take_while(|a| a.c == c).count();
        if run >= min_repeat && run > 0 {
            matches.push((i, i + run));
        }
        i += run.max(1);
    }
    matches
}

/// Appends the changes that turn `old` into `new` (tokenizers' Precompiled `replace`): every new
/// character replaces one; extra new characters are insertions; missing ones are removals
/// charged to the last change made so far, even one from an earlier grapheme.
fn push_replacement(changes: &mut Vec<(char, isize)>, old: &str, new: &str) {
    let difference = new.chars().count() as isize - old.chars().count() as isize;
    changes.extend(new.chars().map(|c| (c, 0)));
    match difference.cmp(&0) {
        Ordering::Greater => changes.iter_mut().rev().take(difference as usize).for_each(|change| change.1 = 1),
        Ordering::Less => {
            if let Some(last) = changes.last_mut() {
                last.1 += difference;
            }
        }
        Ordering::Equal => {}
    }
}
