//! Checks that can veto a model span: a span the classifier gives one of these labels must have
//! the form (and, where it has one, the checksum) of that kind of data, or it is not returned.
//!
//! - CREDIT_CARD: 13 to 19 digits, in groups split by single spaces or hyphens or none, that
//!   pass the Luhn check;
//! - BANK_ACCOUNT: only when it looks like an IBAN (two letters and two digits first, spaces
//!   ignored): a country of the IBAN registry (ISO 13616), that country's length, capitals and
//!   digits only, and 1 modulo 97; account numbers in national formats have no common check and
//!   pass as they are;
//! - IP_ADDRESS: an IPv4 dotted quad (four numbers 0..=255 without leading zeros) or an IPv6
//!   address in RFC 4291 text form (eight groups of one to four hex digits, at most one `::`, an
//!   IPv4 tail allowed), either optionally with a `/prefix` length;
//! - EMAIL: local@domain, a dot-atom local part (RFC 5322) and a domain name;
//! - URL: an optional `scheme://`, a host (domain name, `localhost`, IPv4 or bracketed IPv6), an
//!   optional port, then anything up to the end of the span without whitespace.
//!
//! A domain name is two or more dot-separated labels of letters, digits and inner hyphens, the
//! last one two or more letters (or a punycode `xn--` label).
//!
//! Numbers are checked whole: a CREDIT_CARD span is widened to the run of grouped digits it is
//! part of, an IP_ADDRESS span to the run of hex digits, dots, colons and slashes, and a
//! BANK_ACCOUNT span inside an IBAN-shaped run of the text (two letters and two digits at the
//! start of a word, then groups of letters and digits split by single spaces) is judged by that
//! run: so a model that labels only part of an invalid number cannot get the part through, and a
//! valid value comes back whole. Before a check, punctuation around the value that cannot belong
//! to it (brackets, quotes, a full stop or comma after it) is trimmed; a span that passes is
//! returned as that value. Labels not listed here are never vetoed. Positions are in chars
//! (code points).

/// What the checks make of a model span: keep it (perhaps trimmed), or drop it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Verdict {
    /// Not a checked label, or a national account number: the span stands as it is.
    Unchecked,
    /// It has the form of its label: the span, without the punctuation around it.
    Valid { start: usize, end: usize },
    /// It has not: the span is not returned under this label.
    Vetoed,
}

/// The labels these checks cover, in the order of the module documentation.
pub const CHECKED_LABELS: &[&str] = &["CREDIT_CARD", "BANK_ACCOUNT", "IP_ADDRESS", "EMAIL", "URL"];

pub fn check(label: &str, text: &[char], start: usize, end: usize) -> Verdict {
    if !CHECKED_LABELS.contains(&label) {
        return Verdict::Unchecked;
    }
    match label {
        "CREDIT_CARD" => {
            let (start, end) = trim_punctuation(text, widen(text, start, end, is_card_char, true));
            verdict(card_valid(&text[start..end]), start, end)
        }
        "IP_ADDRESS" => {
            let (start, end) = trim_punctuation(text, widen(text, start, end, is_ip_char, false));
            let value = &text[start..end];
            if ip_valid(value) {
                return Verdict::Valid { start, end };
            }
            // host:port: the address without the port.
            match value.iter().rposition(|c| *c == ':') {
                Some(colon) if ipv4_valid(&value[..colon]) && decimal_port(&value[colon + 1..]) => Verdict::Valid { start, end: start + colon },
                _ => Verdict::Vetoed,
            }
        }
        "BANK_ACCOUNT" => bank_account(text, start, end),
        _ => {
            let (start, end) = trim_punctuation(text, (start, end));
            let value = &text[start..end];
            verdict(if label == "EMAIL" { email_valid(value) } else { url_valid(value) }, start, end)
        }
    }
}

fn verdict(valid: bool, start: usize, end: usize) -> Verdict {
    if valid {
        Verdict::Valid { start, end }
    } else {
        Verdict::Vetoed
    }
}

fn is_card_char(c: char) -> bool {
    c.is_ascii_digit()
}

