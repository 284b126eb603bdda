"""The TFLite and ONNX frontends on the real fixtures, and on real fixtures cut or patched into
hostile files: each must be refused through the CLI with one `porter: error:` line naming the
tensor, op or byte range, before anything else reads the file."""

import struct

import flatbuffers
import numpy as np
import onnx
import pytest
import tflite
from fixtures import (
    MINILM_LITERT_DQ8,
    MINILM_TF_DQ8,
    ONNX_DQ8PC,
    ONNX_FIXTURES,
    TFLITE_FIXTURES,
    assert_one_line_error,
    fixture_id,
    require,
    run_porter,
    spec,
)

from porter.frontends import load_graph
from porter.frontends.tflite import load_tflite

TINY_LITERT_DQ8 = spec.TINY.path("litert-dq8.tflite")

# Table slots (byte offsets into the vtable) of the fields the tests patch, from TFLite's schema.
BUFFER_OFFSET_SLOT = 6
BUFFER_SIZE_SLOT = 8
TENSOR_SHAPE_SLOT = 4
TENSOR_BUFFER_SLOT = 8
OPERATOR_OPCODE_INDEX_SLOT = 4
OPERATOR_INPUTS_SLOT = 6


# Real fixtures ---------------------------------------------------------------------------------


def test_litert_fixture_has_37_hybrid_fully_connected_and_external_buffers():
    graph = load_tflite(require(MINILM_LITERT_DQ8))
    fcs = [op for op in graph.ops if op.type == "FULLY_CONNECTED"]
    assert len(fcs) == 37
    assert all(op.version == 5 and op.options["asymmetric_quantize_inputs"] is False for op in fcs)
    for op in fcs:
        weight = graph.tensor(op.inputs[1])
        assert weight.dtype == "int8" and weight.quant.axis == 0
        assert weight.quant.scale.size == weight.shape[0]
        assert not weight.quant.zero_point.any()
    external = [s for s in graph.metadata["buffers"] if s is not None and s.kind == "external"]
    assert external
    assert all(s.offset >= 2 and s.offset + s.size <= graph.metadata["file_size"] for s in external)
    assert set(graph.inputs) == {"input_ids", "attention_mask"}
    assert graph.tensor(graph.outputs["logits"]).shape == (1, spec.MINILM.seq, spec.MINILM.labels)


def test_tf_fixture_quantises_fully_connected_inputs_asymmetrically():
    graph = load_tflite(require(MINILM_TF_DQ8))
    int8_fcs = [op for op in graph.ops if op.type == "FULLY_CONNECTED" and graph.tensor(op.inputs[1]).dtype == "int8"]
    assert len(int8_fcs) == 37
    assert all(op.options["asymmetric_quantize_inputs"] is True and op.version == 12 for op in int8_fcs)
    (gather,) = [op for op in graph.ops if op.type == "GATHER"]
    table = graph.tensor(gather.inputs[0])
    assert table.dtype == "int8" and table.quant is not None and table.quant.axis is None


@pytest.mark.parametrize("path", TFLITE_FIXTURES, ids=fixture_id)
def test_tflite_constants_and_quantisation_match_litert(path):
    graph = load_tflite(require(path))  # validated first: only then may LiteRT open it
    from ai_edge_litert.interpreter import Interpreter

    interpreter = Interpreter(model_path=str(path))
    details = {d["index"]: d for d in interpreter.get_tensor_details()}
    constants = [t for t in graph.tensors if t.is_const and t.data.size]
    assert constants
    for t in constants:
        expected = interpreter.get_tensor(t.index)
        assert expected.dtype == t.data.dtype and np.array_equal(expected, t.data), t.describe()
        if t.quant is not None:
            q = details[t.index]["quantization_parameters"]
            np.testing.assert_array_equal(q["scales"], t.quant.scale)
            np.testing.assert_array_equal(q["zero_points"], t.quant.zero_point)
            assert q["quantized_dimension"] == (t.quant.axis or 0)


