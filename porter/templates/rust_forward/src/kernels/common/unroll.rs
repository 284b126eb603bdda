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
/// The indices are the leaves of a binary tree six levels deep (one `x` a level), in order.
macro_rules! straight_line {
    ($c:ident in 0..$n:expr => $body:block) => {{
        const { assert!($n <= 8 * 8, "more straight-line steps than the tree's leaves") };
        $crate::kernels::common::unroll::straight_line!(@tree $c, $n, $body, 0; x x x x x x)
    }};
    (@tree $c:ident, $n:expr, $body:block, $i:expr;) => {{
        if $i < $n {
            let $c: usize = $i;
            $body
        }
    }};
    (@tree $c:ident, $n:expr, $body:block, $i:expr; x $($level:tt)*) => {{
        $crate::kernels::common::unroll::straight_line!(@tree $c, $n, $body, 2 * $i; $($level)*);
        $crate::kernels::common::unroll::straight_line!(@tree $c, $n, $body, 2 * $i + 1; $($level)*);
    }};
}
pub(crate) use straight_line;
