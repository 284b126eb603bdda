//! Extended grapheme clusters (UAX #29), which the Precompiled normalizer looks up whole. The
//! Grapheme_Cluster_Break and Indic_Conjunct_Break values come from the character properties
//! porter compiles into the blob (CHAR_PROPS).

use crate::blob::{Tokenizer, EXTENDED_PICTOGRAPHIC};
use crate::piece::Aligned;

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

impl Tokenizer<'_> {
    /// Extended grapheme clusters (UAX #29) as char index ranges.
    pub(crate) fn graphemes(&self, chars: &[Aligned]) -> Vec<(usize, usize)> {
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