fn is_ip_char(c: char) -> bool {
    c.is_ascii_hexdigit() || c == '.' || c == ':' || c == '/'
}

/// The span widened to the whole run of `member` characters around it; when `grouped`, a single
/// space or hyphen between two members belongs to the run as well (card numbers in groups).
fn widen(text: &[char], mut start: usize, mut end: usize, member: fn(char) -> bool, grouped: bool) -> (usize, usize) {
    let inside = |i: usize| -> bool {
        member(text[i])
            || (grouped && (text[i] == ' ' || text[i] == '-') && i > 0 && i + 1 < text.len() && member(text[i - 1]) && member(text[i + 1]))
    };
    while start > 0 && inside(start - 1) {
        start -= 1;
    }
    while end < text.len() && inside(end) {
        end += 1;
    }
    (start, end)
}

fn decimal_port(digits: &[char]) -> bool {
    !digits.is_empty() && digits.len() <= 5 && digits.iter().all(|c| c.is_ascii_digit())
        && digits.iter().collect::<String>().parse::<u32>().is_ok_and(|n| n <= 65535)
}

/// A BANK_ACCOUNT span: judged by the IBAN-shaped run of the text it overlaps, if there is one
/// (the run's longest prefix of whole groups that is a valid IBAN, or a veto); else by itself if
/// it looks like an IBAN; else it is a national account number and is not checked.
fn bank_account(text: &[char], start: usize, end: usize) -> Verdict {
    if let Some((run_start, group_ends)) = iban_run_overlapping(text, start, end) {
        let valid_end = group_ends.iter().rev().copied().find(|&e| {
            let compact: Vec<char> = text[run_start..e].iter().filter(|c| **c != ' ').map(|c| c.to_ascii_uppercase()).collect();
            iban_valid(&compact)
        });
        return match valid_end {
            Some(e) => Verdict::Valid { start: run_start, end: e },
            None => Verdict::Vetoed,
        };
    }
    let (start, end) = trim_punctuation(text, (start, end));
    let value = &text[start..end];
    if !iban_shaped(value) {
        return Verdict::Unchecked;
    }
    let compact: Vec<char> = value.iter().filter(|c| **c != ' ').map(|c| c.to_ascii_uppercase()).collect();
    verdict(iban_valid(&compact), start, end)
}

/// Longest IBAN printed with spaces: 34 characters in groups of four.
const IBAN_RUN_CHARS: usize = 34 + 8;

/// The first IBAN-shaped run of the text that overlaps [start, end): its start and where each of
/// its groups ends. A run starts a word with two letters and two digits and continues with
/// groups of ASCII letters and digits split by single spaces, up to 34 of them.
fn iban_run_overlapping(text: &[char], start: usize, end: usize) -> Option<(usize, Vec<usize>)> {
    let first = start.saturating_sub(IBAN_RUN_CHARS);
    (first..end).find_map(|p| {
        let word_start = p == 0 || !text[p - 1].is_alphanumeric();
        let head = text.get(p..p + 4)?;
        if !(word_start && iban_shaped(head)) {
            return None;
        }
        let mut ends = Vec::new();
        let (mut i, mut count) = (p, 0);
        loop {
            let group_start = i;
            while i < text.len() && text[i].is_ascii_alphanumeric() && count < 34 {
                i += 1;
                count += 1;
            }
            if i == group_start {
                break;
            }
            ends.push(i);
            if i + 1 < text.len() && text[i] == ' ' && text[i + 1].is_ascii_alphanumeric() && count < 34 {
                i += 1;
            } else {
                break;
            }
        }
        let run_end = *ends.last()?;
        (p < end && start < run_end).then_some((p, ends))
    })
}

/// The span without opening brackets and quotes before it, and closing ones or sentence
/// punctuation after it.
fn trim_punctuation(text: &[char], (mut start, mut end): (usize, usize)) -> (usize, usize) {
    while start < end && "([{<'\"«“‘".contains(text[start]) {
        start += 1;
    }
    while end > start && ".,;:!?)]}>'\"»”’".contains(text[end - 1]) {
        if end - start >= 2 && text[end - 1] == ':' && text[end - 2] == ':' {
            break; // an IPv6 address may end in "::"
        }
        end -= 1;
    }
    (start, end)
}

