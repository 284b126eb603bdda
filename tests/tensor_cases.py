"""Cases of the tensor steps (porter.ir.tensor) for the kernel check crate's `tensor-cases`, and
their numpy results (porter.reference.execute.tensor_step): random operands of every dtype a
kernel takes, the kernel's parameters as the crate's codegen writes them
(porter.codegen.tensor.kernel_spec), a box of the output where the step may compute part of it."""

from __future__ import annotations

import struct

import numpy as np

from porter.codegen.tensor import DTYPES, kernel_spec
from porter.errors import PorterError
from porter.ir.encoder import Operand, Reference
from porter.ir.tensor import TensorOp, TensorStep
from porter.reference import execute

NUMPY = {"float32": np.float32, "int32": np.int32, "int64": np.int64, "bool": np.bool_}


class Case:
    def __init__(self, op: TensorOp, operands: list[np.ndarray], shape, dtype: str, attrs: dict | None = None,
                 counts=None, ref: Reference = Reference.LITERT_BUILTIN):
        self.inputs = [np.ascontiguousarray(x) for x in operands]
        dtypes = tuple(str(x.dtype) for x in self.inputs)
        self.step = TensorStep(op.value, [], ["t0"], [], op, [Operand(f"t{i + 1}", None, x.shape) for i, x in enumerate(self.inputs)],
                               tuple(shape), dtype, {**(attrs or {}), "in_dtypes": dtypes})
        self.counts = tuple(counts) if counts is not None else tuple(shape)
        self.ref = ref

    def expected(self) -> np.ndarray:
        """numpy's output, zero outside the box."""
        out = execute.tensor_step(self.step, self.inputs, self.ref)
        boxed = np.zeros(self.step.shape, out.dtype)
        box = tuple(slice(c) for c in self.counts)
        boxed[box] = out[box]
        return boxed

    def encode(self) -> bytes:
        kind, fields = kernel_spec(self.step, self.ref)
        shapes = [_four(x.shape) for x in self.inputs]
        header = " ".join([
            f"{kind}:" + ",".join(f"{k}={_field(v)}" for k, v in fields.items()),
            f"out={DTYPES[self.step.dtype]}:{','.join(map(str, _four(self.step.shape)))}",
            f"counts={','.join(map(str, _four(self.counts, fill=1)))}",
            "operands=" + ";".join(f"{DTYPES[str(x.dtype)]}:{','.join(map(str, s))}" for x, s in zip(self.inputs, shapes)),
        ]).encode()
        data = np.concatenate([as_words(x) for x in self.inputs]) if self.inputs else np.zeros(0, np.uint32)
        return struct.pack("<I", len(header)) + header + struct.pack("<I", data.size) + data.astype("<u4").tobytes()

    def decode(self, out_words: np.ndarray) -> np.ndarray:
        return from_words(out_words, self.step.dtype).reshape(self.step.shape)


def _four(shape, fill: int = 1) -> list[int]:
    return [fill] * (4 - len(shape)) + list(shape)


def _field(v) -> str:
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, float):
        return f"b{int(np.float32(v).view(np.uint32))}"
    if isinstance(v, list):
        return ".".join(map(str, v))
    return str(v)


def as_words(x: np.ndarray) -> np.ndarray:
    """A tensor's values as the crate's slots hold them: 32-bit words, int64 as (low, high)."""
    x = np.ascontiguousarray(x).reshape(-1)
    if x.dtype == np.int64:
        return x.view(np.uint32)
    if x.dtype == np.bool_:
        return x.astype(np.uint32)
    if x.dtype.itemsize == 1:  # 8-bit rows: an int32 word each
        return x.astype(np.int32).view(np.uint32)
    return x.view(np.uint32)


def from_words(w: np.ndarray, dtype: str) -> np.ndarray:
    w = np.ascontiguousarray(w, np.uint32)
    if dtype == "int64":
        return w.view(np.int64)
    if dtype == "bool":
        return w != 0
    if dtype in ("uint8", "int8"):
        return w.view(np.int32).astype(dtype)
    return w.view(NUMPY[dtype])


