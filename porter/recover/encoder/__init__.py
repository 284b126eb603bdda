"""Graph -> EncoderProgram: canonicalise, recognise blocks by role, run the rest op by op, prove.

1. porter.recover.canonical puts the graph into one op vocabulary (folded, identities gone).
2. Blocks with fast kernels are recognised by role: the embedding sum (the lookup by the ids),
   attention (a softmax between Q.K^T and P.V), LayerNorms (porter.recover.encoder.norms), the GELU op
   and the GELUs onnxruntime fuses (GeluFusion; FastGeluFusion by its own rule,
   porter.recover.canonical.ort_activations), and every Linear.
3. Every other op must be an elementwise op, a reduction or a slice: it becomes one step that
   runs that op in the reference's arithmetic, so a spelling no block knows still compiles
   exactly. Views are free (a buffer seen with another shape).
4. Every op of the file is accounted for: in a step, or explained by canonicalisation (folded,
   an identity, unused). Anything else is refused, naming the file's op.
5. Each block is proven against the graph's own ops on random inputs (porter.recover.prove).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from porter.errors import PorterError
from porter.frontends.graph import Graph
from porter.frontends.schemes import is_full_integer, is_onnxruntime_qdq
from porter.ir.encoder import (INPUT_MASK, ActivationQuant, IntegerDot, WeightFormat, UNARY, Attention, Buffer, Elementwise, ElementwiseStep,
                               EncoderProgram, Gelu, GeluStep, L2NormalizeStep, LayerNorm, Linear, LinearStep, MaskMode,
                               Operand, Reduce, ReduceStep, Reference, SliceStep, Step)
from porter.ir.tensor import TensorStep
from porter.recover import probe
from porter.recover.encoder import attention, embeddings, norms, tensors
from porter.recover.encoder.skip_bias import fuse_skip_biases
from porter.recover.integer import recover_integer
from porter.recover.qdq import recover_qdq
from porter.recover.canonical import GATHERS, Canonical, canonicalise, gathers_as_slices, ort_shapes
from porter.recover.canonical.ort_activations import fast_gelu_at
from porter.recover.engine import AnyOf, Const, Op, Var, match
from porter.recover.probe import describe_op
from porter.recover.prove import prove
from porter.recover.rows import set_row_extents
from porter.recover.tokens import TokenAxes, token_axes
from porter.reference import quant
from porter.reference.litert import floats as LF
from porter.reference.ort import cpu as ort_cpus
from porter.reference.ops import Unsupported


@dataclass
class Block:
    step: Step
    ops: set[int]  # canonical ops
    arrays: dict = field(default_factory=dict)
    # ops between the step's inputs and its own that other steps compute too (a head split other
    # products read as well): proven with the block, claimed by it not
    shared: set[int] = field(default_factory=set)


_GENERIC = {kind.value: kind for kind in Elementwise}
_REDUCE = {"reduce_sum": Reduce.SUM, "reduce_mean": Reduce.MEAN, "reduce_max": Reduce.MAX,
           "reduce_l2": Reduce.L2}


# onnxruntime's GeluFusion: (x * (erf(x / sqrt 2) + 1)) * 0.5 becomes its Gelu kernel, which
# computes erf(x * (1 / sqrt 2)); other orders run op by op and need no block.
def _onnx_fused_gelu():
    x = Var("x")
    erf = Op("erf", Op("div", x, Const("sqrt2", where=lambda t, g: t.data.size == 1
                                             and np.float32(t.data.reshape(-1)[0]) == np.float32(np.sqrt(2)))))
    one_plus = Op("add", erf, Const("one", where=lambda t, g: t.data.size == 1 and t.data.reshape(-1)[0] == 1),
                  commutative=True)
    half = Const("half", where=lambda t, g: t.data.size == 1 and t.data.reshape(-1)[0] == 0.5)
    return Op("mul", Op("mul", x, one_plus, commutative=True), half, commutative=True, name="out")


ONNX_FUSED_GELU = AnyOf(_onnx_fused_gelu())


def recover_encoder(g: Graph, ort_cpu: str = ort_cpus.AUTO, l1d: str | int = ort_cpus.AUTO,
                    window: int | None = None) -> EncoderProgram:
    """ort_cpu: for an ONNX graph, the CPU whose onnxruntime arithmetic the program reproduces
    (a porter.reference.ort.cpu target, or auto: this machine's). l1d: for a TFLite graph, the
    L1 data cache size whose Eigen blocking its float products follow (bytes, a size such as
    "48K", or auto: this machine's). window: the tokens a window holds, for a graph whose
    sequence dimension is symbolic (porter.recover.canonical.window; None: its position
    table's size)."""
    if is_full_integer(g):  # int8 activations: LiteRT's integer kernels op by op, no float blocks
        return recover_integer(g, window)
    if is_onnxruntime_qdq(g):  # onnxruntime QDQ: the kernels its QDQ transformers leave, op by op
        return recover_qdq(g, _ort_cpu_of(g, ort_cpu), window)
    eigen_l1d = _eigen_l1d_of(g, l1d)
    c = canonicalise(g, _ort_cpu_of(g, ort_cpu), window)
    cg = c.graph
    if len(cg.outputs) != 1:
        raise PorterError(f"porter compiles models with one output; this one has {sorted(cg.outputs)}")
    skip_fuses = _ort_skip_fusion(g, c)
    inputs = embeddings.find_inputs(cg, c.reference)
    seq = cg.tensor(inputs.ids).shape[-1]
    claimed: set[int] = set()
    claimed |= _fold_prefix_mask_indices(c, inputs, seq)
    blocks: list[Block] = []
    embed = embeddings.find(cg, c.reference, inputs, seq)
    blocks.append(Block(embed.step, embed.ops, embed.arrays))
    claimed |= embed.ops
    attention_ops = set()
    for found in attention.find(cg, c.reference, seq, inputs.mask, claimed):
        blocks.append(Block(found.step, found.ops, found.arrays, found.shared))
        attention_ops |= found.ops
    for found in norms.find(cg, c.reference, claimed, skip_fuses):
        arrays = {}
        if found.gamma is not None:
            arrays["gamma"] = found.gamma
        if found.beta is not None:
            arrays["beta"] = found.beta
        blocks.append(Block(found.step, found.ops, arrays))
    blocks += _gelus(cg, c.reference, claimed)
    blocks += _linears(cg, claimed)
    sources = _token_sources(cg, inputs)
    for b in blocks:
        if isinstance(b.step, Attention):  # the merged context: one row per token
            merged = int(b.step.outputs[0][1:])
            sources[merged] = _first_axis_of(cg.tensor(merged).shape, seq)
    axes = token_axes(cg, seq, sources, attention_ops)
    blocks += _generic(c, inputs, claimed, axes)
    _check_everything_explained(c, blocks, claimed)
    program, aliases = _assemble(c, inputs, seq, blocks, axes, claimed)
    _require_dataflow(program, c)
    prove(program, c, {b.step.name: b.ops | b.shared for b in blocks}, aliases, inputs)
    set_row_extents(program)
    # after the proof, which holds each block to the graph's ops in one blocking: which CPU's
    # blocking the program then follows changes its float sums' order, not what it computes
    program.eigen_l1d = eigen_l1d
    return program


def _ort_skip_fusion(g: Graph, c: Canonical):
    """Whether onnxruntime fuses a residual Add into SkipLayerNormalization, as a function of the
    canonical add (None: wherever porter's own shapes are equal). onnxruntime folds the shape
    arithmetic of a graph whose inputs have fixed shapes before it fuses, so it knows every
    shape there; with dynamic axes it sees the file's shapes, symbolic dimensions and all, and
    its fusion conditions are decided on those (after the Linear biases it moves into the norm:
    skip_bias.py)."""
    dynamic = any(d < 0 for t in g.inputs.values() for d in g.tensor(t).shape)
    if c.reference != Reference.ONNXRUNTIME_CPU or not dynamic:
        return None
    seen = ort_shapes.value_shapes(c.source.path)
    biased: dict[int, int] = {}  # filled by fuse_skip_biases, after it has used skip_fuses

    def skip_fuses(add) -> bool:  # of a biased sum, the residual sum's shapes decide
        residual = c.graph.producer(biased[add.outputs[0]]) if add.outputs[0] in biased else add
        return ort_shapes.skip_layer_norm_fuses(c, residual, seen)

    biased.update(fuse_skip_biases(c, skip_fuses, seen))
    return skip_fuses


def _require_dataflow(program: EncoderProgram, c: Canonical) -> None:
    """Every buffer a step reads is computed before it: an op reading a graph input other than
    the ids and the mask as a value (or a tensor nothing computes) is refused naming it."""
    unwritten = program.first_unwritten_read()
    if unwritten is None:
        return
    step, name = unwritten
    what = c.graph.tensor(int(name[1:])).describe() if name[1:].isdigit() else name
    raise PorterError(f"{describe_op(c.source, step.source_ops[0])}: reads {what}, which porter's program does not "
                      "compute (porter feeds the token ids to the embeddings and the mask to attention only)")


def _fold_prefix_mask_indices(c: Canonical, inputs, seq: int) -> set[int]:
    """Gather indices computed from the mask input alone (sentence-transformers' CLS pooling
    finds the first kept token with argmax(mask)) that are the same for every window porter runs
    (live tokens first: masks 1..1 0..0 of every length) are constants; the gather then is a
    slice (porter.recover.canonical.gathers_as_slices). Returns the ops folded away."""
    g = c.graph
    folded: set[int] = set()
    if inputs.mask is None:
        return folded
    mask = g.tensor(inputs.mask)
    for op in g.ops:
        if op.type not in GATHERS or g.const(op.inputs[1]) is not None:
            continue
        index = op.inputs[1]
        path = probe.region(g, index)
        if probe.leaves(g, path) != {inputs.mask}:
            continue
        try:
            values = [probe.run(g, path, {inputs.mask: (np.arange(seq) < live).astype(mask.dtype).reshape(mask.shape)},
                                c.reference, keep={index})[index] for live in range(1, seq + 1)]
        except Unsupported:
            continue
        if any(not np.array_equal(v, values[0]) for v in values):
            continue
        g.tensors[index] = replace(g.tensor(index), data=values[0])
        folded |= set(path)
        for i in c.file_ops(path):
            c.explained.setdefault(i, "constant on every window porter runs (its live tokens come first)")
    if folded:
        g.__dict__.pop("producers", None)
        g.__dict__.pop("consumers", None)
        gathers_as_slices(None, g, g.ops, c.reference)
    return folded


def _first_axis_of(shape, seq: int) -> int:
    return next(a for a, d in enumerate(shape) if d != 1)


def _token_sources(g: Graph, inputs) -> dict[int, int]:
    sources = {inputs.ids: len(g.tensor(inputs.ids).shape) - 1}
    if inputs.mask is not None:
        sources[inputs.mask] = len(g.tensor(inputs.mask).shape) - 1
    return sources


def _gelus(g: Graph, ref: Reference, claimed: set[int]) -> list[Block]:
    blocks = []
    for op in g.ops:
        if op.index in claimed:
            continue
        if op.type == "gelu":
            approximate = op.options.get("approximate", False) in (True, "tanh")
            if ref == Reference.LITERT_BUILTIN:
                kind = Gelu.LITERT_TANH if approximate else Gelu.LITERT
            else:  # the Gelu op (opset 20, or com.microsoft's) runs the Gelu / FastGelu kernel
                kind = Gelu.ORT_FAST_GELU if approximate else Gelu.ORT_ERF_MUL
            blocks.append(Block(GeluStep("gelu", [f"t{op.inputs[0]}"], [f"t{op.outputs[0]}"], [], kind), {op.index}))
            claimed.add(op.index)
        elif ref == Reference.ONNXRUNTIME_CPU and op.type == "mul":
            for kind, m in ((Gelu.ORT_ERF_MUL, match(ONNX_FUSED_GELU, g, op.outputs[0])),
                            (Gelu.ORT_FAST_GELU, fast_gelu_at(g, op.outputs[0]))):
                if m is not None and not (m.consumed & claimed):
                    blocks.append(Block(GeluStep("gelu", [f"t{m['x']}"], [f"t{op.outputs[0]}"], [], kind),
                                        set(m.consumed)))
                    claimed |= m.consumed
                    break
    return blocks


def _stored_weight(g: Graph, o: dict):
    """A float Linear whose weight the file computes from narrower constants (weight-only int8,
    int4 or float16): those values in [out, in] order, their scales (int8, int4) and format, where
    widening them gives the Linear's float32 weight bit for bit (it does by construction unless a
    later fusion changed the weight, which keeps it float32); None for any other Linear. int4 is
    stored packed with one scale per row (a per-tensor scale repeated: the same products)."""
    stored = g.metadata.get("stored_forms", {}).get(o.get("weight_tensor"))
    if o["weights"] != WeightFormat.FLOAT32 or o["activation_quant"] != ActivationQuant.FLOAT \
            or stored is None or stored.dtype not in ("int8", "int4", "float16"):
        return None
    w, q = o["weight"], stored.quant
    scale = None if q is None else q.scale
    for values, out_axis in ((stored.data, 0), (stored.data.T, 1)):
        if values.shape != w.shape or not (q is None or scale.size == 1 or q.axis == out_axis):
            continue
        widened = quant.weight_only_float(values, scale)
        if not np.array_equal(widened.view(np.uint32), np.asarray(w, np.float32).view(np.uint32)):
            continue
        if stored.dtype == "int4":
            return np.ascontiguousarray(values), np.broadcast_to(scale, values.shape[:1]).copy(), \
                WeightFormat.INT4_PER_CHANNEL
        fmt = WeightFormat.FLOAT16 if q is None else \
            WeightFormat.INT8_PER_TENSOR if scale.size == 1 else WeightFormat.INT8_PER_CHANNEL
        return np.ascontiguousarray(values), scale, fmt
    return None


def _linears(g: Graph, claimed: set[int]) -> list[Block]:
    blocks = []
    for op in g.ops:
        if op.type != "linear" or op.index in claimed:
            continue
        o = op.options
        w = o["weight"]
        weights, scale = WeightFormat(o["weights"]), o.get("scale")
        stored = _stored_weight(g, o)
        if stored is not None:  # weight-only: model.bin holds the int8 / int4 / float16 values
            w, scale, weights = stored
        lin = Linear("linear", int(w.shape[1]), int(w.shape[0]), weights,
                     ActivationQuant(o["activation_quant"]), o.get("bias") is not None,
                     IntegerDot(o["integer_dot"]))
        arrays = {"weight": np.ascontiguousarray(w)}
        if scale is not None:
            arrays["scale"] = np.asarray(scale, np.float32).reshape(-1)
        if o.get("bias") is not None:
            arrays["bias"] = np.asarray(o["bias"], np.float32)
        step = LinearStep("linear", [f"t{op.inputs[0]}"], [f"t{op.outputs[0]}"], [], lin)
        blocks.append(Block(step, {op.index}, arrays))
        claimed.add(op.index)
    return blocks


def _generic(c: Canonical, inputs, claimed: set[int], axes: TokenAxes) -> list[Block]:
    """Every op no block took: views are aliases; elementwise ops, reductions and slices run as
    they are; anything else is refused by name."""
    g = c.graph
    aliases = _aliases(g, inputs, claimed)
    blocks = []
    made_by_tensor_steps: set[int] = set()
    for op in g.ops:
        if op.index in claimed:
            continue
        if op.type == "view" or (op.type == "cast" and op.options["to"] == "float32"
                                 and aliases.get(f"t{op.inputs[0]}") == INPUT_MASK):
            if op.inputs[0] in made_by_tensor_steps:
                made_by_tensor_steps.add(op.outputs[0])
            continue  # an alias of its input (the mask input is a float buffer already)
        name = op.type
        # what tensor steps compute is computed by tensor steps, each only where it is read
        downstream = any(t in made_by_tensor_steps for t in op.inputs)
        tensor = tensors.tensor_step(g, op, lambda t: _operand(g, t), _where(c, op), c.reference, downstream)
        if tensor is not None:  # matmuls, gathers, permutations, casts, integer work ...
            step = tensor
            made_by_tensor_steps.add(op.outputs[0])
        elif name in _GENERIC:
            operands = [_operand(g, t) for t in op.inputs]
            if (len(operands) == 1) != (Elementwise(name) in UNARY):
                raise PorterError(f"{_where(c, op)}: {name} with {len(operands)} operands")
            step = ElementwiseStep(name, [o.buffer for o in operands if o.buffer], [f"t{op.outputs[0]}"], [],
                                   Elementwise(name), operands, tuple(g.tensor(op.outputs[0]).shape))
        elif name in _REDUCE:
            rank = len(g.tensor(op.inputs[0]).shape)
            reduced = tuple(sorted(a % rank for a in (op.options.get("axes") or range(rank))))
            operand = _operand(g, op.inputs[0])
            real = tuple(a for a in reduced if operand.shape[a] != 1) or reduced
            if c.reference == Reference.ONNXRUNTIME_CPU and real == (rank - 1,) and operand.shape[-1] % 4 \
                    and _REDUCE[name] in (Reduce.SUM, Reduce.MEAN):
                raise PorterError(f"{_where(c, op)}: onnxruntime sums a last axis of {operand.shape[-1]} values "
                                  "(not a multiple of 4) in an order that depends on where each row starts "
                                  "in memory; porter does not reproduce it")
            step = ReduceStep(name, [operand.buffer], [f"t{op.outputs[0]}"], [], _REDUCE[name], operand, real)
        elif name == "slice":
            operand = _operand(g, op.inputs[0])
            shape = operand.shape
            slices = tuple((int(a), *slice(s, e, st).indices(shape[a])) for a, s, e, st in op.options["slices"])
            step = SliceStep(name, [operand.buffer], [f"t{op.outputs[0]}"], [], operand, slices)
        elif name == "l2_normalization":
            operand = _operand(g, op.inputs[0])
            step = L2NormalizeStep(name, [operand.buffer], [f"t{op.outputs[0]}"], [], operand)
        else:
            raise PorterError(f"{_where(c, op)} is not part of any block porter knows and cannot run on "
                              "its own (porter runs elementwise ops, reductions, slices, L2 normalisations and "
                              "the tensor ops of porter.ir.tensor as steps)")
        blocks.append(Block(step, {op.index}))
        claimed.add(op.index)
    return blocks


def _operand(g: Graph, t: int) -> Operand:
    shape = tuple(g.tensor(t).shape)
    if g.const(t) is not None:
        return Operand(None, f"t{t}", shape)
    return Operand(f"t{t}", None, shape)


def _where(c: Canonical, op) -> str:
    return f"{c.describe(op.index)} (canonical {op.type})"


def _check_everything_explained(c: Canonical, blocks: list[Block], claimed: set[int]) -> None:
    in_steps = {i for b in blocks for i in c.file_ops(b.ops)}
    views = {i for op in c.graph.ops if op.index not in claimed for i in c.origin[op.index]}
    leftover = [i for i in range(len(c.source.ops)) if i not in in_steps and i not in c.explained
                and i not in views]
    if leftover:
        raise PorterError("ops not explained by any step: " + "; ".join(
            describe_op(c.source, i) for i in leftover[:6]) + (" ..." if len(leftover) > 6 else ""))


def _assemble(c: Canonical, inputs, seq: int, blocks: list[Block], axes: TokenAxes,
              claimed: set[int]) -> EncoderProgram:
    g = c.graph
    aliases = _aliases(g, inputs, claimed)
    blocks.sort(key=lambda b: max(_producer_index(g, t) for t in b.step.outputs))
    weights, steps, buffers = {}, [], {}
    counts: dict[str, int] = {}
    for block in blocks:
        step = block.step
        kind = step.op.value if isinstance(step, TensorStep) else type(step).__name__
        n = counts.get(kind, 0)
        counts[kind] = n + 1
        step.name = _step_name(step, n)
        step.source_ops = c.file_ops(block.ops)
        step.inputs = [aliases.get(t, t) for t in step.inputs]
        for operand in getattr(step, "operands", []) or ([step.operand] if hasattr(step, "operand") else []):
            if operand.buffer:
                operand.buffer = aliases.get(operand.buffer, operand.buffer)
            if operand.array:
                value = g.const(int(operand.array[1:]))
                weights[f"{step.name}.{operand.array}"] = tensors.stored(value, f"{_where(c, g.producer(int(step.outputs[0][1:])))}") \
                    if isinstance(step, TensorStep) else np.asarray(value, np.float32)
                operand.array = f"{step.name}.{operand.array}"
        if isinstance(step, LinearStep):
            step.linear.name = step.name
        if isinstance(step, Attention):
            step.terms = [replace(t, array=f"{step.name}.{t.array}") if t.array
                          else replace(t, buffer=aliases.get(t.buffer, t.buffer)) for t in step.terms]
        if isinstance(step, Attention) and step.mask != MaskMode.NONE:
            step.inputs.append(INPUT_MASK)
        for key, value in block.arrays.items():
            weights[key if key.startswith("embed.") else f"{step.name}.{key}"] = value
        for out in step.outputs:
            t = int(out[1:])
            shape = g.tensor(t).shape
            size = int(np.prod(shape))
            tokens = axes.token_major(g, t) and size % seq == 0
            dtype = g.tensor(t).dtype if isinstance(step, TensorStep) else "float32"
            buffers[out] = Buffer(seq if tokens else 1, size // seq if tokens else size, tokens, dtype=dtype)
        steps.append(step)
    buffers[INPUT_MASK] = Buffer(seq, 1, True)  # the mask as floats (ones without a mask input)
    output_name, out_t = next(iter(g.outputs.items()))
    output_buffer = aliases.get(f"t{out_t}", f"t{out_t}")
    _drop_unread_outputs(steps, output_buffer, buffers)
    program = EncoderProgram(
        source=c.source.path, format=c.source.format, reference=c.reference, seq=seq,
        vocab=int(weights["embed.word.table"].shape[0]),
        ids_input=_input_name(g, inputs.ids), mask_input=_input_name(g, inputs.mask) if inputs.mask is not None else None,
        types_input=_input_name(g, inputs.token_types) if inputs.token_types is not None else None,
        output=output_name, output_buffer=output_buffer, buffers=buffers, steps=steps, weights=weights,
        ort_cpu=c.ort_cpu.name if c.ort_cpu else None)
    return program, aliases


def _eigen_l1d_of(g: Graph, choice: str | int) -> int | None:
    """The L1 data cache size of a TFLite graph's reference CPU; none for ONNX graphs, whose
    CPU is the ort_cpu target."""
    if g.format != "tflite":
        if choice != ort_cpus.AUTO:
            raise PorterError(f"--l1d {choice}: the L1 cache size sets LiteRT's float blocking; an {g.format} "
                              "graph's CPU is --ort-cpu")
        return None
    if choice == ort_cpus.AUTO:
        return LF.host_l1d_bytes()
    try:
        return choice if isinstance(choice, int) else LF.parse_cache_size(str(choice))
    except ValueError as e:
        raise PorterError(f"--l1d {choice}: {e}") from None


def _ort_cpu_of(g: Graph, choice: str) -> ort_cpus.OrtCpu | None:
    """The onnxruntime target of an ONNX graph; none for LiteRT's kernels, which pick no kernels
    by CPU (their one CPU-dependent choice is the L1 size, --l1d)."""
    if g.format == "onnx":
        return ort_cpus.resolve(choice)
    if choice != ort_cpus.AUTO:
        raise PorterError(f"--ort-cpu {choice}: a {g.format} graph runs LiteRT's builtin kernels, which pick "
                          f"no kernels by CPU (its float blocking is --l1d); the target is for ONNX graphs (onnxruntime)")
    return None


def _drop_unread_outputs(steps: list[Step], output: str, buffers: dict) -> None:
    """A LayerNorm's pre-affine rows are written only where a later step reads them."""
    read = {output} | {t for s in steps for t in s.inputs}
    for step in steps:
        if isinstance(step, LayerNorm) and len(step.outputs) == 2 and step.outputs[1] not in read:
            buffers.pop(step.outputs.pop())


def _aliases(g: Graph, inputs, claimed: set[int]) -> dict[str, str]:
    """Tensor name -> the buffer it is a view of: views no block took, and the mask input seen
    as floats (a cast of it, or of a view of it, to float32: the mask buffer holds 0.0 / 1.0),
    even where attention took that cast too: a mean pooling reads the same floats."""
    alias: dict[str, str] = {}
    if inputs.mask is not None:
        alias[f"t{inputs.mask}"] = INPUT_MASK
    for op in g.ops:
        source = alias.get(f"t{op.inputs[0]}", f"t{op.inputs[0]}") if op.inputs else None
        of_mask = source == INPUT_MASK and (op.type == "view" or _is_mask_cast(op, source))
        if of_mask or (op.type == "view" and op.index not in claimed):
            alias[f"t{op.outputs[0]}"] = source
    return alias


def _is_mask_cast(op, source: str | None) -> bool:
    return op.type == "cast" and op.options["to"] == "float32" and source == INPUT_MASK


def _producer_index(g: Graph, buffer: str) -> int:
    op = g.producer(int(buffer[1:]))
    return op.index if op is not None else -1


def _step_name(step: Step, n: int) -> str:
    base = {"Embed": "embed", "LinearStep": "linear", "LayerNorm": "ln", "Attention": "attention",
            "GeluStep": "gelu", "ElementwiseStep": "op", "ReduceStep": "reduce", "SliceStep": "slice",
            "L2NormalizeStep": "l2norm"}
    return f"{step.op.value if isinstance(step, TensorStep) else base[type(step).__name__]}{n}"


def _input_name(g: Graph, t: int) -> str:
    for name, index in g.inputs.items():
        if index == t:
            return name
    raise PorterError(f"tensor {t} is not a graph input")
