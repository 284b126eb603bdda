"""porter/bench/mca.py: the machine code split into basic blocks, the hot block chosen, and
llvm-mca's model of the roofline's floor loops (llvm-mca comes with the machine's Debian llvm)."""

import tempfile
from pathlib import Path

from porter.bench import mca


def test_blocks_split_at_jump_targets_and_after_branches():
    code = [(0x10, "vmulps %xmm1,%xmm0,%xmm0"), (0x14, "jae 30"), (0x18, "vaddps %xmm1,%xmm0,%xmm0"),
            (0x1c, "vmulps %xmm1,%xmm0,%xmm0"), (0x20, "vmovups %xmm0,(%rax)"), (0x24, "vaddps %xmm2,%xmm0,%xmm0"),
            (0x28, "jmp 20"), (0x30, "call 100"), (0x34, "ret")]
    assert mca.basic_blocks(code) == [["vmulps %xmm1,%xmm0,%xmm0"],
                                      ["vaddps %xmm1,%xmm0,%xmm0", "vmulps %xmm1,%xmm0,%xmm0"],
                                      ["vmovups %xmm0,(%rax)", "vaddps %xmm2,%xmm0,%xmm0"]]


def test_hottest_block_has_the_most_work_then_the_most_instructions():
    first_step = [(0, "vmulps %xmm1,%xmm0,%xmm0"), (4, "vmulps %xmm1,%xmm2,%xmm2"), (8, "jmp 40")]
    steady = [(40, "vmovdqu (%rax),%xmm3"), (44, "vmulps %xmm1,%xmm0,%xmm0"), (48, "vmulps %xmm1,%xmm2,%xmm2"),
              (52, "vaddps %xmm0,%xmm3,%xmm3"), (56, "jmp 40")]
    other = [(0, "vmulps %xmm1,%xmm0,%xmm0"), (4, "vmulps %xmm1,%xmm0,%xmm0"), (8, "vmulps %xmm1,%xmm0,%xmm0")]
    functions = {"f::context_kernel": first_step + steady, "g::unrelated": other}
    assert mca.hottest_block(functions, "context_kernel", "vmulps") == [text for _, text in steady[:-1]]
    assert mca.hottest_block(functions, "missing", "vmulps") is None


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