@pytest.mark.parametrize("path", ONNX_FIXTURES, ids=fixture_id)
def test_onnx_fixture_loads_with_every_initializer(path):
    graph = load_graph(require(path))
    model = onnx.load(str(path))
    by_name = {t.name: t for t in graph.tensors}
    for init in model.graph.initializer:
        np.testing.assert_array_equal(by_name[init.name].data, onnx.numpy_helper.to_array(init))
    assert graph.metadata["opsets"][""] >= 13
    for name, t in graph.inputs.items():
        assert graph.tensor(t).shape and graph.tensor(t).dtype == "int64", name
    assert graph.op_histogram()


@pytest.mark.parametrize("path", ONNX_DQ8PC, ids=fixture_id)
def test_onnx_matmul_integer_weights_are_per_output_column(path):
    graph = load_graph(require(path))
    matmuls = [op for op in graph.ops if op.type == "MatMulInteger"]
    assert matmuls
    for op in matmuls:
        weight = graph.tensor(op.inputs[1])
        assert weight.dtype == "int8" and weight.quant is not None, weight.describe()
        assert weight.quant.axis == 1 and weight.quant.scale.size == weight.shape[1]


# Hostile TFLite files: cut or patched copies of the real litert-torch fixture ----------------------


def _copy_bytes(path) -> bytearray:
    return bytearray(require(path).read_bytes())


def _write(tmp_path, data: bytes, name: str = "hostile.tflite"):
    out = tmp_path / name
    out.write_bytes(bytes(data))
    return out


def _field_position(table, slot: int) -> int:
    """Where a scalar field of a flatbuffer table lies in the file (the field must be present)."""
    relative = table._tab.Offset(slot)
    assert relative, f"field at slot {slot} is not stored"
    return table._tab.Pos + relative


def _external_buffers(data: bytes):
    model = tflite.Model.GetRootAs(bytes(data), 0)
    buffers = [(b, model.Buffers(b)) for b in range(model.BuffersLength())]
    return [(b, buf) for b, buf in buffers if buf.Offset() > 1]


def _tensor_using(data: bytes, buffer_index: int) -> int:
    subgraph = tflite.Model.GetRootAs(bytes(data), 0).Subgraphs(0)
    return next(i for i in range(subgraph.TensorsLength()) if subgraph.Tensors(i).Buffer() == buffer_index)


def _first_fully_connected(data: bytes):
    model = tflite.Model.GetRootAs(bytes(data), 0)
    subgraph = model.Subgraphs(0)
    for k in range(subgraph.OperatorsLength()):
        op = subgraph.Operators(k)
        code = model.OperatorCodes(op.OpcodeIndex())
        if max(code.BuiltinCode(), code.DeprecatedBuiltinCode()) == tflite.BuiltinOperator.FULLY_CONNECTED:
            return k, op
    raise AssertionError("no FULLY_CONNECTED op")


@pytest.mark.parametrize("keep", [6, 64], ids=["inside-header", "inside-tables"])
def test_truncated_flatbuffer_is_refused(tmp_path, keep):
    data = _copy_bytes(MINILM_LITERT_DQ8)[:keep]
    assert_one_line_error(run_porter("inspect", _write(tmp_path, data)), "hostile.tflite", "flatbuffer")


def test_external_buffer_past_end_of_file_is_refused(tmp_path):
    data = _copy_bytes(MINILM_LITERT_DQ8)
    external = [(b, buf.Offset(), buf.Size()) for b, buf in _external_buffers(data)]
    cut = (min(off for _, off, _ in external) + max(off + size for _, off, size in external)) // 2
    b, offset, size = next(e for e in external if e[1] + e[2] > cut)
    tensor = _tensor_using(data, b)
    result = run_porter("inspect", _write(tmp_path, data[:cut]))
    assert_one_line_error(
        result, f"tensor {tensor} '", f"external buffer {b} (offset {offset}, size {size}, file size {cut})", "past the end of the file"
    )


def test_external_offset_wrapping_past_2_64_is_refused(tmp_path):
    data = _copy_bytes(MINILM_LITERT_DQ8)
    b, buffer = _external_buffers(data)[0]
    size = buffer.Size()
    wrapping = 2**64 - size // 2
    struct.pack_into("<Q", data, _field_position(buffer, BUFFER_OFFSET_SLOT), wrapping)
    result = run_porter("inspect", _write(tmp_path, data))
    assert_one_line_error(result, f"external buffer {b} (offset {wrapping}, size {size}", "wraps past 2^64")


