"""machine_info / machine_line: the facts next to every timing, and the bf16 detection."""

from __future__ import annotations

import pytest
import torch

from attnkit import machine

CPUINFO = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8480+
flags\t\t: fpu sse avx2 avx512f {extra}

processor\t: 1
model name\t: Intel(R) Xeon(R) Platinum 8480+
"""


@pytest.fixture(autouse=True)
def _onednn_unrestricted(monkeypatch):
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)


@pytest.fixture
def fake_cpuinfo(tmp_path, monkeypatch):
    def write(extra: str = ""):
        path = tmp_path / "cpuinfo"
        path.write_text(CPUINFO.format(extra=extra))
        monkeypatch.setattr(machine, "CPUINFO", path)
    return write


def test_machine_info_reports_this_machine(monkeypatch):
    for name in machine.ISA_CAPS:
        monkeypatch.delenv(name, raising=False)
    info = machine.machine_info()
    assert set(info) == {"cpu", "isa", "bf16_native", "threads", "torch", "cuda", "isa_caps"}
    assert info["isa_caps"] == {}
    assert info["isa"] == torch.backends.cpu.get_cpu_capability()
    assert info["threads"] == torch.get_num_threads()
    assert info["torch"] == torch.__version__
    assert isinstance(info["bf16_native"], bool) and info["cpu"]
    assert info["cuda"] is None or isinstance(info["cuda"], str)
    line = machine.machine_line()
    assert f"torch {torch.__version__}" in line and info["isa"] in line


def test_machine_line_format():
    info = {"cpu": "Intel(R) Xeon(R) Processor", "isa": "AVX512", "bf16_native": True,
            "threads": 2, "torch": "2.13.0+cpu", "cuda": None}
    assert machine.machine_line(info) == (
        "Intel(R) Xeon(R) Processor (AVX512, bf16 native: yes), 2 threads, torch 2.13.0+cpu")
    info.update(bf16_native=False, threads=1, isa="AVX2", cuda="NVIDIA H200")
    assert machine.machine_line(info) == ("Intel(R) Xeon(R) Processor (AVX2, bf16 native: no), "
                                          "1 thread, torch 2.13.0+cpu, CUDA: NVIDIA H200")


def test_an_emulated_isa_is_named_in_the_line(monkeypatch):
    """Timings taken with the ISA capped (an AVX2 CPU emulated on a newer one) say so."""
    for name in machine.ISA_CAPS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "avx2")
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    info = machine.machine_info()
    assert info["isa_caps"] == {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
    assert machine.machine_line(info).endswith(
        ", ISA capped by ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2")
    assert not info["bf16_native"]


def test_cpu_model_from_cpuinfo_or_platform(fake_cpuinfo, monkeypatch, tmp_path):
    fake_cpuinfo()
    assert machine.cpu_model() == "Intel(R) Xeon(R) Platinum 8480+"
    monkeypatch.setattr(machine, "CPUINFO", tmp_path / "absent")
    monkeypatch.setattr(machine.platform, "processor", lambda: "arm")
    assert machine.cpu_model() == "arm"


@pytest.mark.parametrize("avx512_bf16, amx, expected",
                         [(False, False, False), (True, False, True), (False, True, True)])
def test_bf16_native_asks_torch_first(monkeypatch, avx512_bf16, amx, expected):
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: avx512_bf16,
                        raising=False)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: amx, raising=False)
    assert machine.cpu_has_native_bf16() is expected


def test_onednn_limited_below_bf16_is_not_native(monkeypatch):
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: True, raising=False)
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "avx2")
    assert machine.cpu_has_native_bf16() is False
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX512_CORE_BF16")
    assert machine.cpu_has_native_bf16() is True


@pytest.mark.parametrize("flags, expected", [("", False), ("avx512_bf16", True),
                                             ("amx_tile amx_bf16", True), ("avx512_vnni", False)])
def test_bf16_native_from_cpuinfo_flags_without_torch_probes(fake_cpuinfo, monkeypatch, flags,
                                                             expected):
    # A torch without the private probes: the kernel's flags decide.
    monkeypatch.setattr(machine, "_TORCH_BF16_PROBES", ("_no_such_probe",))
    fake_cpuinfo(flags)
    assert machine.cpu_has_native_bf16() is expected
