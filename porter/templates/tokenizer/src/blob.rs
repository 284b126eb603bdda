//! Reading tokenizer.bin in place. `Tokenizer::new` checks the header (magic, version, size,
//! section bounds) and keeps slices into the blob; every other module reads through the views
//! here (`Words`, the vocabulary `Trie`, the `CharMap`s, `props`). porter/tokenize/compile.py
//! writes the layout (in porter/tokenize/blob.py's sectioned format); the constants below are
//! its numbers.

const MAGIC: &[u8; 4] = b"PTOK";
const VERSION: u32 = 2;
pub(crate) const SEQUENCE_A: u32 = u32::MAX;
pub(crate) const SEQUENCE_B: u32 = u32::MAX - 1;
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
pub(crate) const UNK_ID: usize = 1;
pub(crate) const MAX_INPUT_CHARS_PER_WORD: usize = 2;
pub(crate) const CONTINUING_PREFIX_OFFSET: usize = 3;
pub(crate) const CONTINUING_PREFIX_LENGTH: usize = 4;
const MIN_SCORE_LOW: usize = 5;
const MIN_SCORE_HIGH: usize = 6;
const PARAM_COUNT: usize = 7;

pub(crate) const MODEL_WORDPIECE: u32 = 1;
const MODEL_UNIGRAM: u32 = 2;

// Normalizer and pre-tokenizer ops.
pub(crate) const OP_CLEAN_TEXT: u32 = 1;
pub(crate) const OP_CHINESE_SPACING: u32 = 2;
pub(crate) const OP_NFD: u32 = 3;
pub(crate) const OP_STRIP_NONSPACING_MARKS: u32 = 4;
pub(crate) const OP_LOWERCASE: u32 = 5;
pub(crate) const OP_PRECOMPILED: u32 = 6;
pub(crate) const OP_REPLACE: u32 = 7;
pub(crate) const OP_STRIP_COMBINING_MARKS: u32 = 8;
pub(crate) const OP_SPLIT_WHITESPACE_REMOVED: u32 = 1;
pub(crate) const OP_SPLIT_BERT_PUNCTUATION_ISOLATED: u32 = 2;
pub(crate) const OP_METASPACE: u32 = 3;
pub(crate) const PREPEND_ALWAYS: u32 = 0;
pub(crate) const PREPEND_FIRST: u32 = 1;

pub(crate) const ADDED_LSTRIP: u32 = 1;
pub(crate) const ADDED_RSTRIP: u32 = 2;

// CHAR_PROPS bits.
pub(crate) const CLEAN_REMOVE: u32 = 1 << 0;
pub(crate) const CLEAN_WHITESPACE: u32 = 1 << 1;
pub(crate) const CHINESE: u32 = 1 << 2;
pub(crate) const NONSPACING_MARK: u32 = 1 << 3;
const WHITESPACE: u32 = 1 << 4;
pub(crate) const BERT_PUNCTUATION: u32 = 1 << 5;
pub(crate) const EXTENDED_PICTOGRAPHIC: u32 = 1 << 6;
pub(crate) const COMBINING_MARK: u32 = 1 << 7;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlobError(pub String);

impl std::fmt::Display for BlobError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "bad tokenizer.bin: {}", self.0)
    }
}

/// Little-endian u32 array view.
#[derive(Clone, Copy)]
pub(crate) struct Words<'a>(&'a [u8]);

impl<'a> Words<'a> {
    #[inline]
    pub(crate) fn get(self, i: usize) -> u32 {
        u32::from_le_bytes(self.0[4 * i..4 * i + 4].try_into().unwrap())
    }
    pub(crate) fn len(self) -> usize {
        self.0.len() / 4
    }
    pub(crate) fn from(self, i: usize) -> Words<'a> {
        Words(&self.0[4 * i..])
    }
    /// The index of the last entry (stride `stride` words, key first) whose key is <= key.
    pub(crate) fn last_at_or_below(self, key: u32, count: usize, stride: usize) -> Option<usize> {
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
pub(crate) struct Trie<'a> {
    first_child: Words<'a>,
    token_ids: Words<'a>,
    labels: &'a [u8],
}

