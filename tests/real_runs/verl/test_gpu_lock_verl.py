"""constraints/gpu-verl.txt against verl 0.9.1's own metadata (the installed distribution).

The lock must hold verl's `vllm` extra at exactly its pins (torch, torchvision, torchaudio, vLLM,
transformers) and satisfy every requirement of verl itself and of its `verl-core` extra: the lock was
resolved from these, and this reads them from the package, independently of the resolver.
"""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import pytest

pytest.importorskip("verl.protocol", reason="verl is not installed (the plugin's own venv runs these)")
from packaging.requirements import Requirement  # noqa: E402
from packaging.utils import canonicalize_name  # noqa: E402

LOCK = Path(__file__).resolve().parents[3] / "constraints" / "gpu-verl.txt"
PLATFORM = {"python_version": "3.11", "python_full_version": "3.11.0", "platform_machine": "x86_64",
            "platform_system": "Linux", "sys_platform": "linux", "implementation_name": "cpython",
            "platform_python_implementation": "CPython", "os_name": "posix"}


def lock() -> dict[str, str]:
    lines = LOCK.read_text().splitlines()
    return {canonicalize_name(n): v for n, _, v in (l.partition("==") for l in lines if l and l[0].isalnum())}


def verl_requirements(extra: str) -> list[Requirement]:
    out = []
    for text in importlib.metadata.requires("verl") or []:
        requirement = Requirement(text)
        if requirement.marker is None or requirement.marker.evaluate({**PLATFORM, "extra": extra}):
            out.append(requirement)
    return out


def test_lock_is_verl_installed_version():
    assert lock()["verl"] == importlib.metadata.version("verl") == "0.9.1"


def test_lock_pins_the_vllm_extra_exactly_and_meets_every_verl_requirement():
    pins = lock()
    vllm_extra = [r for r in verl_requirements("vllm") if r.marker is not None]
    exact = {canonicalize_name(r.name): next(iter(r.specifier)).version for r in vllm_extra if r.specifier}
    assert {"torch", "torchvision", "torchaudio", "vllm", "transformers"} <= set(exact)
    assert {name: pins.get(name) for name in exact} == exact
    checked = 0
    for requirement in verl_requirements("vllm") + verl_requirements("verl-core"):
        name = canonicalize_name(requirement.name)
        if name == "verl":
            continue  # verl[verl-core] itself
        assert name in pins, f"verl needs {name}; the lock lacks it"
        assert requirement.specifier.contains(pins[name], prereleases=True), (str(requirement), pins[name])
        checked += 1
    assert checked > 30


# ---------------------------------------------------------------------- the CPU environment against the lock

CPU_LIST = LOCK.parents[1] / "real_runs" / "verl" / "requirements-cpu.txt"
CPU_FREEZE = LOCK.parent / "verl.txt"
REASON = "# differs-from-gpu-lock: "


def pins(path: Path) -> dict[str, str]:
    """``name==version`` lines of a requirements file, by canonical name (``+cpu`` local tags dropped)."""
    out = {}
    for line in path.read_text().splitlines():
        text = line.split("#")[0].strip()
        if "==" in text:
            name, _, version = text.partition("==")
            out[canonicalize_name(name.split("[")[0])] = version.strip().split("+")[0]
    return out


def stated_differences(text: str) -> dict[str, tuple[str, str]]:
    """``# differs-from-gpu-lock: NAME CPU_VERSION (lock GPU_VERSION): why`` lines: name -> (cpu, gpu)."""
    out = {}
    for line in text.splitlines():
        if line.startswith(REASON):
            head, _, why = line[len(REASON):].partition("):")
            name, version, lock_word, lock_version = head.replace("(", " ").split()
            assert lock_word == "lock" and why.strip(), f"malformed line in {CPU_LIST.name}: {line}"
            out[canonicalize_name(name)] = (version, lock_version)
    return out


def drift(cpu: dict[str, str], gpu: dict[str, str], stated: dict[str, tuple[str, str]]) -> list[str]:
    """Every shared package whose versions differ without a stated reason, and every stale reason."""
    problems = [f"{name}: CPU {cpu[name]}, GPU lock {gpu[name]}, no '{REASON.strip()}' line says why"
                for name in sorted(set(cpu) & set(gpu)) if cpu[name] != gpu[name] and name not in stated]
    problems += [f"{name}: the stated difference {versions} is not the files' ({cpu.get(name)}, {gpu.get(name)})"
                 for name, versions in sorted(stated.items()) if versions != (cpu.get(name), gpu.get(name))]
    return problems


def test_the_cpu_environment_has_the_gpu_locks_versions_except_where_stated():
    gpu, stated = lock(), stated_differences(CPU_LIST.read_text())
    listed, frozen = pins(CPU_LIST), pins(CPU_FREEZE)
    assert {name: frozen.get(name) for name in listed} == listed  # the list is what the freeze holds
    assert drift(frozen, gpu, stated) == []
    assert set(stated) == {"torch"}  # what the docs (docs/verl.md) say differs
    assert len(set(frozen) & set(gpu)) > 80  # nearly every package of the environment is compared


def test_drift_is_caught():
    gpu = {"transformers": "5.9.0", "torch": "2.11.0", "ray": "2.60.0"}
    cpu = {"transformers": "5.10.4", "torch": "2.13.0", "ray": "2.60.0", "pytest-benchmark": "5.2.3"}
    reasons = stated_differences(f"{REASON}torch 2.13.0 (lock 2.11.0): CPU build\n")
    assert drift(cpu, gpu, reasons) == [
        "transformers: CPU 5.10.4, GPU lock 5.9.0, no '# differs-from-gpu-lock:' line says why"]
    assert drift({**cpu, "transformers": "5.9.0", "torch": "2.12.0"}, gpu, reasons) == [
        "torch: the stated difference ('2.13.0', '2.11.0') is not the files' (2.12.0, 2.11.0)"]


def test_the_installed_verl_environment_is_its_lock():
    """What the tests here run on is constraints/verl.txt (so a drifted environment fails here)."""
    wrong = {}
    for name, version in pins(CPU_FREEZE).items():
        try:
            installed = importlib.metadata.version(name).split("+")[0]
        except importlib.metadata.PackageNotFoundError:
            installed = None
        if installed != version:
            wrong[name] = (version, installed)
    assert wrong == {}
