"""Which rows of each token buffer a program computes: the live-length execution.

Where the graph masks padding out of attention (every attention block drops the mask input's
padded keys with a value whose exp() underflows to exactly 0 in the reference's kernel) and every
other step works row by row, rows past the last kept token cannot change a live row: they only
ever add exact zeros. The program then computes, backwards from its output:

- the output's rows: the live tokens (LIVE), or one row for a pooled output;
- a row-wise step's input rows: the rows its output needs;
- attention's Q rows: the rows its output needs; K and V: every key up to the last kept one (KEYS);
- anything a step mixes across rows (a reduction or a slice over the tokens, an L2 normalisation
  whose rows span tokens): ALL rows.

onnxruntime's arithmetic is inert only for float programs on the CPUs whose softmax is MLAS's AVX2
kernel: its exp clamps the masked score to -88.38 and builds 2^-127 from exponent bits, which is
0; and for a float16 graph's Softmax, its function body on either CPU: MLAS's Exp kernels clamp at
-103.97, whose p * 2^-150 rounds to 0 in both. The AVX-512F softmax kernel scales by vscalefps, a subnormal instead (its context leaves the padded
keys out only where a run-time bound shows it exact: the crate's ort/float/masked_tail.rs), and
DynamicQuantizeLinear quantises the whole tensor at once, padded rows included; those programs
compute ALL. `porter verify` runs every window both ways and fails on any bit of difference.
"""

from __future__ import annotations

from porter.ir.encoder import (INPUT_IDS, INPUT_MASK, INPUT_TYPES, ActivationQuant, Attention, ElementwiseStep, EncoderProgram,
                               L2NormalizeStep, LinearStep, MaskMode, ReduceStep, Reference, Rows, SliceStep)
from porter.ir.tensor import TensorStep
from porter.recover.boxes import Box, box_union, operand_boxes, whole
from porter.recover.tokens import view_axis
from porter.reference.ort import cpu as ort_cpu

ORDER = [Rows.ONE, Rows.LIVE, Rows.KEYS, Rows.ALL]
DROP_UNDERFLOWS = -1e4  # exp(x - max) of a score this far below is exactly 0 (LiteRT; MLAS's AVX2 kernel)


def padding_is_inert(program: EncoderProgram) -> bool:
    attentions = program.attentions()
    masks_underflow = bool(attentions) and all(a.mask != MaskMode.NONE and a.drop_value <= DROP_UNDERFLOWS
                                               for a in attentions)
    return masks_underflow and (program.reference == Reference.LITERT_BUILTIN or _ort_rows_independent(program))


def _ort_rows_independent(program: EncoderProgram) -> bool:
    """onnxruntime's arithmetic keeps padded rows out of live ones: exact zeros for masked keys
    (the AVX2 softmax, or every softmax a function body) and no tensor-wide activation quantisation."""
    zeros = program.ort_cpu is not None and (ort_cpu.target(program.ort_cpu).floats == ort_cpu.AVX2_FLOATS
                                             or all(a.softmax_body for a in program.attentions()))
    return (program.reference == Reference.ONNXRUNTIME_CPU and zeros
            and not any(isinstance(s, LinearStep) and s.linear.activation_quant == ActivationQuant.ORT_DYNAMIC_UINT8
                        for s in program.steps))


def _widest(a: Rows, b: Rows) -> Rows:
    return max(a, b, key=ORDER.index)


def _input_needs(program: EncoderProgram, step, out_rows: Rows) -> dict[str, Rows]:
    """The rows of each input buffer a step needs to compute `out_rows` rows of its output."""
    buffers = program.buffers
    token_inputs = [b for b in step.inputs if b in buffers and buffers[b].tokens]
    if isinstance(step, Attention):
        q, k, v = step.inputs[:3]
        return {q: out_rows, k: Rows.KEYS, v: Rows.KEYS}
    if isinstance(step, ReduceStep):
        return {b: Rows.ALL for b in token_inputs}  # a reduction over the tokens mixes them
    if isinstance(step, L2NormalizeStep) and any(buffers[b].cols % step.operand.shape[-1] for b in token_inputs):
        return {b: Rows.ALL for b in token_inputs}  # its rows span tokens
    if isinstance(step, SliceStep):
        if buffers[step.outputs[0]].tokens:
            return {b: out_rows for b in token_inputs}
        # the first token (CLS pooling) is always live; any other row of the window may not be
        token_axis = next(a for a, d in enumerate(step.operand.shape) if d != 1)
        first_row = any(axis == token_axis and start == 0 and stop <= 1 for axis, start, stop, _ in step.slices)
        return {b: Rows.LIVE if first_row else Rows.ALL for b in token_inputs}
    out = step.outputs[0]
    if isinstance(step, ElementwiseStep) and not buffers[out].tokens:
        return {b: Rows.ALL for b in token_inputs}
    return {b: out_rows for b in token_inputs}


