//! Byte-level BPE (GPT-2 style) over bpe.bin, precompiled by porter (porter/generate_service.py
//! documents the layout): the blob is read in place, nothing is parsed or hashed at start-up.
//!
//! Encoding follows the reference `tokenizers` library: added tokens are cut out of the raw text
//! first (leftmost, longest); the rest is split by the GPT-2 regex
//!   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//! (hand-written below: each alternative is a run of one character class); each piece's bytes
//! start as single-byte tokens and the lowest-ranked adjacent pair is merged, leftmost first,
//! until no pair has a merge. Decoding concatenates the tokens' bytes, skipping special tokens,
//! and replaces invalid UTF-8 by U+FFFD as the reference does.

const MAGIC: &[u8; 4] = b"PBPE";
const VERSION: u32 = 1;
const MISSING: u32 = u32::MAX;
const CONTRACTIONS: [&str; 7] = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d"];

#[repr(usize)]
enum Section {
    ByteIds,
    TokenOffsets,
    TokenBytes,
    Special,
    Added,
    Merges,
    Classes,
    AddedText,
}
const SECTIONS: usize = 8;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Class {
    Other,
    Letter,
    Number,
    Space,
}

pub struct Bpe {
    sections: [&'static [u8]; SECTIONS],
    vocab_size: usize,
    add_prefix_space: bool,
}

// Read a word at a time with from_le_bytes, so no alignment is needed.
static BLOB: &[u8] = include_bytes!("../bpe.bin");

fn word(bytes: &[u8], index: usize) -> u32 {
    let b = &bytes[index * 4..index * 4 + 4];
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

impl Bpe {
    /// Checks the embedded blob's header; porter wrote it in the same build, so a mismatch is a
    /// build bug and panics rather than becoming a request error.
    pub fn embedded() -> Bpe {
        let blob = BLOB;
        assert!(&blob[..4] == MAGIC && word(blob, 1) == VERSION, "bpe.bin: wrong magic or version");
        assert_eq!(word(blob, 4) as usize, SECTIONS, "bpe.bin: wrong section count");
        let sections = core::array::from_fn(|s| {
            let (offset, length) = (word(blob, 5 + 2 * s) as usize, word(blob, 6 + 2 * s) as usize);
            &blob[offset..offset + length]
        });
        Bpe { sections, vocab_size: word(blob, 2) as usize, add_prefix_space: word(blob, 3) & 1 == 1 }
    }

    fn section(&self, s: Section) -> &'static [u8] {
        self.sections[s as usize]
    }

    fn token_bytes(&self, id: u32) -> &'static [u8] {
        let offsets = self.section(Section::TokenOffsets);
        let (start, end) = (word(offsets, id as usize) as usize, word(offsets, id as usize + 1) as usize);
        &self.section(Section::TokenBytes)[start..end]
    }

    fn is_special(&self, id: u32) -> bool {
        word(self.section(Section::Special), id as usize) == 1
    }