def test_buffer_size_not_matching_shape_is_refused(tmp_path):
    data = _copy_bytes(MINILM_LITERT_DQ8)
    b, buffer = _external_buffers(data)[0]
    size = buffer.Size()
    struct.pack_into("<Q", data, _field_position(buffer, BUFFER_SIZE_SLOT), size - 1)
    tensor = _tensor_using(data, b)
    result = run_porter("inspect", _write(tmp_path, data))
    assert_one_line_error(result, f"tensor {tensor} '", f"buffer {b} holds {size - 1} bytes", f"needs {size}")


def test_zero_length_constant_weight_is_refused(tmp_path):
    data = _copy_bytes(MINILM_LITERT_DQ8)
    k, op = _first_fully_connected(data)
    weight = int(op.InputsAsNumpy()[1])
    tensor = tflite.Model.GetRootAs(bytes(data), 0).Subgraphs(0).Tensors(weight)
    struct.pack_into("<I", data, _field_position(tensor, TENSOR_BUFFER_SLOT), 0)  # buffer 0 is empty
    result = run_porter("inspect", _write(tmp_path, data))
    assert_one_line_error(result, f"tensor {weight} '", f"op {k} FULLY_CONNECTED", "has no data and no producer")


def test_empty_shaped_constant_weight_is_refused(tmp_path):
    data = _copy_bytes(MINILM_LITERT_DQ8)
    k, op = _first_fully_connected(data)
    weight = int(op.InputsAsNumpy()[1])
    tensor = tflite.Model.GetRootAs(bytes(data), 0).Subgraphs(0).Tensors(weight)
    dims = tensor._tab.Vector(tensor._tab.Offset(TENSOR_SHAPE_SLOT))
    struct.pack_into("<i", data, dims + 4, 0)  # shape [out, 0]: no elements, no bytes
    struct.pack_into("<I", data, _field_position(tensor, TENSOR_BUFFER_SLOT), 0)
    result = run_porter("inspect", _write(tmp_path, data))
    assert_one_line_error(result, f"tensor {weight} '", f"op {k} FULLY_CONNECTED", "zero-length constant weight")


def test_buffer_index_out_of_range_is_refused(tmp_path):
    data = _copy_bytes(MINILM_LITERT_DQ8)
    b, _ = _external_buffers(data)[0]
    t = _tensor_using(data, b)
    tensor = tflite.Model.GetRootAs(bytes(data), 0).Subgraphs(0).Tensors(t)
    struct.pack_into("<I", data, _field_position(tensor, TENSOR_BUFFER_SLOT), 1_000_000)
    result = run_porter("inspect", _write(tmp_path, data))
    assert_one_line_error(result, f"tensor {t} '", "refers to buffer 1000000")


def test_operator_tensor_index_out_of_range_is_refused(tmp_path):
    data = _copy_bytes(MINILM_LITERT_DQ8)
    k, op = _first_fully_connected(data)
    first_input = op._tab.Vector(op._tab.Offset(OPERATOR_INPUTS_SLOT))
    struct.pack_into("<i", data, first_input, 99_999)
    result = run_porter("inspect", _write(tmp_path, data))
    assert_one_line_error(result, f"op {k} (FULLY_CONNECTED): input 0 is tensor index 99999, out of range")


def test_opcode_index_out_of_range_is_refused(tmp_path):
    data = _copy_bytes(MINILM_LITERT_DQ8)
    subgraph = tflite.Model.GetRootAs(bytes(data), 0).Subgraphs(0)
    k = next(k for k in range(subgraph.OperatorsLength()) if subgraph.Operators(k).OpcodeIndex() > 0)
    struct.pack_into("<I", data, _field_position(subgraph.Operators(k), OPERATOR_OPCODE_INDEX_SLOT), 65_535)
    result = run_porter("inspect", _write(tmp_path, data))
    assert_one_line_error(result, f"op {k}: opcode index 65535 out of range")


def _operator_vector(op, slot: int, j: int) -> int:
    """Where element j of an operator's inputs (slot 6) or outputs (slot 8) vector lies."""
    return op._tab.Vector(op._tab.Offset(slot)) + 4 * j


OPERATOR_OUTPUTS_SLOT = 8


