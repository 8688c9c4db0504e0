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
