//! A tokenizer that reads porter's tokenizer.bin in place: no parsing, no hash maps, std only.
//!
//! `Tokenizer::new(blob)` checks the header (magic, version, size, section bounds) and keeps
//! slices into the blob; `encode(text)` returns the ids and, for every id, the offsets of the
//! original text it came from: `offsets` in UTF-8 bytes (exact) and `char_offsets` in Unicode
//! code points (what Python's `tokenizers` reports, converted the way it converts them). Special
//! tokens added by the post-processor have offsets (0, 0).
//!
//! Everything here mirrors the Hugging Face `tokenizers` library step by step, including its
//! alignment bookkeeping (each normalized character remembers the original byte range it came
//! from, and an inserted character takes the range of the character consumed before it). The
//! layout of the blob is documented in porter/tokenizer.py.

use std::cmp::Ordering;

const MAGIC: &[u8; 4] = b"PTOK";
const VERSION: u32 = 1;
const SEQUENCE_A: u32 = u32::MAX;
const SECTION_COUNT: usize = 13;
const HEADER_WORDS: usize = 5;

// Sections, in directory order (porter.tokenizer.Section).
const PARAMS: usize = 0;
const NORMALIZER: usize = 1;
const PRE_TOKENIZER: usize = 2;
const POST_TEMPLATE: usize = 3;
const ADDED_TOKENS: usize = 4;
const STRINGS: usize = 5;
const TRIE: usize = 6;
const SCORES: usize = 7;
const CHAR_PROPS: usize = 8;
const CHAR_MAPS: usize = 9;
const CHARSMAP: usize = 10;
const CHARSMAP_TEXT: usize = 11;
const REPLACE_RULES: usize = 12;

// PARAMS words.
const VOCAB_SIZE: usize = 0;
const UNK_ID: usize = 1;
const MAX_INPUT_CHARS_PER_WORD: usize = 2;
const CONTINUING_PREFIX_OFFSET: usize = 3;
const CONTINUING_PREFIX_LENGTH: usize = 4;
const MIN_SCORE_LOW: usize = 5;
const MIN_SCORE_HIGH: usize = 6;
const PARAM_COUNT: usize = 7;

const MODEL_WORDPIECE: u32 = 1;
const MODEL_UNIGRAM: u32 = 2;

// Normalizer and pre-tokenizer ops.
const OP_CLEAN_TEXT: u32 = 1;
const OP_CHINESE_SPACING: u32 = 2;
const OP_NFD: u32 = 3;
const OP_STRIP_NONSPACING_MARKS: u32 = 4;
const OP_LOWERCASE: u32 = 5;
const OP_PRECOMPILED: u32 = 6;
const OP_REPLACE: u32 = 7;
const OP_STRIP_COMBINING_MARKS: u32 = 8;
const OP_SPLIT_WHITESPACE_REMOVED: u32 = 1;
const OP_SPLIT_BERT_PUNCTUATION_ISOLATED: u32 = 2;
const OP_METASPACE: u32 = 3;
const PREPEND_ALWAYS: u32 = 0;
const PREPEND_FIRST: u32 = 1;

const ADDED_LSTRIP: u32 = 1;
const ADDED_RSTRIP: u32 = 2;

// CHAR_PROPS bits.
const CLEAN_REMOVE: u32 = 1 << 0;
const CLEAN_WHITESPACE: u32 = 1 << 1;
const CHINESE: u32 = 1 << 2;
const NONSPACING_MARK: u32 = 1 << 3;
const WHITESPACE: u32 = 1 << 4;
const BERT_PUNCTUATION: u32 = 1 << 5;
const EXTENDED_PICTOGRAPHIC: u32 = 1 << 6;
const COMBINING_MARK: u32 = 1 << 7;

// Grapheme_Cluster_Break values (bits 16-19) and Indic_Conjunct_Break (bits 20-21).
const GCB_CR: u32 = 1;
const GCB_LF: u32 = 2;
const GCB_CONTROL: u32 = 3;
const GCB_EXTEND: u32 = 4;
const GCB_ZWJ: u32 = 5;
const GCB_RI: u32 = 6;
const GCB_PREPEND: u32 = 7;
const GCB_SPACING_MARK: u32 = 8;
const GCB_L: u32 = 9;
const GCB_V: u32 = 10;
const GCB_T: u32 = 11;
const GCB_LV: u32 = 12;
const GCB_LVT: u32 = 13;
const INCB_LINKER: u32 = 1;
const INCB_CONSONANT: u32 = 2;
const INCB_EXTEND: u32 = 3;