impl<'a> Trie<'a> {
    pub(crate) fn new(section: &'a [u8]) -> Result<Self, BlobError> {
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
    pub(crate) fn child(&self, node: usize, byte: u8) -> Option<usize> {
        let (start, end) = (self.first_child.get(node) as usize, self.first_child.get(node + 1) as usize);
        self.labels[start..end].binary_search(&byte).ok().map(|k| start + k)
    }

    #[inline]
    pub(crate) fn token_id(&self, node: usize) -> Option<u32> {
        let id = self.token_ids.get(node) as i32;
        (id >= 0).then_some(id as u32)
    }

    pub(crate) fn walk(&self, from: usize, bytes: &[u8]) -> Option<usize> {
        bytes.iter().try_fold(from, |node, &b| self.child(node, b))
    }

    pub(crate) fn lookup(&self, text: &str) -> Option<u32> {
        self.walk(0, text.as_bytes()).and_then(|node| self.token_id(node))
    }
}

/// Sorted code point -> string maps (NFD decompositions, lowercase mappings).
#[derive(Clone, Copy)]
pub(crate) struct CharMap<'a> {
    count: usize,
    keys: Words<'a>,
    spans: Words<'a>,
}

impl<'a> CharMap<'a> {
    /// Reads one map at `words`; returns it and the words after it.
    pub(crate) fn read(words: Words<'a>) -> Result<(Self, Words<'a>), BlobError> {
        let count = if words.len() > 0 { words.get(0) as usize } else { 0 };
        if words.len() < 1 + 3 * count {
            return Err(BlobError("character map is truncated".into()));
        }
        let map = CharMap { count, keys: words.from(1), spans: words.from(1 + count) };
        Ok((map, words.from(1 + 3 * count)))
    }

    pub(crate) fn get<'s>(&self, c: char, strings: &'s [u8]) -> Option<&'s str> {
        let i = self.keys.last_at_or_below(c as u32, self.count, 1)?;
        if self.keys.get(i) != c as u32 {
            return None;
        }
        let (offset, length) = (self.spans.get(2 * i) as usize, self.spans.get(2 * i + 1) as usize);
        std::str::from_utf8(&strings[offset..offset + length]).ok()
    }
}

pub struct Tokenizer<'a> {
    pub(crate) model: u32,
    pub(crate) params: Words<'a>,
    pub(crate) normalizer: Words<'a>,
    pub(crate) pre_tokenizer: Words<'a>,
    /// The post-processor's templates: (item, type id) pairs, an item a token id or SEQUENCE_A /
    /// SEQUENCE_B; the pair template is empty when the tokenizer.json has none.
    pub(crate) single_template: Words<'a>,
    pub(crate) pair_template: Words<'a>,
    pub(crate) added_tokens: Words<'a>,
    pub(crate) strings: &'a [u8],
    pub(crate) trie: Trie<'a>,
    pub(crate) scores: &'a [u8],
    pub(crate) char_props: Words<'a>,
    pub(crate) nfd: CharMap<'a>,
    pub(crate) lowercase: CharMap<'a>,
    pub(crate) charsmap: Words<'a>,
    pub(crate) charsmap_text: &'a [u8],
    pub(crate) replace_rules: Words<'a>,
    pub(crate) min_score: f64,
}

/// One template of POST_TEMPLATE (n, then n (item, type id) pairs) and the words after it.
fn template(words: Words<'_>) -> Result<(Words<'_>, Words<'_>), BlobError> {
    let count = if words.len() == 0 { None } else { Some(words.get(0) as usize) };
    match count {
        Some(count) if count <= (words.len() - 1) / 2 => {
            Ok((Words(&words.0[4..4 + 8 * count]), Words(&words.0[4 + 8 * count..])))
        }
        _ => Err(BlobError("the post-processor's templates are truncated".into())),
    }
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
        let (single_template, rest) = template(Words(sections[POST_TEMPLATE]))?;
        let (pair_template, _) = template(rest)?;
        let min_score = f64::from_bits((params.get(MIN_SCORE_HIGH) as u64) << 32 | params.get(MIN_SCORE_LOW) as u64);
        Ok(Tokenizer {
            model,
            params,
            normalizer: Words(sections[NORMALIZER]),
            pre_tokenizer: Words(sections[PRE_TOKENIZER]),
            single_template,
            pair_template,
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

    pub(crate) fn string(&self, offset: u32, length: u32) -> &'a str {
        std::str::from_utf8(&self.strings[offset as usize..(offset + length) as usize]).unwrap_or("")
    }

    #[inline]
    pub(crate) fn props(&self, c: char) -> u32 {
        let count = self.char_props.get(0) as usize;
        let table = self.char_props.from(1);
        table.last_at_or_below(c as u32, count, 2).map_or(0, |i| table.get(2 * i + 1))
    }

    pub(crate) fn is_whitespace(&self, c: char) -> bool {
        self.props(c) & WHITESPACE != 0
    }
}
