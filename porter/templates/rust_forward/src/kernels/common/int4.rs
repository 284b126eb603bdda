//! int4 weights as model.bin stores them (porter/codegen/pack.py pack_int4): two a byte in blocks
//! of 32 values, byte i of a block holding value i in its low nibble and value 16 + i in its high
//! one, so a 16-byte load unpacks to 32 consecutive values with two shifts and no shuffle.
//! Unpacked to the one-int8-a-value form the integer GEMM reads: integer work only, each value
//! its nibble sign-extended, so the GEMM sees exactly the values recovery folded.

use core::arch::wasm32::*;

/// Packed bytes per block (two values each).
pub const BLOCK_BYTES: usize = 16;

/// Scalar reference: out[..2 * packed.len()] = the values of `packed` (whole blocks).
pub fn unpack_int4_scalar(packed: &[u8], out: &mut [i8]) {
    for (block, values) in packed.chunks_exact(BLOCK_BYTES).zip(out.chunks_exact_mut(2 * BLOCK_BYTES)) {
        for (i, &byte) in block.iter().enumerate() {
            values[i] = ((byte << 4) as i8) >> 4;
            values[BLOCK_BYTES + i] = (byte as i8) >> 4;
        }
    }
}

/// The same, one block per v128: the low nibbles shifted up then arithmetically down, the high
/// nibbles arithmetically down.
pub fn unpack_int4(packed: &[u8], out: &mut [i8]) {
    assert!(packed.len() % BLOCK_BYTES == 0 && out.len() >= 2 * packed.len());
    for (block, values) in packed.chunks_exact(BLOCK_BYTES).zip(out.chunks_exact_mut(2 * BLOCK_BYTES)) {
        // SAFETY: 16 bytes of block, 32 of values.
        unsafe {
            let v = v128_load(block.as_ptr() as *const v128);
            v128_store(values.as_mut_ptr() as *mut v128, i8x16_shr(i8x16_shl(v, 4), 4));
            v128_store(values.as_mut_ptr().add(BLOCK_BYTES) as *mut v128, i8x16_shr(v, 4));
        }
    }
}