def _first_ops_of(data: bytes, *types: int) -> list:
    model = tflite.Model.GetRootAs(bytes(data), 0)
    subgraph = model.Subgraphs(0)
    found = []
    for k in range(subgraph.OperatorsLength()):
        op = subgraph.Operators(k)
        code = model.OperatorCodes(op.OpcodeIndex())
        if max(code.BuiltinCode(), code.DeprecatedBuiltinCode()) in types:
            found.append((k, op))
    return found


def test_an_op_reading_a_later_ops_output_names_the_cycle(tmp_path):
    """The embeddings' first ADD made to read the RSQRT of the LayerNorm it feeds."""
    data = _copy_bytes(TINY_LITERT_DQ8)
    (add_k, add), *_ = _first_ops_of(data, tflite.BuiltinOperator.ADD)
    (rsqrt_k, rsqrt), *_ = _first_ops_of(data, tflite.BuiltinOperator.RSQRT)
    struct.pack_into("<i", data, _operator_vector(add, OPERATOR_INPUTS_SLOT, 0), int(rsqrt.OutputsAsNumpy()[0]))
    result = run_porter("inspect", _write(tmp_path, data))
    assert_one_line_error(result, "the graph has a cycle of", f"op {rsqrt_k} (RSQRT) -> op {add_k} (ADD) -> ",
                          "(each feeds the next)")


def test_a_tensor_written_by_two_ops_is_refused(tmp_path):
    data = _copy_bytes(TINY_LITERT_DQ8)
    (first_k, first), (second_k, second), *_ = _first_ops_of(data, tflite.BuiltinOperator.ADD)
    written = int(first.OutputsAsNumpy()[0])
    struct.pack_into("<i", data, _operator_vector(second, OPERATOR_OUTPUTS_SLOT, 0), written)
    result = run_porter("inspect", _write(tmp_path, data))
    assert_one_line_error(result, f"tensor {written} '", f"is written by both op {first_k} (ADD) and op {second_k} (ADD)")


