//! Putting originals back: every occurrence of a placeholder in the text becomes its original.
//!
//! One left-to-right pass over the text, so that an original that itself looks like a placeholder
//! is never replaced a second time. Where several placeholders match at one position the longest
//! wins; a placeholder listed twice keeps its first original.

use crate::api::RestoreItem;

pub fn restore(text: &str, items: &[RestoreItem]) -> String {
    let mut by_length: Vec<&RestoreItem> = items.iter().collect();
    // Stable sort: among equal lengths the earlier item wins.
    by_length.sort_by_key(|item| std::cmp::Reverse(item.placeholder.len()));
    let mut restored = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        match by_length.iter().find(|item| rest.starts_with(item.placeholder.as_str())) {
            Some(item) => {
                restored.push_str(&item.original);
                rest = &rest[item.placeholder.len()..];
            }
            None => {
                restored.push(c);
                rest = &rest[c.len_utf8()..];
            }
        }
    }
    restored
}