// --- card numbers ---------------------------------------------------------------------------

fn card_valid(value: &[char]) -> bool {
    let separated_groups = value.split(|c| *c == ' ' || *c == '-').all(|g| !g.is_empty() && g.iter().all(|c| c.is_ascii_digit()));
    let digits: Vec<char> = value.iter().copied().filter(|c| c.is_ascii_digit()).collect();
    separated_groups && (13..=19).contains(&digits.len()) && luhn_valid(&digits)
}

/// Luhn (ISO/IEC 7812): from the right, double every second digit (minus 9 when above 9); the
/// sum ends in 0.
pub fn luhn_valid(digits: &[char]) -> bool {
    let mut sum = 0;
    for (position, c) in digits.iter().rev().enumerate() {
        let Some(mut d) = c.to_digit(10) else { return false };
        if position % 2 == 1 {
            d *= 2;
            if d > 9 {
                d -= 9;
            }
        }
        sum += d;
    }
    sum % 10 == 0
}

// --- IBANs ----------------------------------------------------------------------------------

/// IBAN lengths per country code, from the SWIFT IBAN registry (ISO 13616).
const IBAN_LENGTHS: &[(&str, usize)] = &[
    ("AD", 24), ("AE", 23), ("AL", 28), ("AT", 20), ("AZ", 28), ("BA", 20), ("BE", 16), ("BG", 22),
    ("BH", 22), ("BI", 27), ("BR", 29), ("BY", 28), ("CH", 21), ("CR", 22), ("CY", 28), ("CZ", 24),
    ("DE", 22), ("DJ", 27), ("DK", 18), ("DO", 28), ("EE", 20), ("EG", 29), ("ES", 24), ("FI", 18),
    ("FK", 18), ("FO", 18), ("FR", 27), ("GB", 22), ("GE", 22), ("GI", 23), ("GL", 18), ("GR", 27),
    ("GT", 28), ("HN", 28), ("HR", 21), ("HU", 28), ("IE", 22), ("IL", 23), ("IQ", 23), ("IS", 26),
    ("IT", 27), ("JO", 30), ("KW", 30), ("KZ", 20), ("LB", 28), ("LC", 32), ("LI", 21), ("LT", 20),
    ("LU", 20), ("LV", 21), ("LY", 25), ("MC", 27), ("MD", 24), ("ME", 22), ("MK", 19), ("MN", 20),
    ("MR", 27), ("MT", 31), ("MU", 30), ("NI", 28), ("NL", 18), ("NO", 15), ("OM", 23), ("PK", 24),
    ("PL", 28), ("PS", 29), ("PT", 25), ("QA", 29), ("RO", 24), ("RS", 22), ("RU", 33), ("SA", 24),
    ("SC", 31), ("SD", 18), ("SE", 24), ("SI", 19), ("SK", 24), ("SM", 27), ("SO", 23), ("ST", 25),
    ("SV", 28), ("TL", 23), ("TN", 24), ("TR", 26), ("UA", 29), ("VA", 22), ("VG", 24), ("XK", 20),
    ("YE", 30),
];

/// Two letters and two digits first (spaces ignored, either case): what an IBAN looks like, and
/// no national account format does.
fn iban_shaped(value: &[char]) -> bool {
    let head: Vec<char> = value.iter().copied().filter(|c| *c != ' ').take(4).collect();
    head.len() == 4 && head[0].is_ascii_alphabetic() && head[1].is_ascii_alphabetic() && head[2].is_ascii_digit() && head[3].is_ascii_digit()
}