def _shared_name_model(entries: int, name_bytes: int) -> bytes:
    """A model whose tensor list holds `entries` offsets to one tensor with a long name."""
    b = flatbuffers.Builder(0)
    name = b.CreateString("n" * name_bytes)
    tflite.TensorStart(b)
    tflite.TensorAddName(b, name)
    tensor = tflite.TensorEnd(b)
    tflite.SubGraphStartTensorsVector(b, entries)
    for _ in range(entries):
        b.PrependUOffsetTRelative(tensor)
    tensors = b.EndVector()
    tflite.SubGraphStart(b)
    tflite.SubGraphAddTensors(b, tensors)
    subgraph = tflite.SubGraphEnd(b)
    tflite.ModelStartSubgraphsVector(b, 1)
    b.PrependUOffsetTRelative(subgraph)
    subgraphs = b.EndVector()
    tflite.ModelStart(b)
    tflite.ModelAddVersion(b, 3)
    tflite.ModelAddSubgraphs(b, subgraphs)
    b.Finish(tflite.ModelEnd(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def test_tables_sharing_one_long_name_cannot_make_reading_cost_more_than_the_file(tmp_path):
    """20,000 tensors that are one tensor with a 60 KB name: 1.2 GB of names from a 140 KB file
    (the old reader took 26 s and 1.2 GB), refused once reading passes 4 times the file size."""
    data = _shared_name_model(20_000, 60_000)
    result = run_porter("inspect", _write(tmp_path, data))
    assert_one_line_error(result, "while reading tensor ", f"more than 4 times the file's {len(data)} bytes")


def test_a_name_longer_than_64_kib_is_refused(tmp_path):
    data = _shared_name_model(1, 65_537)
    result = run_porter("inspect", _write(tmp_path, data))
    assert_one_line_error(result, "string 'name' of the Tensor table at byte ", "is 65537 bytes long; porter reads strings of up to 65536")


def test_non_tflite_file_is_refused(tmp_path):
    fake = tmp_path / "model.tflite"
    fake.write_text("this is a text file, not a model\n")
    assert_one_line_error(run_porter("inspect", fake), "model.tflite", "not a TFLite flatbuffer")


def test_unknown_format_and_missing_file_are_refused(tmp_path):
    blob = tmp_path / "weights.bin"
    blob.write_bytes(bytes(range(256)))
    assert_one_line_error(run_porter("inspect", blob), "weights.bin", "unknown model format")
    assert_one_line_error(run_porter("inspect", tmp_path / "absent.tflite"), "absent.tflite", "no such file")


# Hostile ONNX files ---------------------------------------------------------------------------


def _onnx_fixture():
    return require(spec.TINY.path("dq8pc.onnx"))


def test_truncated_onnx_is_refused(tmp_path):
    data = _onnx_fixture().read_bytes()
    cut = tmp_path / "cut.onnx"
    cut.write_bytes(data[: len(data) // 2])
    assert_one_line_error(run_porter("inspect", cut), "cut.onnx", "not a valid ONNX protobuf")


def test_onnx_with_an_initializer_removed_is_refused(tmp_path):
    model = onnx.load(str(_onnx_fixture()))
    node = next(n for n in model.graph.node if n.op_type == "MatMulInteger")
    k = list(model.graph.node).index(node)
    weight = node.input[1]
    initializers = model.graph.initializer
    initializers.remove(next(i for i in initializers if i.name == weight))
    out = tmp_path / "missing.onnx"
    onnx.save(model, str(out))
    result = run_porter("inspect", out)
    assert_one_line_error(result, f"node {k} '{node.name}' (MatMulInteger): input '{weight}'", "neither an initializer")


def _with_external_data(tmp_path):
    model = onnx.load(str(require(spec.TINY.path("f32.onnx"))))
    out = tmp_path / "external.onnx"
    onnx.save(model, str(out), save_as_external_data=True, location="external.data", size_threshold=1024)
    return out, tmp_path / "external.data"


def test_onnx_external_data_loads_and_matches_inline(tmp_path):
    out, _ = _with_external_data(tmp_path)
    graph = load_graph(out)
    inline = load_graph(spec.TINY.path("f32.onnx"))
    external = [t for t in graph.tensors if t.storage is not None and t.storage.kind == "external"]
    assert external and all(t.storage.file == "external.data" for t in external)
    by_name = {t.name: t for t in inline.tensors}
    for t in external:
        np.testing.assert_array_equal(t.data, by_name[t.name].data)


def test_onnx_external_data_cut_short_is_refused(tmp_path):
    out, data_file = _with_external_data(tmp_path)
    data_file.write_bytes(data_file.read_bytes()[:1000])
    assert_one_line_error(run_porter("inspect", out), "external data 'external.data'", "file size 1000", "past the end of the file")


def test_onnx_external_data_outside_model_folder_is_refused(tmp_path):
    model = onnx.load(str(require(spec.TINY.path("f32.onnx"))))
    init = max(model.graph.initializer, key=lambda i: len(i.raw_data))
    init.ClearField("raw_data")
    init.data_location = onnx.TensorProto.EXTERNAL
    init.external_data.add(key="location", value="../outside.data")
    out = tmp_path / "escape.onnx"
    onnx.save(model, str(out))
    assert_one_line_error(run_porter("inspect", out), f"initializer '{init.name}'", "'../outside.data' is not a file name inside")


def test_onnx_opset_too_old_is_refused(tmp_path):
    model = onnx.load(str(_onnx_fixture()))
    for opset in model.opset_import:
        if opset.domain in ("", "ai.onnx"):
            opset.version = 11
    out = tmp_path / "old.onnx"
    onnx.save(model, str(out))
    assert_one_line_error(run_porter("inspect", out), "unsupported ai.onnx opset 11")


def test_onnx_node_reading_a_later_nodes_output_names_the_cycle(tmp_path):
    model = onnx.load(str(require(spec.TINY.path("f32.onnx"))))
    nodes = model.graph.node
    first = next(k for k, n in enumerate(nodes) if n.op_type == "Add")
    later = next(k for k, n in enumerate(nodes) if k > first and n.op_type == "LayerNormalization")
    nodes[first].input[0] = nodes[later].output[0]
    out = tmp_path / "cycle.onnx"
    onnx.save(model, str(out))
    line = assert_one_line_error(run_porter("inspect", out), "the graph has a cycle of",
                                 f"node {first} '{nodes[first].name}' (Add) -> ")
    assert f"node {later} '{nodes[later].name}' (LayerNormalization)" in line
