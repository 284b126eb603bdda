//! Deterministic recognisers for PII whose format proves itself. A token classifier tends to cut
//! long numbers short at token edges; where a checksum or a strict grammar says "this whole string
//! is a card number / an IBAN / an IPv4 address", that span overrides the model's.
//!
//! - CREDIT_CARD: 13 to 19 digits, optionally in groups split by single spaces or hyphens, that
//!   pass the Luhn check (ISO/IEC 7812; the same check covers IMEIs);
//! - BANK_ACCOUNT: an IBAN, two capital letters, two check digits and 11 to 30 capitals or
//!   digits, optionally in space-separated groups, of its country's length and 1 modulo 97
//!   (ISO 13616);
//! - IP_ADDRESS: a strict dotted quad, four numbers 0..=255 without leading zeros;
//! - EMAIL: local@domain with an ASCII local part and at least two domain labels, the last one
//!   letters only;
//! - URL: http://, https:// or www. up to the next whitespace, without trailing punctuation.
//!
//! A candidate must not touch letters or digits on either side, so "x4111111111111111" or a
//! number inside a longer number is not a match. Positions are in chars (code points).

use crate::checks::{iban_valid, luhn_valid};

#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    pub label: &'static str,
    pub start: usize,
    pub end: usize,
}

pub fn find_all(text: &[char]) -> Vec<Found> {
    let mut found = Vec::new();
    let mut i = 0;
    while i < text.len() {
        if starts_word(text, i) {
            let hit = url_at(text, i)
                .map(|end| ("URL", end))
                .or_else(|| email_at(text, i).map(|end| ("EMAIL", end)))
                .or_else(|| iban_at(text, i).map(|end| ("BANK_ACCOUNT", end)))
                .or_else(|| ipv4_at(text, i).map(|end| ("IP_ADDRESS", end)))
                .or_else(|| card_at(text, i).map(|end| ("CREDIT_CARD", end)));
            if let Some((label, end)) = hit {
                found.push(Found { label, start: i, end });
                i = end;
                continue;
            }
        }
        i += 1;
    }
    found
}

fn starts_word(text: &[char], i: usize) -> bool {
    i == 0 || !text[i - 1].is_alphanumeric()
}

fn ends_word(text: &[char], end: usize) -> bool {
    end == text.len() || !text[end].is_alphanumeric()
}

/// Groups of characters accepted by `member`, separated by single characters accepted by
/// `separator`: where each group ends (exclusive).
fn group_ends(text: &[char], start: usize, member: impl Fn(char) -> bool, separator: impl Fn(char) -> bool) -> Vec<usize> {
    let mut ends = Vec::new();
    let mut i = start;
    loop {
        let group_start = i;
        while i < text.len() && member(text[i]) {
            i += 1;
        }
        if i == group_start {
            break;
        }
        ends.push(i);
        if i + 1 < text.len() && separator(text[i]) && member(text[i + 1]) {
            i += 1;
        } else {
            break;
        }
    }
    ends
}

/// The longest run of whole groups, starting at `start`, that `valid` accepts and that ends a word.
fn longest_valid(text: &[char], start: usize, ends: &[usize], valid: impl Fn(&[char]) -> bool) -> Option<usize> {
    ends.iter().rev().find_map(|&end| {
        let compact: Vec<char> = text[start..end].iter().copied().filter(|c| c.is_ascii_alphanumeric()).collect();
        (ends_word(text, end) && valid(&compact)).then_some(end)
    })
}

fn card_at(text: &[char], start: usize) -> Option<usize> {
    let ends = group_ends(text, start, |c| c.is_ascii_digit(), |c| c == ' ' || c == '-');
    longest_valid(text, start, &ends, |digits| (13..=19).contains(&digits.len()) && luhn_valid(digits))
}

fn iban_at(text: &[char], start: usize) -> Option<usize> {
    let head = text.get(start..start + 4)?;
    if !(head[0].is_ascii_uppercase() && head[1].is_ascii_uppercase() && head[2].is_ascii_digit() && head[3].is_ascii_digit()) {
        return None;
    }
    let member = |c: char| c.is_ascii_uppercase() || c.is_ascii_digit();
    let ends = group_ends(text, start, member, |c| c == ' ');
    longest_valid(text, start, &ends, |chars| (15..=34).contains(&chars.len()) && iban_valid(chars))
}

fn ipv4_at(text: &[char], start: usize) -> Option<usize> {
    // The tail of a longer dotted number ("10.1.2.3.4") is not an address either.
    if start >= 2 && text[start - 1] == '.' && text[start - 2].is_ascii_digit() {
        return None;
    }
    let mut i = start;
    for octet in 0..4 {
        if octet > 0 {
            if text.get(i) != Some(&'.') {
                return None;
            }
            i += 1;
        }
        let digits_start = i;
        while i < text.len() && text[i].is_ascii_digit() && i - digits_start < 3 {
            i += 1;
        }
        let digits: String = text[digits_start..i].iter().collect();
        let leading_zero = digits.len() > 1 && digits.starts_with('0');
        if digits.is_empty() || leading_zero || digits.parse::<u32>().map_or(true, |v| v > 255) {
            return None;
        }
    }
    // "1.2.3.4.5" or "1.2.3.4567" is something else; a full stop ending a sentence is fine.
    let continues = |j: usize| text.get(j).is_some_and(|c| c.is_ascii_digit());
    let dotted_more = text.get(i) == Some(&'.') && continues(i + 1);
    (ends_word(text, i) && !dotted_more).then_some(i)
}

fn is_local_part(c: char) -> bool {
    c.is_ascii_alphanumeric() || "._%+-".contains(c)
}

fn email_at(text: &[char], start: usize) -> Option<usize> {
    if start > 0 && is_local_part(text[start - 1]) {
        return None;
    }
    let mut i = start;
    while i < text.len() && is_local_part(text[i]) {
        i += 1;
    }
    if i == start || text[start] == '.' || text[i - 1] == '.' || text.get(i) != Some(&'@') {
        return None;
    }
    let domain = i + 1;
    let ends = group_ends(text, domain, |c| c.is_ascii_alphanumeric() || c == '-', |c| c == '.');
    // The last label must be a top-level domain: two or more letters ("example.com.", a full
    // stop after the address, is not part of it).
    let end = *ends.get(1..)?.last()?;
    let last_label_start = text[domain..end].iter().rposition(|&c| c == '.')? + domain + 1;
    let tld = &text[last_label_start..end];
    (tld.len() >= 2 && tld.iter().all(|c| c.is_ascii_alphabetic()) && ends_word(text, end)).then_some(end)
}

fn url_at(text: &[char], start: usize) -> Option<usize> {
    let head: String = text[start..text.len().min(start + 8)].iter().collect::<String>().to_ascii_lowercase();
    if !["http://", "https://", "www."].iter().any(|scheme| head.starts_with(scheme)) {
        return None;
    }
    let mut end = start;
    while end < text.len() && !text[end].is_whitespace() {
        end += 1;
    }
    // Punctuation that ends a sentence or closes a bracket around the URL is not part of it.
    while end > start && ".,;:!?)]}'\"".contains(text[end - 1]) {
        end -= 1;
    }
    let min_length = head.find("//").map_or(4, |at| at + 2) + 1;
    (end - start > min_length).then_some(end)
}