def run_cases(wasm_runtime, wasm, cases: list[Case]) -> list[np.ndarray] | str:
    """Every case through the crate's `tensor-cases`, its outputs decoded (or why the run failed)."""
    try:
        result = wasm_runtime.run_command(wasm, ["tensor-cases"], b"".join(c.encode() for c in cases), timeout_s=600)
    except PorterError as trap:  # a panic: an index out of range, a division by zero
        return str(trap)[-2000:]
    if result.exit_code != 0:
        return result.stderr.decode()[-2000:]
    out, at, decoded = result.stdout, 0, []
    for case in cases:
        (n,) = struct.unpack_from("<I", out, at)
        decoded.append(case.decode(np.frombuffer(out, "<u4", count=n, offset=at + 4)))
        at += 4 + 4 * n
    return decoded


def mismatches(wasm_runtime, wasm, cases: list[Case]) -> list[str]:
    bad, results = [], run_cases(wasm_runtime, wasm, cases)
    if isinstance(results, str):
        return [f"the module failed: {results}"]
    for case, ours in zip(cases, results):
        theirs = case.expected()
        if theirs.dtype.kind == "f":
            same = (ours.view(np.uint32) == theirs.view(np.uint32)) | (np.isnan(ours) & np.isnan(theirs))
        else:
            same = ours == theirs
        if not same.all():
            bad.append(f"{case.step.op.value} {case.step.attrs} {case.step.dtype}{list(case.step.shape)}: "
                       f"{np.count_nonzero(~same)} values differ, first {ours[~same][:3]} vs {theirs[~same][:3]}")
    return bad


# ---- the cases ---------------------------------------------------------------------------------

FLOAT_SPECIALS = np.array([0.0, -0.0, 0.5, -0.5, 1.0, -1.0, 2.5, -2.5, 1e-40, -1e-40, 3e9, -3e9, 2.1e9, 9.3e18,
                           -9.3e18, np.inf, -np.inf, np.nan], np.float32)


def floats(rng, shape, specials: bool = False) -> np.ndarray:
    x = (rng.standard_normal(shape) * np.exp2(rng.integers(-8, 9, shape))).astype(np.float32)
    if specials and x.size:
        flat = x.reshape(-1)
        flat[: min(flat.size, FLOAT_SPECIALS.size)] = FLOAT_SPECIALS[: flat.size]
    return x


def ints(rng, shape, dtype, low=-50, high=50) -> np.ndarray:
    x = rng.integers(low, high, shape).astype(dtype)
    flat = x.reshape(-1)
    if flat.size > 3 and high - low > 1000:
        info = np.iinfo(dtype)
        flat[:3] = [info.min, info.max, 0]
    return x


def _shape(rng, rank: int) -> tuple[int, ...]:
    return tuple(int(d) for d in rng.integers(1, 7, rank))


def _box(rng, shape, limited: bool):
    """A box of the output: whole, or a prefix along some axes."""
    if not limited:
        return shape
    return tuple(int(rng.integers(1, d + 1)) if rng.random() < 0.5 else d for d in shape)


def pointwise_cases(rng, ref: Reference) -> list[Case]:
    cases = []
    arithmetic = [TensorOp.ADD, TensorOp.SUB, TensorOp.MUL, TensorOp.DIV, TensorOp.MAXIMUM, TensorOp.MINIMUM]
    comparisons = [TensorOp.EQUAL, TensorOp.NOT_EQUAL, TensorOp.LESS, TensorOp.LESS_EQUAL, TensorOp.GREATER,
                   TensorOp.GREATER_EQUAL]
    for trial in range(6):
        shape = _shape(rng, 4)
        small = tuple(1 if rng.random() < 0.4 else d for d in shape)  # broadcast along some axes
        for dtype in ("float32", "int32", "int64"):
            make = (lambda s: floats(rng, s, specials=True)) if dtype == "float32" else \
                (lambda s: ints(rng, s, dtype, -2 ** 40 if dtype == "int64" else -2 ** 20, 2 ** 20))
            a, b = make(shape), make(small)
            if dtype != "float32":
                b[b == 0] = 3  # an integer division by zero is its own test
            for op in arithmetic + comparisons:
                out = "bool" if op in comparisons else dtype
                cases.append(Case(op, [a, b], shape, out, counts=_box(rng, shape, trial % 2 == 1), ref=ref))
            for op in (TensorOp.NEG, TensorOp.ABS, TensorOp.SIGN) + ((TensorOp.CEIL, TensorOp.FLOOR) if dtype == "float32" else ()):
                cases.append(Case(op, [a], shape, dtype, ref=ref))
        mixed = [floats(rng, shape), ints(rng, small, "int32")]  # a float operand makes it float work
        cases.append(Case(TensorOp.MUL, mixed, shape, "float32", ref=ref))
        cond = rng.random(small) < 0.5
        for dtype in ("float32", "int64"):
            x = floats(rng, shape) if dtype == "float32" else ints(rng, shape, dtype)
            y = floats(rng, small) if dtype == "float32" else ints(rng, small, dtype)
            cases.append(Case(TensorOp.WHERE, [cond, x, y], shape, dtype, counts=_box(rng, shape, True), ref=ref))
        p, q = rng.random(shape) < 0.5, rng.random(small) < 0.5
        for op in (TensorOp.LOGICAL_AND, TensorOp.LOGICAL_OR):
            cases.append(Case(op, [p, q], shape, "bool", ref=ref))
        cases.append(Case(TensorOp.LOGICAL_NOT, [p], shape, "bool", ref=ref))
    return cases + cast_cases(rng, ref)