/// ISO 13616 on a compact IBAN: a registry country and its length, capitals and digits only,
/// and the number read with the first four characters moved to the end (letters as 10..=35) is
/// 1 modulo 97 (computed digit by digit, so it never overflows).
pub fn iban_valid(chars: &[char]) -> bool {
    if chars.len() < 5 || !chars.iter().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit()) {
        return false;
    }
    let country: String = chars[..2].iter().collect();
    if IBAN_LENGTHS.iter().find(|(code, _)| *code == country).map(|(_, length)| *length) != Some(chars.len()) {
        return false;
    }
    let mut remainder = 0u32;
    for &c in chars[4..].iter().chain(&chars[..4]) {
        let Some(value) = c.to_digit(36) else { return false };
        remainder = if value >= 10 { (remainder * 100 + value) % 97 } else { (remainder * 10 + value) % 97 };
    }
    remainder == 1
}

// --- IP addresses ---------------------------------------------------------------------------

fn ip_valid(value: &[char]) -> bool {
    let (address, prefix) = match value.iter().position(|c| *c == '/') {
        Some(slash) => (&value[..slash], Some(&value[slash + 1..])),
        None => (value, None),
    };
    let max_prefix = if ipv4_valid(address) {
        32
    } else if ipv6_valid(address) {
        128
    } else {
        return false;
    };
    prefix.map_or(true, |p| decimal(p).is_some_and(|n| n <= max_prefix))
}

/// A decimal number without leading zeros (one to three digits), or None.
fn decimal(digits: &[char]) -> Option<u32> {
    if digits.is_empty() || digits.len() > 3 || (digits.len() > 1 && digits[0] == '0') || !digits.iter().all(|c| c.is_ascii_digit()) {
        return None;
    }
    digits.iter().collect::<String>().parse().ok()
}

pub fn ipv4_valid(value: &[char]) -> bool {
    let parts: Vec<&[char]> = value.split(|c| *c == '.').collect();
    parts.len() == 4 && parts.iter().all(|p| decimal(p).is_some_and(|n| n <= 255))
}

/// RFC 4291 section 2.2: eight 16-bit groups in hex, `::` once for one or more zero groups, and
/// the last two groups optionally written as an IPv4 dotted quad.
pub fn ipv6_valid(value: &[char]) -> bool {
    let text: String = value.iter().collect();
    let (head, tail, compressed) = match text.find("::") {
        Some(at) => (&text[..at], &text[at + 2..], true),
        None => (text.as_str(), "", false),
    };
    if tail.contains("::") {
        return false;
    }
    let groups = |part: &str| -> Option<Vec<String>> {
        if part.is_empty() {
            return Some(Vec::new());
        }
        Some(part.split(':').map(str::to_string).collect())
    };
    let (Some(head), Some(mut tail)) = (groups(head), groups(if compressed { tail } else { "" })) else { return false };
    let mut all: Vec<String> = head;
    if compressed {
        all.append(&mut tail);
    }
    // An IPv4 tail counts as two groups, and only at the very end.
    let mut count = all.len();
    if let Some(last) = all.last() {
        if last.contains('.') {
            let quad: Vec<char> = last.chars().collect();
            if !ipv4_valid(&quad) {
                return false;
            }
            count += 1;
            all.pop();
        }
    }
    let hex_group = |g: &String| (1..=4).contains(&g.len()) && g.chars().all(|c| c.is_ascii_hexdigit());
    if !all.iter().all(hex_group) {
        return false;
    }
    if compressed { count < 8 } else { count == 8 }
}

// --- e-mail addresses and URLs --------------------------------------------------------------

/// local@domain: a dot-atom local part (letters, digits and !#$%&'*+/=?^_`{|}~- in dot-separated
/// runs) of at most 64 characters, and a domain name.
pub fn email_valid(value: &[char]) -> bool {
    let Some(at) = value.iter().position(|c| *c == '@') else { return false };
    let (local, domain) = (&value[..at], &value[at + 1..]);
    let atom_char = |c: &char| c.is_alphanumeric() || "!#$%&'*+/=?^_`{|}~-".contains(*c);
    let local_ok = !local.is_empty()
        && local.len() <= 64
        && local.split(|c| *c == '.').all(|run| !run.is_empty() && run.iter().all(atom_char));
    local_ok && domain_valid(domain)
}