    /// The bytes the decoder makes of `id` (none for a special token or an id past the vocabulary).
    pub fn decoded_bytes(&self, id: u32) -> &'static [u8] {
        if id as usize >= self.vocab_size || self.is_special(id) {
            return &[];
        }
        self.token_bytes(id)
    }

    pub fn encode(&self, text: &str) -> Vec<u32> {
        let mut ids = Vec::new();
        let mut segment_start = 0;
        let mut at = 0;
        while at < text.len() {
            if let Some((id, length)) = self.added_at(&text[at..]) {
                self.encode_segment(&text[segment_start..at], &mut ids);
                ids.push(id);
                at += length;
                segment_start = at;
            } else {
                at += text[at..].chars().next().map_or(1, char::len_utf8);
            }
        }
        self.encode_segment(&text[segment_start..], &mut ids);
        ids
    }

    /// The longest added token at the start of `rest` (ADDED is sorted longest first).
    fn added_at(&self, rest: &str) -> Option<(u32, usize)> {
        let (added, text) = (self.section(Section::Added), self.section(Section::AddedText));
        (0..added.len() / 12).find_map(|i| {
            let (id, offset, length) = (word(added, 3 * i), word(added, 3 * i + 1) as usize, word(added, 3 * i + 2) as usize);
            rest.as_bytes().starts_with(&text[offset..offset + length]).then_some((id, length))
        })
    }

    fn encode_segment(&self, segment: &str, ids: &mut Vec<u32>) {
        if segment.is_empty() {
            return;
        }
        let prefixed;
        let segment = if self.add_prefix_space && !segment.starts_with(' ') {
            prefixed = format!(" {segment}");
            prefixed.as_str()
        } else {
            segment
        };
        for piece in self.pieces(segment) {
            let bytes = self.section(Section::ByteIds);
            // A byte without a token of its own is dropped, as the reference does without an
            // unknown token.
            let mut piece_ids: Vec<u32> =
                piece.bytes().map(|b| word(bytes, b as usize)).filter(|&id| id != MISSING).collect();
            self.merge(&mut piece_ids);
            ids.extend_from_slice(&piece_ids);
        }
    }

    /// Merges the lowest-ranked adjacent pair, leftmost on a tie, until none has a merge.
    fn merge(&self, ids: &mut Vec<u32>) {
        loop {
            let mut best: Option<(u32, usize, u32)> = None;
            for p in 0..ids.len().saturating_sub(1) {
                if let Some((rank, merged)) = self.pair(ids[p], ids[p + 1]) {
                    if best.map_or(true, |(r, _, _)| rank < r) {
                        best = Some((rank, p, merged));
                    }
                }
            }
            let Some((_, p, merged)) = best else { return };
            ids[p] = merged;
            ids.remove(p + 1);
        }
    }

    /// (rank, merged id) of the pair, by binary search over MERGES sorted by (left, right).
    fn pair(&self, left: u32, right: u32) -> Option<(u32, u32)> {
        let merges = self.section(Section::Merges);
        let row = |i: usize| (word(merges, 4 * i), word(merges, 4 * i + 1));
        let (mut lo, mut hi) = (0, merges.len() / 16);
        while lo < hi {
            let mid = (lo + hi) / 2;
            match row(mid).cmp(&(left, right)) {
                core::cmp::Ordering::Less => lo = mid + 1,
                core::cmp::Ordering::Greater => hi = mid,
                core::cmp::Ordering::Equal => return Some((word(merges, 4 * mid + 2), word(merges, 4 * mid + 3))),
            }
        }
        None
    }

    fn class(&self, c: char) -> Class {
        if c.is_whitespace() {
            return Class::Space;
        }
        let classes = self.section(Section::Classes);
        let ranges = classes.len() / 8;
        // The last range whose first code point is <= c.
        let (mut lo, mut hi) = (0, ranges);
        while hi - lo > 1 {
            let mid = (lo + hi) / 2;
            if word(classes, 2 * mid) <= c as u32 { lo = mid } else { hi = mid }
        }
        match word(classes, 2 * lo + 1) {
            1 => Class::Letter,
            2 => Class::Number,
            _ => Class::Other,
        }
    }

    /// The GPT-2 regex's matches, which cover the text.
    fn pieces<'t>(&self, text: &'t str) -> Vec<&'t str> {
        let chars: Vec<(usize, char)> = text.char_indices().collect();
        let classes: Vec<Class> = chars.iter().map(|&(_, c)| self.class(c)).collect();
        let byte_at = |i: usize| chars.get(i).map_or(text.len(), |&(b, _)| b);
        let mut pieces = Vec::new();
        let mut i = 0;
        while i < chars.len() {
            let length = piece_length(text, &chars, &classes, i);
            pieces.push(&text[byte_at(i)..byte_at(i + length)]);
            i += length;
        }
        pieces
    }
}

/// The length in characters of the regex match at character i, trying the alternatives in order.
fn piece_length(text: &str, chars: &[(usize, char)], classes: &[Class], i: usize) -> usize {
    let rest = &text[chars[i].0..];
    if let Some(contraction) = CONTRACTIONS.iter().find(|c| rest.starts_with(*c)) {
        return contraction.len(); // ASCII: bytes are characters
    }
    let run = |from: usize, class: Class| classes[from..].iter().take_while(|&&c| c == class).count();
    for class in [Class::Letter, Class::Number, Class::Other] {
        if classes[i] == class {
            return run(i, class);
        }
        // " ?" takes the ASCII space only.
        if chars[i].1 == ' ' && classes.get(i + 1) == Some(&class) {
            return 1 + run(i + 1, class);
        }
    }
    // \s+(?!\S): whitespace up to the end, or all but the last before a non-space; else \s+.
    let spaces = run(i, Class::Space);
    if i + spaces == chars.len() || spaces == 1 { spaces } else { spaces - 1 }
}
