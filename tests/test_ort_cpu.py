"""onnxruntime's CPU targets (porter.reference.ort.cpu): which target a CPU takes, as MLAS's
dispatch decides; how a target is chosen, recorded and refused on the command line; and the
committed goldens of the two CPUs porter reproduces."""

import json

import numpy as np
import pytest

from fixtures import (ORT_GOLDEN_TARGETS, REPO, assert_one_line_error, host_ort_cpu, ort_golden,
                      require, run_porter, spec)
from porter import cli
from porter.check.golden import load_golden
from porter.codegen.compile import recover
from porter.errors import PorterError
from porter.reference import execute
from porter.reference.litert import floats as LF
from porter.reference.ort import cpu as ort_cpu
from porter.reference.quant import EXACT_DOT, INT16_PAIRS_SATURATED

TINY_DQ8PC = spec.TINY.path("dq8pc.onnx")
ZEN3 = "avx2 fma sse4_2 f16c bmi2"
ZEN4 = ZEN3 + " avx512f avx512dq avx512ifma avx512cd avx512bw avx512vl avx512_bf16 avx512vbmi avx512_vnni"
CPUS = {
    "Zen 3 (this project's machines)": (ZEN3, "avx2"),
    "Zen 4": (ZEN4, "avx512vnni"),
    "Zen 5 (AVX-VNNI too)": (ZEN4 + " avx_vnni", "avx512vnni"),
    "Alder Lake": (ZEN3 + " avx_vnni", "avxvnni"),
    "Skylake-SP": (ZEN3 + " avx512f avx512dq avx512cd avx512bw avx512vl", "avx512"),
    "Knights Landing (AVX-512F without BW/DQ/VL)": (ZEN3 + " avx512f avx512cd avx512er avx512pf", "avx512"),
    "Sapphire Rapids (AMX)": (ZEN4 + " avx_vnni amx_tile amx_int8 amx_bf16", "avx512vnni"),
}


@pytest.mark.parametrize("cpu", list(CPUS))
def test_each_cpu_takes_the_target_mlas_dispatch_gives_it(cpu):
    flags, expected = CPUS[cpu]
    assert ort_cpu.target_for_flags(flags.split(), cpu).name == expected


def test_targets_pair_a_float_kernel_family_with_an_integer_dot():
    kernels = {name: (t.floats, t.integer_dot) for name, t in ort_cpu.TARGETS.items()}
    assert kernels == {"avx2": (ort_cpu.AVX2_FLOATS, INT16_PAIRS_SATURATED),
                       "avxvnni": (ort_cpu.AVX2_FLOATS, EXACT_DOT),
                       "avx512": (ort_cpu.AVX512_FLOATS, INT16_PAIRS_SATURATED),
                       "avx512vnni": (ort_cpu.AVX512_FLOATS, EXACT_DOT)}


def test_a_cpu_without_avx2_and_fma_has_no_target():
    with pytest.raises(PorterError, match="no AVX2 with FMA.*not reproduced"):
        ort_cpu.target_for_flags(["sse4_2", "avx"], "a Sandy Bridge")


