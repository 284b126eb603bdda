//! Straight-line repetition for the kernels' register tiles.

/// f(0), f(1), .., f(R - 1) as straight-line code. LLVM leaves a loop over rows rolled when its
/// body is long, and each iteration of a rolled loop would pass an epoch check, with every
/// vector the rows share (the loaded keys, the held weights) spilled across it.
#[inline(always)]
pub fn unrolled<const R: usize>(mut f: impl FnMut(usize)) {
    const { assert!(R <= 8, "register tiles have at most 8 rows (porter/codegen/tuning.py)") };
    // written out: a `for` over the eight would stay a loop
    if R > 0 { f(0) }
    if R > 1 { f(1) }
    if R > 2 { f(2) }
    if R > 3 { f(3) }
    if R > 4 { f(4) }
    if R > 5 { f(5) }
    if R > 6 { f(6) }
    if R > 7 { f(7) }
}