def cast_cases(rng, ref: Reference) -> list[Case]:
    cases = []
    x = floats(rng, (3, 40), specials=True)
    x[1] *= 1e9
    for to in ("int32", "int64", "bool", "float32"):
        cases.append(Case(TensorOp.CAST, [x], x.shape, to, ref=ref))
    for source in ("int32", "int64"):
        i = ints(rng, (3, 40), source, -2 ** 30, 2 ** 30)
        i.reshape(-1)[:2] = [2 ** 24 + 1, -(2 ** 24 + 3)]  # float32 rounds these
        for to in ("int32", "int64", "bool", "float32"):
            cases.append(Case(TensorOp.CAST, [i], i.shape, to, ref=ref))
    b = rng.random((2, 9)) < 0.5
    for to in ("int32", "int64", "float32"):
        cases.append(Case(TensorOp.CAST, [b], b.shape, to, ref=ref))
    return cases


def log_cases(x: np.ndarray, ref: Reference = Reference.LITERT_BUILTIN, size: int = 4096) -> list[Case]:
    """LOG on these float32 values, `size` to a case: LiteRT's (glibc's logf), or onnxruntime's
    (Eigen's plog in packets of four, logf on a case's last size % 4)."""
    return [Case(TensorOp.LOG, [x[i:i + size]], x[i:i + size].shape, "float32", ref=ref) for i in range(0, x.size, size)]


def matmul_cases(rng, ref: Reference) -> list[Case]:
    cases = []
    for trial in range(24):
        batch = (int(rng.integers(1, 3)), int(rng.integers(1, 4)))
        m, k, n = (int(v) for v in rng.integers(1, 40, 3))
        if ref == Reference.ONNXRUNTIME_CPU:
            m = max(m, 2)  # one row takes MLAS's M = 1 kernel, which recovery refuses
            k = int(rng.choice([3, 16, 64, 200, 300]))  # one SGEMM block, and several
        adj_b = ref == Reference.LITERT_BUILTIN and trial % 2 == 1
        b_batch = batch if trial % 3 else (1, 1)  # a constant B, the same for every batch
        a = floats(rng, batch + (m, k))
        b = floats(rng, b_batch + ((n, k) if adj_b else (k, n)))
        shape = batch + (m, n)
        alpha = float(np.float32(0.25)) if ref == Reference.ONNXRUNTIME_CPU and trial % 4 == 0 else 1.0
        cases.append(Case(TensorOp.MATMUL, [a, b], shape, "float32", {"adj_b": adj_b, "alpha": alpha},
                          counts=_box(rng, shape, trial % 2 == 0), ref=ref))
    return cases


def move_cases(rng, ref: Reference) -> list[Case]:
    cases = []
    for rank in (2, 3, 4):
        for _ in range(4):
            shape = _shape(rng, rank)
            perm = tuple(int(p) for p in rng.permutation(rank))
            x = floats(rng, shape) if rng.random() < 0.7 else ints(rng, shape, "int64")
            out = tuple(shape[p] for p in perm)
            cases.append(Case(TensorOp.MOVE, [x], out, str(x.dtype), {"perm": perm}, counts=_box(rng, out, True), ref=ref))
    x = floats(rng, (1, 5, 1))  # an expand: the operand's own axes, broadcast
    cases.append(Case(TensorOp.MOVE, [x], (3, 4, 5, 6), "float32", {"perm": (0, 1, 2)}, counts=(2, 4, 3, 6), ref=ref))
    return cases