def test_the_host_cpu_comes_from_proc_cpuinfo(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(f"processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: {ZEN4}\n\n"
                       f"processor\t: 1\nmodel name\t: AMD EPYC\nflags\t\t: {ZEN4}\n")
    cpu = ort_cpu.host_cpu(cpuinfo)
    assert cpu.model == "AMD EPYC"
    assert cpu.flags == sorted(set(ZEN4.split()) - {"sse4_2", "f16c", "bmi2"})  # what dispatch reads
    arm = tmp_path / "arm"
    arm.write_text("processor\t: 0\nFeatures\t: fp asimd asimddp\nCPU implementer\t: 0x41\n")
    with pytest.raises(PorterError, match="no x86 flags.*asimddp.*not reproduced"):
        ort_cpu.host_cpu(arm)


def test_the_command_line_offers_every_target():
    assert cli.ORT_CPU_CHOICES == ort_cpu.choices()


# ---- the committed goldens ---------------------------------------------------------------------

ONNX_GOLDENS = sorted(p.name for p in (REPO / "golden").glob("*.onnx.ort.npz"))


@pytest.mark.parametrize("name", ONNX_GOLDENS)
def test_each_onnx_golden_exists_for_both_cpus_with_the_same_windows(name):
    fixture = REPO / "graphs" / name.removesuffix(".ort.npz")
    goldens = {t: load_golden(ort_golden(fixture, t)) for t in ORT_GOLDEN_TARGETS}
    for target, golden in goldens.items():
        assert ort_cpu.golden_target(golden.manifest, name).name == target
        assert golden.manifest["cpu_model"] == "AMD EPYC"
    first, second = goldens.values()
    for array in ("ids", "attention_mask", "live", "text_index"):
        assert np.array_equal(getattr(first, array), getattr(second, array))
    # the CPU changes onnxruntime's logits: every fixture, float and quantised
    assert not np.array_equal(first.logits, second.logits)


def test_an_ir_for_the_other_cpu_misses_the_golden():
    """The executor with AVX2's arithmetic on the AVX-512 VNNI golden: not bit-exact (so the
    per-target tests can fail), while its own target's is."""
    golden = load_golden(ort_golden(TINY_DQ8PC, "avx512vnni"))
    live = int(golden.live[3])
    for target, exact in (("avx2", False), ("avx512vnni", True)):
        ours = execute.run(recover(require(TINY_DQ8PC), target), golden.ids[3], golden.attention_mask[3])
        assert np.array_equal(ours[:live], golden.logits[3][:live]) == exact, target


# ---- choosing, recording and refusing a target --------------------------------------------------

@pytest.mark.parametrize("target, floats, saturating", [("avx2", "Avx2", "true"), ("avx512vnni", "Avx512", "false")])
def test_compile_records_the_target_in_ir_json_and_the_crate(target, floats, saturating, tmp_path):
    out = tmp_path / target
    result = run_porter("compile", require(TINY_DQ8PC), "-o", out, "--ort-cpu", target)
    assert result.returncode == 0, result.stderr
    assert f"onnxruntime on {target} CPUs" in result.stdout
    assert json.loads((out / "ir.json").read_text())["ort_cpu"] == target
    model_rs = (out / "src" / "model.rs").read_text()
    assert f"onnxruntime 1.32's CPU kernels as on {target} (" in model_rs
    assert f"onnxruntime: Some(crate::kernels::ort::float::OrtFloats::{floats})" in model_rs
    assert f"saturating: {saturating}," in model_rs and f"saturating: {'true' if saturating == 'false' else 'false'}," not in model_rs


def test_auto_is_this_machines_cpu_and_litert_graphs_have_none(tmp_path):
    onnx, tflite = tmp_path / "onnx", tmp_path / "tflite"
    assert run_porter("compile", require(TINY_DQ8PC), "-o", onnx).returncode == 0
    assert json.loads((onnx / "ir.json").read_text())["ort_cpu"] == host_ort_cpu()
    assert run_porter("compile", require(spec.TINY.path("litert-dq8.tflite")), "-o", tflite).returncode == 0
    assert json.loads((tflite / "ir.json").read_text())["ort_cpu"] is None


def test_inspect_prints_the_target():
    result = run_porter("inspect", "--ir", require(TINY_DQ8PC), "--ort-cpu", "avx512vnni")
    assert result.returncode == 0, result.stderr
    assert "arithmetic: onnxruntime's CPU kernels as on avx512vnni CPUs" in result.stdout
    litert = run_porter("inspect", "--ir", require(spec.TINY.path("litert-dq8.tflite")))
    l1d = LF.host_l1d_bytes() // 1024  # auto: this machine's
    assert f"arithmetic: LiteRT's builtin kernels (float products blocked for a {l1d} KiB L1 data cache)" in litert.stdout


@pytest.mark.parametrize("args, fragments", [
    (["--ort-cpu", "avx1024"], ["--ort-cpu avx1024", "auto|avx2|avxvnni|avx512|avx512vnni"]),
    (["--ort-cpu", "arm64"], ["--ort-cpu arm64", "ARM64", "not reproduced"]),
])
def test_an_unknown_or_unreproduced_target_is_one_line(args, fragments, tmp_path):
    assert_one_line_error(run_porter("compile", require(TINY_DQ8PC), "-o", tmp_path / "x", *args), *fragments)


def test_a_target_for_a_litert_graph_is_one_line(tmp_path):
    result = run_porter("compile", require(spec.TINY.path("litert-dq8.tflite")), "-o", tmp_path / "x",
                        "--ort-cpu", "avx2")
    assert_one_line_error(result, "--ort-cpu avx2", "LiteRT's builtin kernels, which pick no kernels by CPU",
                          "--l1d")


def test_porter_run_takes_the_goldens_cpu():
    """--ort-cpu auto with a golden that records its CPU: that CPU's target, whatever this
    machine has; every window bit for bit."""
    golden = ort_golden(TINY_DQ8PC, "avx512vnni")
    result = run_porter("run", require(TINY_DQ8PC), "--golden", golden)
    assert result.returncode == 0, result.stderr
    assert "onnxruntime arithmetic of avx512vnni (" in result.stdout
    assert "overall vs onnxruntime" in result.stdout and "(100.00%), max |dlogit| 0," in result.stdout
