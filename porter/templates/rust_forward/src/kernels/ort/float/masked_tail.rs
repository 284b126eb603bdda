//! The masked keys at the end of a right-padded window, left out of the context where that
//! provably changes no bit.
//!
//! MLAS's AVX-512F exp scales by vscalefps, so a masked key's probability is a subnormal
//! (2^-128 times the polynomial, over the row's sum), not the 0 its AVX2 kernel gives. Every
//! multiply-add of such a probability with a value row then has a subnormal operand, which x86
//! cores finish in a microcode assist, tens to hundreds of times slower: a 20-token window of
//! MiniLM-L6 spent 1.1 s in attention instead of 37 ms. wasm has no flush-to-zero to opt into.
//!
//! The masked suffix [tail, keys) holds the last terms of each context output's fma chain (one
//! SGEMM block over all keys, alpha 1). A term whose magnitude is below half the gap between the
//! chain's value and either neighbour leaves the rounded sum at that value, and then so does the
//! next: if every tail term is below that bound, the chain over the live keys alone is the chain
//! over all keys, bit for bit. The bound comes from exponents only (|p| < 2^a for every tail
//! probability, |v| < 2^b for every tail value of the head), so the check does no subnormal
//! arithmetic of its own; an output it cannot vouch for (a zero or tiny chain, huge values,
//! NaN) sends the row back to the full chain.

/// The first key of the masked suffix (`keys` when the last key is kept or nothing is masked).
pub fn masked_suffix_start(keep: Option<&[bool]>, keys: usize) -> usize {
    keep.map_or(keys, |keep| keep[..keys].iter().rposition(|&kept| kept).map_or(0, |last| last + 1))
}

/// An exponent e with |x| < 2^e for every x, from the largest magnitude's bits (a subnormal or
/// zero gives -126); None for NaN or an infinity.
pub fn magnitude_exponent(values: impl Iterator<Item = f32>) -> Option<i32> {
    // magnitudes compared as integers: no float operation touches a subnormal
    let largest = values.map(|x| x.to_bits() & 0x7fff_ffff).max().unwrap_or(0);
    if largest >= 0x7f80_0000 {
        return None;
    }
    Some(biased_exponent(largest).max(1) - 126)
}

/// Whether adding any product smaller than 2^term_exponent to `sum` (fused, or rounded once
/// first) leaves it as it is: the product, even rounded up to a power of two, stays below half
/// the smaller gap around `sum` (2^(E - 151) for a normal sum of biased exponent E, halved again
/// when it is a power of two; 2^-150 for a subnormal one). A zero sum would turn into the term.
pub fn absorbs(sum: f32, term_exponent: i32) -> bool {
    let bits = sum.to_bits() & 0x7fff_ffff;
    bits != 0 && bits < 0x7f80_0000 && term_exponent <= biased_exponent(bits).max(1) - 153
}

fn biased_exponent(magnitude_bits: u32) -> i32 {
    (magnitude_bits >> 23) as i32
}