/// The Precompiled normalizer looks a grapheme up whole only when it is shorter than this (bytes).
const WHOLE_GRAPHEME_LIMIT: usize = 6;
/// Unigram: an unknown character scores this much below the lowest piece.
const UNKNOWN_PENALTY: f64 = 10.0;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Encoding {
    pub ids: Vec<u32>,
    /// (start, end) in bytes of the original text.
    pub offsets: Vec<(u32, u32)>,
    /// (start, end) in code points of the original text.
    pub char_offsets: Vec<(u32, u32)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlobError(pub String);

impl std::fmt::Display for BlobError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "bad tokenizer.bin: {}", self.0)
    }
}

/// Little-endian u32 array view.
#[derive(Clone, Copy)]
struct Words<'a>(&'a [u8]);

impl<'a> Words<'a> {
    #[inline]
    fn get(self, i: usize) -> u32 {
        u32::from_le_bytes(self.0[4 * i..4 * i + 4].try_into().unwrap())
    }
    fn len(self) -> usize {
        self.0.len() / 4
    }
    fn from(self, i: usize) -> Words<'a> {
        Words(&self.0[4 * i..])
    }
    /// The index of the last entry (stride `stride` words, key first) whose key is <= key.
    fn last_at_or_below(self, key: u32, count: usize, stride: usize) -> Option<usize> {
        let (mut lo, mut hi) = (0, count);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.get(mid * stride) <= key {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo.checked_sub(1)
    }
}

/// The vocabulary: a breadth-first byte trie whose children are contiguous and sorted.
#[derive(Clone, Copy)]
struct Trie<'a> {
    first_child: Words<'a>,
    token_ids: Words<'a>,
    labels: &'a [u8],
}

impl<'a> Trie<'a> {
    fn new(section: &'a [u8]) -> Result<Self, BlobError> {
        let words = Words(section);
        let nodes = if words.len() > 0 { words.get(0) as usize } else { 0 };
        let needed = 4 + 4 * (nodes + 1) + 4 * nodes + nodes;
        if nodes == 0 || section.len() < needed {
            return Err(BlobError(format!("trie of {nodes} nodes needs {needed} bytes, has {}", section.len())));
        }
        let first_child = Words(&section[4..4 + 4 * (nodes + 1)]);
        let token_ids = Words(&section[4 + 4 * (nodes + 1)..4 + 4 * (nodes + 1) + 4 * nodes]);
        let labels = &section[needed - nodes..needed];
        Ok(Trie { first_child, token_ids, labels })
    }

    #[inline]
    fn child(&self, node: usize, byte: u8) -> Option<usize> {
        let (start, end) = (self.first_child.get(node) as usize, self.first_child.get(node + 1) as usize);
        self.labels[start..end].binary_search(&byte).ok().map(|k| start + k)
    }

    #[inline]
    fn token_id(&self, node: usize) -> Option<u32> {
        let id = self.token_ids.get(node) as i32;
        (id >= 0).then_some(id as u32)
    }

    fn walk(&self, from: usize, bytes: &[u8]) -> Option<usize> {
        bytes.iter().try_fold(from, |node, &b| self.child(node, b))
    }

    fn lookup(&self, text: &str) -> Option<u32> {
        self.walk(0, text.as_bytes()).and_then(|node| self.token_id(node))
    }
}

/// Sorted code point -> string maps (NFD decompositions, lowercase mappings).
#[derive(Clone, Copy)]
struct CharMap<'a> {
    count: usize,
    keys: Words<'a>,
    spans: Words<'a>,
}