def set_row_extents(program: EncoderProgram) -> None:
    program.padding_is_inert = padding_is_inert(program)
    buffers = program.buffers
    tensor_steps = [s for s in program.steps if isinstance(s, TensorStep)]
    if not program.padding_is_inert:
        for b in buffers.values():
            b.extent = Rows.ALL if b.tokens else Rows.ONE
        for step in tensor_steps:
            step.limits = tuple(Rows.ALL for _ in step.shape)
        return
    need = {name: Rows.ONE for name in buffers}
    boxes: dict[str, Box] = {}  # the values of buffers that are not one row per token (porter.recover.boxes)
    shapes = _shapes(program)
    out = buffers[program.output_buffer]
    need[program.output_buffer] = Rows.LIVE if out.tokens else Rows.ONE
    for step in reversed(program.steps):
        rows = Rows.ONE
        for o in step.outputs:
            rows = _widest(rows, need.get(o, Rows.ONE))
        for name, needed in _input_boxes(program, step, rows, boxes, shapes):
            if name in (INPUT_IDS, INPUT_MASK, INPUT_TYPES):
                continue
            if buffers[name].tokens:
                need[name] = _widest(need[name], needed[_token_axis(shapes[name])] if needed else Rows.ALL)
            else:
                boxes[name] = box_union(boxes.get(name), needed if needed else whole(shapes[name]))
    for name, b in buffers.items():
        b.extent = need[name] if b.tokens else Rows.ONE
    for step in tensor_steps:
        out = step.outputs[0]
        step.limits = _token_box(step.shape, need[out]) if buffers[out].tokens \
            else boxes.get(out) or whole(step.shape)


def _shapes(program: EncoderProgram) -> dict[str, tuple[int, ...]]:
    """Each buffer's shape as the step that writes it has it (a token buffer: [seq, cols])."""
    shapes = {name: ((b.rows, b.cols) if b.tokens else (b.rows * b.cols,)) for name, b in program.buffers.items()}
    for step in program.steps:
        if isinstance(step, TensorStep):
            shapes[step.outputs[0]] = tuple(step.shape)
    return shapes


def _token_axis(shape: tuple[int, ...]) -> int:
    """The token axis of a token buffer seen with `shape`: its first axis of more than one value."""
    return next((a for a, d in enumerate(shape) if d != 1), 0)


def _token_box(shape: tuple[int, ...], rows: Rows) -> Box:
    axis = _token_axis(shape)
    return tuple(rows if a == axis else Rows.ALL for a in range(len(shape)))


def _input_boxes(program: EncoderProgram, step, rows: Rows, boxes: dict, shapes: dict):
    """(buffer, the box of it the step reads, or None for all of it) for every buffer input, in
    the buffer's own shape: a token buffer's box bounds its token axis."""
    buffers = program.buffers
    if isinstance(step, TensorStep):
        out = step.outputs[0]
        out_box = _token_box(step.shape, rows) if buffers[out].tokens else boxes.get(out) or whole(step.shape)
        for operand, box in zip(step.operands, operand_boxes(step, out_box)):
            if operand.buffer:
                yield operand.buffer, _seen_as(box, operand.shape, shapes[operand.buffer], program.seq)
        return
    terms = [t for t in step.terms if t.buffer] if isinstance(step, Attention) else []
    for term in terms:  # read for the rows attention computes, over every key it reads
        box = tuple(Rows.ALL for _ in term.shape[:-2]) + (rows, Rows.KEYS)
        yield term.buffer, _seen_as(box, term.shape, shapes[term.buffer], program.seq)
    token_needs = _input_needs(program, step, rows)
    for name in dict.fromkeys(step.inputs).keys() - {t.buffer for t in terms}:
        if name in token_needs:
            yield name, _token_box(shapes[name], token_needs[name])
        elif name in buffers and not buffers[name].tokens:
            yield name, None  # a step that reads all of it


def _seen_as(box: Box, view: tuple[int, ...], shape: tuple[int, ...], seq: int) -> Box | None:
    """A box of a buffer seen with shape `view`, in the buffer's own `shape` (None: all of it)."""
    mapped = [Rows.ALL] * len(shape)
    for axis, rows in enumerate(box):
        if rows == Rows.ALL or view[axis] == 1:
            continue
        target = view_axis(view, shape, axis)
        if target is None or view[axis] != seq:
            return None
        mapped[target] = rows
    return tuple(mapped)
