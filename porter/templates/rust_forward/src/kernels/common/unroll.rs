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

/// `for $c in 0..$n { $body }` as straight-line code, for a constant $n up to 64 (a head's
/// dimensions, through which attention's score tiles carry their sums in registers). The body
/// is written out at each index rather than called through a closure as in `unrolled`: LLVM
/// declines to inline a long closure called this often, and each call would spill the sums.
macro_rules! straight_line {
    ($c:ident in 0..$n:expr => $body:block) => {
        $crate::kernels::common::unroll::straight_line!(@each $c, $n, $body; 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63)
    };
    (@each $c:ident, $n:expr, $body:block; $($i:literal)*) => {{
        const { assert!($n <= 64, "at most 64 straight-line steps") };
        $( if $i < $n { let $c: usize = $i; $body } )*
    }};
}
pub(crate) use straight_line;