impl<'a> CharMap<'a> {
    /// Reads one map at `words`; returns it and the words after it.
    fn read(words: Words<'a>) -> Result<(Self, Words<'a>), BlobError> {
        let count = if words.len() > 0 { words.get(0) as usize } else { 0 };
        if words.len() < 1 + 3 * count {
            return Err(BlobError("character map is truncated".into()));
        }
        let map = CharMap { count, keys: words.from(1), spans: words.from(1 + count) };
        Ok((map, words.from(1 + 3 * count)))
    }

    fn get<'s>(&self, c: char, strings: &'s [u8]) -> Option<&'s str> {
        let i = self.keys.last_at_or_below(c as u32, self.count, 1)?;
        if self.keys.get(i) != c as u32 {
            return None;
        }
        let (offset, length) = (self.spans.get(2 * i) as usize, self.spans.get(2 * i + 1) as usize);
        std::str::from_utf8(&strings[offset..offset + length]).ok()
    }
}

/// One character of a normalized string and the original byte range it stands for.
#[derive(Clone, Copy, Debug)]
struct Aligned {
    c: char,
    start: u32,
    end: u32,
}

/// A normalized piece of the input. `shift` is where the piece starts in the original text: a
/// character inserted before anything was consumed gets the empty range there.
#[derive(Clone, Debug)]
struct Piece {
    chars: Vec<Aligned>,
    shift: u32,
}

impl Piece {
    fn text(&self) -> String {
        self.chars.iter().map(|a| a.c).collect()
    }

    /// chars[range] as a piece of its own, starting where its first character came from.
    fn slice(&self, start: usize, end: usize) -> Piece {
        Piece { chars: self.chars[start..end].to_vec(), shift: self.chars[start].start }
    }

