"""porter/bench/mca.py and profile.py: the machine code split into basic blocks, the hot block
chosen by its samples, and llvm-mca's model of the roofline's floor loops (llvm-mca comes with the
machine's Debian llvm)."""

import tempfile
from collections import Counter
from pathlib import Path

from porter.bench import mca
from porter.bench.profile import Profile


def test_blocks_split_at_jump_targets_and_after_branches():
    code = [(0x10, "vmulps %xmm1,%xmm0,%xmm0"), (0x14, "jae 30"), (0x18, "vaddps %xmm1,%xmm0,%xmm0"),
            (0x1c, "vmulps %xmm1,%xmm0,%xmm0"), (0x20, "vmovups %xmm0,(%rax)"), (0x24, "vaddps %xmm2,%xmm0,%xmm0"),
            (0x28, "jmp 20"), (0x30, "call 100"), (0x34, "ret")]
    assert mca.basic_blocks(code) == [[(0x10, "vmulps %xmm1,%xmm0,%xmm0")],
                                      [(0x18, "vaddps %xmm1,%xmm0,%xmm0"), (0x1c, "vmulps %xmm1,%xmm0,%xmm0")],
                                      [(0x20, "vmovups %xmm0,(%rax)"), (0x24, "vaddps %xmm2,%xmm0,%xmm0")]]


def test_the_hottest_block_is_the_one_with_the_most_samples():
    """Not the one with the most work: a remainder tile's block can hold as many products as the
    full tile's and never run."""
    full_tile = [(0, "vmulps %xmm1,%xmm0,%xmm0"), (4, "vaddps %xmm0,%xmm3,%xmm3"), (8, "jmp 0")]
    remainder = [(16, "vmulps %xmm1,%xmm0,%xmm0"), (20, "vmulps %xmm1,%xmm2,%xmm2"), (24, "vmulps %xmm1,%xmm2,%xmm2"),
                 (28, "jmp 16")]
    other = [(0, "vmulps %xmm1,%xmm0,%xmm0"), (4, "ret")]
    samples = Counter({("k::context_kernel", 4): 30, ("k::context_kernel", 20): 2, ("k::unrelated", 0): 90})
    profile = Profile(samples, {"k::context_kernel": full_tile + remainder, "k::unrelated": other})
    assert profile.hottest_block("context_kernel", mca.basic_blocks) == \
        (["vmulps %xmm1,%xmm0,%xmm0", "vaddps %xmm0,%xmm3,%xmm3"], 30)
    assert profile.hottest_block("missing", mca.basic_blocks) is None
    assert profile.functions() == [("k::unrelated", 90), ("k::context_kernel", 32)] and profile.total == 122


def test_floor_loops_are_modelled_at_their_unrolled_work():
    """The f32 mul + add floor's variants compiled by porter's wasmtime: each loop holds the
    roofline's 192 updates, and llvm-mca (the newest installed; znver3 is in every LLVM since 13)
    puts the fastest variant's multiply-add between a quarter and two cycles."""
    llvm_mca = mca.newest_mca()
    assert llvm_mca is not None, "no llvm-mca: Debian's llvm package provides it"
    with tempfile.TemporaryDirectory() as scratch:
        blocks, work = mca.floor_blocks(Path(scratch))["f32 mul + add"]
        assert len(blocks) == len(mca.roofline.ACCUMULATOR_COUNTS) * len(mca.roofline.ANCHOR_INTERVALS)
        for block in blocks:
            assert mca.work_of(block, work) == mca.work_of(block, "vaddps") == mca.roofline.OPS_PER_ITERATION
        cycles = mca.floor_cycles(blocks, work, llvm_mca, "znver3", Path(scratch))
        assert cycles is not None and 0.25 < cycles < 2
        assert mca.floor_cycles(blocks, work, llvm_mca, "no-such-cpu", Path(scratch)) is None
