//! The text between the pipeline's stages: pieces of normalized characters, each remembering the
//! original byte range it came from, as `tokenizers`' NormalizedString does (an inserted
//! character takes the range of the character consumed before it), so that every token's
//! offsets point into the original text.

/// One character of a normalized string and the original byte range it stands for.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Aligned {
    pub(crate) c: char,
    pub(crate) start: u32,
    pub(crate) end: u32,
}

/// A normalized piece of the input. `shift` is where the piece starts in the original text: a
/// character inserted before anything was consumed gets the empty range there.
#[derive(Clone, Debug)]
pub(crate) struct Piece {
    pub(crate) chars: Vec<Aligned>,
    pub(crate) shift: u32,
}
impl Piece {
    pub(crate) fn text(&self) -> String {
        self.chars.iter().map(|a| a.c).collect()
    }

    /// chars[range] as a piece of its own, starting where its first character came from.
    pub(crate) fn slice(&self, start: usize, end: usize) -> Piece {
        Piece { chars: self.chars[start..end].to_vec(), shift: self.chars[start].start }
    }

    /// Rebuilds the piece from (char, change) pairs, as `tokenizers`' NormalizedString::transform:
    /// change 0 replaces the next original character, -n also drops the n after it, and +1 inserts
    /// a character that shares the range of the last one consumed. `skip` characters at the
    /// start are dropped before the first pair.
    pub(crate) fn transform(&mut self, changes: &[(char, isize)], skip: usize) {
        let mut next = skip;
        let chars = changes
            .iter()
            .map(|&(c, change)| {
                let (start, end) = if change > 0 {
                    match next.checked_sub(1).and_then(|i| self.chars.get(i)) {
                        Some(previous) => (previous.start, previous.end),
                        None => (self.shift, self.shift),
                    }
                } else {
                    let replaced = self.chars.get(next).map_or((self.shift, self.shift), |a| (a.start, a.end));
                    next += 1 + change.unsigned_abs();
                    replaced
                };
                Aligned { c, start, end }
            })
            .collect();
        self.chars = chars;
    }

    /// Keeps the characters `keep` accepts (NormalizedString::filter).
    pub(crate) fn filter(&mut self, keep: impl Fn(char) -> bool) {
        let mut changes = Vec::with_capacity(self.chars.len());
        let (mut removed, mut removed_at_start, mut last_kept) = (0isize, 0usize, None);
        for a in &self.chars {
            if keep(a.c) {
                match last_kept {
                    Some(previous) => changes.push((previous, -removed)),
                    None => removed_at_start = removed as usize,
                }
                last_kept = Some(a.c);
                removed = 0;
            } else {
                removed += 1;
            }
        }
        if let Some(previous) = last_kept {
            changes.push((previous, -removed));
        }
        self.transform(&changes, removed_at_start);
    }

    pub(crate) fn map(&mut self, f: impl Fn(char) -> char) {
        for a in &mut self.chars {
            a.c = f(a.c);
        }
    }

    /// Replaces every match (start..end, in chars) with `content`; the new characters take the
    /// range of the last character matched (NormalizedString::replace).
    pub(crate) fn replace_matches(&mut self, matches: &[(usize, usize)], content: &str) {
        let mut chars = Vec::with_capacity(self.chars.len());
        let mut copied = 0;
        for &(start, end) in matches {
            chars.extend_from_slice(&self.chars[copied..start]);
            let last = self.chars[end - 1];
            chars.extend(content.chars().map(|c| Aligned { c, start: last.start, end: last.end }));
            copied = end;
        }
        chars.extend_from_slice(&self.chars[copied..]);
        self.chars = chars;
    }

    /// Splits around the characters `is_delimiter` accepts; empty pieces are dropped.
    pub(crate) fn split(&self, is_delimiter: impl Fn(char) -> bool, behaviour: Split, out: &mut Vec<Piece>) {
        // Segments as tokenizers' char patterns make them: each delimiter alone, runs between.
        let mut segments: Vec<(usize, usize, bool)> = Vec::new();
        let mut run_start = 0;
        for (i, a) in self.chars.iter().enumerate() {
            if is_delimiter(a.c) {
                if run_start < i {
                    segments.push((run_start, i, false));
                }
                segments.push((i, i + 1, true));
                run_start = i + 1;
            }
        }
        if run_start < self.chars.len() {
            segments.push((run_start, self.chars.len(), false));
        }
        let mut kept: Vec<(usize, usize)> = Vec::with_capacity(segments.len());
        match behaviour {
            Split::Removed => kept.extend(segments.iter().filter(|s| !s.2).map(|s| (s.0, s.1))),
            Split::Isolated => kept.extend(segments.iter().map(|s| (s.0, s.1))),
            Split::MergedWithNext => {
                let mut next_was_delimiter = false;
                for &(start, end, is_delimiter) in segments.iter().rev() {
                    match kept.last_mut() {
                        Some(last) if is_delimiter && !next_was_delimiter => last.0 = start,
                        _ => kept.push((start, end)),
                    }
                    next_was_delimiter = is_delimiter;
                }
                kept.reverse();
            }
        }
        out.extend(kept.into_iter().filter(|(s, e)| s < e).map(|(s, e)| self.slice(s, e)));
    }
}

#[derive(Clone, Copy)]
pub(crate) enum Split {
    Removed,
    Isolated,
    MergedWithNext,
}

/// A token of one piece: id and the char range of the piece it covers.
pub(crate) struct PieceToken {
    pub(crate) id: u32,
    pub(crate) start: usize,
    pub(crate) end: usize,
}