    /// Rebuilds the piece from (char, change) pairs, as `tokenizers`' NormalizedString::transform:
    /// change 0 replaces the next original character, -n also drops the n after it, and +1 inserts
    /// a character that shares the range of the last one consumed. `skip` characters at the
    /// start are dropped before the first pair.
    fn transform(&mut self, changes: &[(char, isize)], skip: usize) {
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
    fn filter(&mut self, keep: impl Fn(char) -> bool) {
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

    fn map(&mut self, f: impl Fn(char) -> char) {
        for a in &mut self.chars {
            a.c = f(a.c);
        }
    }

    /// Replaces every match (start..end, in chars) with `content`; the new characters take the
    /// range of the last character matched (NormalizedString::replace).
    fn replace_matches(&mut self, matches: &[(usize, usize)], content: &str) {
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
    fn split(&self, is_delimiter: impl Fn(char) -> bool, behaviour: Split, out: &mut Vec<Piece>) {
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
enum Split {
    Removed,
    Isolated,
    MergedWithNext,
}

/// A token of one piece: id and the char range of the piece it covers.
struct PieceToken {
    id: u32,
    start: usize,
    end: usize,
}

pub struct Tokenizer<'a> {
    model: u32,
    params: Words<'a>,
    normalizer: Words<'a>,
    pre_tokenizer: Words<'a>,
    post_template: Words<'a>,
    added_tokens: Words<'a>,
    strings: &'a [u8],
    trie: Trie<'a>,
    scores: &'a [u8],
    char_props: Words<'a>,
    nfd: CharMap<'a>,
    lowercase: CharMap<'a>,
    charsmap: Words<'a>,
    charsmap_text: &'a [u8],
    replace_rules: Words<'a>,
    min_score: f64,
}

impl<'a> Tokenizer<'a> {
    /// Checks the header and section bounds; reads nothing else, so it costs microseconds.
    pub fn new(blob: &'a [u8]) -> Result<Self, BlobError> {
        if blob.len() < 4 * (HEADER_WORDS + 2 * SECTION_COUNT) || &blob[..4] != MAGIC {
            return Err(BlobError("no PTOK header".into()));
        }
        let header = Words(blob);
        let (version, size, model, count) = (header.get(1), header.get(2), header.get(3), header.get(4));
        if version != VERSION {
            return Err(BlobError(format!("version {version}, this reader knows {VERSION}")));
        }
        if size as usize != blob.len() {
            return Err(BlobError(format!("header says {size} bytes, blob has {}", blob.len())));
        }
        if count as usize != SECTION_COUNT || (model != MODEL_WORDPIECE && model != MODEL_UNIGRAM) {
            return Err(BlobError(format!("{count} sections, model {model}")));
        }
        let mut sections = [&blob[..0]; SECTION_COUNT];
        for (i, section) in sections.iter_mut().enumerate() {
            let (offset, length) = (header.get(HEADER_WORDS + 2 * i) as usize, header.get(HEADER_WORDS + 2 * i + 1) as usize);
            *section = blob
                .get(offset..offset.checked_add(length).unwrap_or(usize::MAX))
                .ok_or_else(|| BlobError(format!("section {i} lies outside the blob")))?;
        }
        if Words(sections[PARAMS]).len() < PARAM_COUNT {
            return Err(BlobError("parameters are truncated".into()));
        }
        let (nfd, rest) = CharMap::read(Words(sections[CHAR_MAPS]))?;
        let (lowercase, _) = CharMap::read(rest)?;
        let params = Words(sections[PARAMS]);
        let vocab_size = params.get(VOCAB_SIZE) as usize;
        let scores = sections[SCORES];
        if model == MODEL_UNIGRAM && scores.len() != 8 * vocab_size {
            return Err(BlobError(format!("{} score bytes for {vocab_size} pieces", scores.len())));
        }
        let char_props = Words(sections[CHAR_PROPS]);
        if char_props.len() == 0 || char_props.len() < 1 + 2 * char_props.get(0) as usize {
            return Err(BlobError("character properties are truncated".into()));
        }
        let min_score = f64::from_bits((params.get(MIN_SCORE_HIGH) as u64) << 32 | params.get(MIN_SCORE_LOW) as u64);
        Ok(Tokenizer {
            model,
            params,
            normalizer: Words(sections[NORMALIZER]),
            pre_tokenizer: Words(sections[PRE_TOKENIZER]),
            post_template: Words(sections[POST_TEMPLATE]),
            added_tokens: Words(sections[ADDED_TOKENS]),
            strings: sections[STRINGS],
            trie: Trie::new(sections[TRIE])?,
            scores,
            char_props,
            nfd,
            lowercase,
            charsmap: Words(sections[CHARSMAP]),
            charsmap_text: sections[CHARSMAP_TEXT],
            replace_rules: Words(sections[REPLACE_RULES]),
            min_score,
        })
    }

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

    fn string(&self, offset: u32, length: u32) -> &'a str {
        std::str::from_utf8(&self.strings[offset as usize..(offset + length) as usize]).unwrap_or("")
    }

    #[inline]
    fn props(&self, c: char) -> u32 {
        let count = self.char_props.get(0) as usize;
        let table = self.char_props.from(1);
        table.last_at_or_below(c as u32, count, 2).map_or(0, |i| table.get(2 * i + 1))
    }

    // ---------------------------------------------------------------------------------------
    // Added tokens: leftmost-longest matches in the original text, with optional stripping.

    /// (start, end, Some(id) for an added token) covering the text, in bytes.
    fn split_added_tokens(&self, text: &str) -> Vec<(usize, usize, Option<u32>)> {
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
            splits.push((start, stop, Some(id)));
            done = stop;
            position = stop;
        }
        if done < text.len() {
            splits.push((done, text.len(), None));
        }
        splits
    }

    /// The longest added token at the start of `rest` (they are stored longest first).
    fn added_token_at(&self, rest: &str) -> Option<(usize, u32, u32)> {
        (0..self.added_tokens.len() / 4).find_map(|i| {
            let entry = self.added_tokens.from(4 * i);
            let content = self.string(entry.get(0), entry.get(1));
            rest.starts_with(content).then(|| (content.len(), entry.get(2), entry.get(3)))
        })
    }

    fn is_whitespace(&self, c: char) -> bool {
        self.props(c) & WHITESPACE != 0
    }

    // ---------------------------------------------------------------------------------------
    // Normalizers

    fn normalize(&self, piece: &mut Piece) {
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

    /// Extended grapheme clusters (UAX #29) as char index ranges.
    fn graphemes(&self, chars: &[Aligned]) -> Vec<(usize, usize)> {
        let mut clusters = Vec::new();
        let mut segmenter = GraphemeState::default();
        let mut start = 0;
        for (i, a) in chars.iter().enumerate() {
            let props = self.props(a.c);
            if i > 0 && segmenter.breaks_before(props) {
                clusters.push((start, i));
                start = i;
            }
            segmenter.advance(props);
        }
        if start < chars.len() {
            clusters.push((start, chars.len()));
        }
        clusters
    }

    // ---------------------------------------------------------------------------------------
    // Pre-tokenizers

    fn pre_tokenize(&self, piece: Piece) -> Vec<Piece> {
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

    // ---------------------------------------------------------------------------------------
    // Models

    fn tokenize(&self, word: &Piece) -> Vec<PieceToken> {
        let text = word.text();
        let unk = self.params.get(UNK_ID);
        match self.model {
            MODEL_WORDPIECE => self.wordpiece(&text, unk),
            _ => self.unigram(&text, unk),
        }
    }

    /// Greedy longest-match-first; one unknown token for the whole word if any part fails.
    fn wordpiece(&self, word: &str, unk: u32) -> Vec<PieceToken> {
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

    fn score(&self, id: u32) -> f64 {
        let at = 8 * id as usize;
        f64::from_le_bytes(self.scores[at..at + 8].try_into().unwrap())
    }

    /// Viterbi over byte positions, as tokenizers' Unigram::encode_optimized: candidates are
    /// tried shortest first and replace the best only when strictly better; a character with no
    /// single-character piece may be covered by an unknown token scoring min_score - 10; runs of
    /// unknown tokens are fused, and every resulting string is looked up in the vocabulary again.
    fn unigram(&self, sentence: &str, unk: u32) -> Vec<PieceToken> {
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

/// The state UAX #29 needs to decide a boundary before the next character.
#[derive(Default)]
struct GraphemeState {
    previous: u32,
    /// Regional indicators immediately before the boundary.
    regional_indicators: usize,
    /// The text so far ends with ExtPict Extend*.
    in_pictographic: bool,
    /// The text so far ends with ExtPict Extend* ZWJ.
    pictographic_zwj: bool,
    /// 0: none; 1: InCB Consonant [Extend|Linker]* without a Linker; 2: with a Linker.
    conjunct: u8,
}

fn gcb(props: u32) -> u32 {
    (props >> 16) & 0xF
}

fn incb(props: u32) -> u32 {
    (props >> 20) & 0x3
}

impl GraphemeState {
    fn breaks_before(&self, next: u32) -> bool {
        let (before, after) = (gcb(self.previous), gcb(next));
        if before == GCB_CR && after == GCB_LF {
            return false;
        }
        if matches!(before, GCB_CONTROL | GCB_CR | GCB_LF) || matches!(after, GCB_CONTROL | GCB_CR | GCB_LF) {
            return true;
        }
        let hangul = match before {
            GCB_L => matches!(after, GCB_L | GCB_V | GCB_LV | GCB_LVT),
            GCB_LV | GCB_V => matches!(after, GCB_V | GCB_T),
            GCB_LVT | GCB_T => after == GCB_T,
            _ => false,
        };
        if hangul || matches!(after, GCB_EXTEND | GCB_ZWJ | GCB_SPACING_MARK) || before == GCB_PREPEND {
            return false;
        }
        if self.conjunct == 2 && incb(next) == INCB_CONSONANT {
            return false;
        }
        if self.pictographic_zwj && next & EXTENDED_PICTOGRAPHIC != 0 {
            return false;
        }
        if before == GCB_RI && after == GCB_RI && self.regional_indicators % 2 == 1 {
            return false;
        }
        true
    }

    fn advance(&mut self, props: u32) {
        let class = gcb(props);
        self.regional_indicators = if class == GCB_RI { self.regional_indicators + 1 } else { 0 };
        self.pictographic_zwj = class == GCB_ZWJ && self.in_pictographic;
        self.in_pictographic = props & EXTENDED_PICTOGRAPHIC != 0 || (class == GCB_EXTEND && self.in_pictographic);
        self.conjunct = match incb(props) {
            INCB_CONSONANT => 1,
            INCB_LINKER if self.conjunct > 0 => 2,
            INCB_EXTEND if self.conjunct > 0 => self.conjunct,
            _ => 0,
        };
        self.previous = props;
    }
}