/// Two or more labels of letters, digits and inner hyphens (at most 63 each), the last one a
/// top-level domain: two or more letters, or punycode.
fn domain_valid(domain: &[char]) -> bool {
    if domain.is_empty() || domain.len() > 253 {
        return false;
    }
    let labels: Vec<&[char]> = domain.split(|c| *c == '.').collect();
    let label_ok = |l: &&[char]| {
        (1..=63).contains(&l.len()) && l[0] != '-' && l[l.len() - 1] != '-' && l.iter().all(|c| c.is_alphanumeric() || *c == '-')
    };
    let tld = labels[labels.len() - 1];
    let punycode = tld.len() > 4 && tld[..4].iter().collect::<String>().eq_ignore_ascii_case("xn--");
    labels.len() >= 2 && labels.iter().all(label_ok) && (punycode || (tld.len() >= 2 && tld.iter().all(|c| c.is_alphabetic())))
}

/// [scheme://][userinfo@]host[:port][/path][?query][#fragment], no whitespace anywhere.
pub fn url_valid(value: &[char]) -> bool {
    if value.is_empty() || value.iter().any(|c| c.is_whitespace() || c.is_control()) {
        return false;
    }
    let text: String = value.iter().collect();
    let (rest, has_scheme) = match text.find("://") {
        Some(at) => {
            let scheme = &text[..at];
            let scheme_ok = scheme.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
                && scheme.chars().all(|c| c.is_ascii_alphanumeric() || "+.-".contains(c));
            if !scheme_ok {
                return false;
            }
            (&text[at + 3..], true)
        }
        None => (text.as_str(), false),
    };
    let authority_end = rest.find(|c| "/?#".contains(c)).unwrap_or(rest.len());
    let mut authority = &rest[..authority_end];
    if has_scheme {
        // user:password@host only after a scheme; without one, an @ makes an e-mail address.
        if let Some(at) = authority.rfind('@') {
            authority = &authority[at + 1..];
        }
    }
    let (host, port) = split_port(authority);
    if port.is_some_and(|p| p.is_empty() || p.len() > 5 || !p.chars().all(|c| c.is_ascii_digit()) || p.parse::<u32>().map_or(true, |n| n > 65535)) {
        return false;
    }
    let host_chars: Vec<char> = host.chars().collect();
    let bracketed_v6 = host.starts_with('[') && host.ends_with(']') && host.len() > 2 && ipv6_valid(&host_chars[1..host_chars.len() - 1]);
    host.eq_ignore_ascii_case("localhost") || bracketed_v6 || ipv4_valid(&host_chars) || domain_valid(&host_chars)
}