def gather_cases(rng, ref: Reference) -> list[Case]:
    low = -1 if ref == Reference.ONNXRUNTIME_CPU else 0  # onnxruntime counts a negative index from the end
    cases = []
    for trial in range(12):
        shape = _shape(rng, 3 + trial % 2)
        axis = int(rng.integers(0, len(shape)))
        out = tuple(int(rng.integers(1, 6)) if a == axis else d for a, d in enumerate(shape))
        index = rng.integers(low * shape[axis], shape[axis], out)
        compact = index[:1] if out[0] > 1 and rng.random() < 0.5 else index  # the same for every head
        if compact is not index:
            index = np.broadcast_to(compact, out)
        data = floats(rng, shape) if rng.random() < 0.7 else ints(rng, shape, "int32")
        index_dtype = np.int32 if trial % 3 else np.int64  # int32: constant indices (the crate's fast path)
        cases.append(Case(TensorOp.GATHER_ELEMENTS, [data, compact.astype(index_dtype)], out, str(data.dtype), {"axis": axis},
                          counts=_box(rng, out, True), ref=ref))
        table = floats(rng, (7, 4))
        idx = rng.integers(low * 7, 7, _shape(rng, 2))
        cases.append(Case(TensorOp.GATHER, [table, idx.astype(np.int32)], idx.shape + (4,), "float32", {"axis": 0}, ref=ref))
        data = floats(rng, (3, 5, 4))
        depth = int(rng.integers(1, 3))
        nd = np.stack([rng.integers(low * d, d, (2, 3)) for d in data.shape[:depth]], -1)
        cases.append(Case(TensorOp.GATHER_ND, [data, nd.astype(np.int64)], (2, 3) + data.shape[depth:], "float32", ref=ref))
    return cases


def quantised_table_cases(rng, ref: Reference) -> list[Case]:
    """Rows of a quantised table: EMBEDDING_LOOKUP of float and int8 rows (times each row's scale),
    uint8 rows gathered and moved, then dequantised."""
    cases = []
    for trial in range(4):
        ids = rng.integers(0, 9, (3, 5)).astype(np.int32 if trial % 2 else np.int64)
        table = floats(rng, (9, 4))
        cases.append(Case(TensorOp.LOOKUP, [table, ids], (3, 5, 4), "float32", counts=(2, 5, 4), ref=ref))
        q = rng.integers(-127, 128, (9, 4)).astype(np.int8)
        scales = np.exp2(rng.integers(-9, 1, 9)).astype(np.float32) * np.float32(1.37)
        cases.append(Case(TensorOp.LOOKUP, [q, ids, scales], (3, 5, 4), "float32", ref=ref))
        u = rng.integers(0, 256, (9, 4)).astype(np.uint8)
        gathered = np.take(u, rng.integers(0, 9, (2, 6)), axis=0)
        cases.append(Case(TensorOp.GATHER, [u, rng.integers(0, 9, (2, 6)).astype(np.int64)], (2, 6, 4), "uint8",
                          {"axis": 0}, ref=ref))
        cases.append(Case(TensorOp.MOVE, [gathered], (4, 2, 6), "uint8", {"perm": (2, 0, 1)}, ref=ref))
        cases.append(Case(TensorOp.DEQUANTIZE, [gathered], gathered.shape, "float32",
                          {"scale": float(np.float32(0.0123)), "zero_point": int(rng.integers(0, 256))}, ref=ref))
    return cases


def cumsum_cases(rng, ref: Reference) -> list[Case]:
    cases = []
    for _ in range(6):
        shape = _shape(rng, 3)
        x = ints(rng, shape, "int64" if rng.random() < 0.5 else "int32")
        axis = int(rng.integers(0, 3))
        for exclusive in (False, True):
            for reverse in (False, True):
                counts = shape if reverse else _box(rng, shape, True)
                cases.append(Case(TensorOp.CUMSUM, [x], shape, str(x.dtype),
                                  {"axis": axis, "exclusive": exclusive, "reverse": reverse}, counts=counts, ref=ref))
    return cases


def every_case(rng, ref: Reference) -> list[Case]:
    return (pointwise_cases(rng, ref) + matmul_cases(rng, ref) + move_cases(rng, ref) + gather_cases(rng, ref)
            + quantised_table_cases(rng, ref) + cumsum_cases(rng, ref))