/// host and port of an authority ("[::1]:8080", "example.com:443", "example.com").
fn split_port(authority: &str) -> (&str, Option<&str>) {
    let search_from = if authority.starts_with('[') { authority.find(']').unwrap_or(0) } else { 0 };
    match authority[search_from..].rfind(':') {
        Some(at) => (&authority[..search_from + at], Some(&authority[search_from + at + 1..])),
        None => (authority, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chars(s: &str) -> Vec<char> {
        s.chars().collect()
    }

    fn verdict(label: &str, s: &str) -> Verdict {
        let text = chars(s);
        check(label, &text, 0, text.len())
    }

    #[test]
    fn cards() {
        assert!(matches!(verdict("CREDIT_CARD", "4111 1111 1111 1111"), Verdict::Valid { .. }));
        assert!(matches!(verdict("CREDIT_CARD", "4111-1111-1111-1111."), Verdict::Valid { start: 0, end: 19 }));
        assert_eq!(verdict("CREDIT_CARD", "4111 1111 1111 1112"), Verdict::Vetoed);
        assert_eq!(verdict("CREDIT_CARD", "4111  1111 1111 1111"), Verdict::Vetoed);
        assert_eq!(verdict("CREDIT_CARD", "411111111111"), Verdict::Vetoed);
        // A part of a number is judged by the whole number.
        let text = chars("Card 4111 1111 1111 1112, thanks");
        assert_eq!(check("CREDIT_CARD", &text, 10, 24), Verdict::Vetoed);
        let text = chars("Card 4111 1111 1111 1111, thanks");
        assert_eq!(check("CREDIT_CARD", &text, 10, 24), Verdict::Valid { start: 5, end: 24 });
    }

    #[test]
    fn ibans() {
        assert!(matches!(verdict("BANK_ACCOUNT", "DE89 3704 0044 0532 0130 00"), Verdict::Valid { .. }));
        assert!(matches!(verdict("BANK_ACCOUNT", "de89370400440532013000"), Verdict::Valid { .. }));
        assert_eq!(verdict("BANK_ACCOUNT", "DE89 3704 0044 0532 0130 01"), Verdict::Vetoed);
        assert_eq!(verdict("BANK_ACCOUNT", "DE89 3704 0044 0532 0130"), Verdict::Vetoed); // country length
        assert_eq!(verdict("BANK_ACCOUNT", "QQ12 3456 7890"), Verdict::Vetoed);
        assert_eq!(verdict("BANK_ACCOUNT", "12345678"), Verdict::Unchecked);
        assert_eq!(verdict("BANK_ACCOUNT", "NWBK60161331926819"), Verdict::Unchecked);
        let text = chars("IBAN DE89 3704 0044 0532 0130 01 please");
        assert_eq!(check("BANK_ACCOUNT", &text, 10, 32), Verdict::Vetoed); // the digits of an invalid IBAN
        let text = chars("IBAN DE89 3704 0044 0532 0130 00 please");
        assert_eq!(check("BANK_ACCOUNT", &text, 10, 32), Verdict::Valid { start: 5, end: 32 });
        let text = chars("account 12345678, IBAN follows");
        assert_eq!(check("BANK_ACCOUNT", &text, 8, 16), Verdict::Unchecked);
    }

    #[test]
    fn addresses() {
        for good in ["192.168.0.1", "10.0.0.0/8", "2001:db8::8a2e:370:7334", "::1", "fe80::", "::ffff:192.0.2.1", "1:2:3:4:5:6:7:8", "[2001:db8::1]"] {
            assert!(matches!(verdict("IP_ADDRESS", good), Verdict::Valid { .. }), "{good}");
        }
        for bad in ["999.1.1.1", "01.2.3.4", "1.2.3", "1.2.3.4.5", "10.4.300.2", "1:2:3:4:5:6:7:8:9", "1::2::3", "12345::", "10.0.0.0/33", "g::1"] {
            assert_eq!(verdict("IP_ADDRESS", bad), Verdict::Vetoed, "{bad}");
        }
        let text = chars("from 999.1.1.1 today");
        assert_eq!(check("IP_ADDRESS", &text, 9, 14), Verdict::Vetoed); // "1.1.1" of an invalid quad
        let text = chars("host 10.0.0.1:8080.");
        assert_eq!(check("IP_ADDRESS", &text, 5, 13), Verdict::Valid { start: 5, end: 13 });
    }

    #[test]
    fn emails_and_urls() {
        assert!(matches!(verdict("EMAIL", "maria.garcia+news@correo.es"), Verdict::Valid { .. }));
        assert!(matches!(verdict("EMAIL", "jürgen@müller.de"), Verdict::Valid { .. }));
        for bad in ["a@b", "x@y.z1", "@example.com", "a..b@example.com", "john.doe", "a@-x.com"] {
            assert_eq!(verdict("EMAIL", bad), Verdict::Vetoed, "{bad}");
        }
        for good in ["https://status.example.org/incidents/4821", "www.example.com", "example.com/pricing?x=1", "http://localhost:8080/", "ftp://[::1]/a", "https://user@host.example.net"] {
            assert!(matches!(verdict("URL", good), Verdict::Valid { .. }), "{good}");
        }
        for bad in ["v1.2.3", "e.g.", "http://", "https://example.com:99999", "john@example.com", "1.5"] {
            assert_eq!(verdict("URL", bad), Verdict::Vetoed, "{bad}");
        }
        assert_eq!(verdict("CITY", "999.1.1.1"), Verdict::Unchecked);
    }
}
