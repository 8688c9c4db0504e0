"""Every paper launch script composed exactly as it launches, validated by verl 0.9.1, checked row by row.

For each script (Prompt-GDRO and Rollout-GDRO at 1.7B, 4B and 8B; the single-GPU example; several
nodes; the released 6- and 3-bin classifiers; Prompt-GDRO's released schedule) the script itself prints
its command (``GDRO_PRINT_CMD=1``); the overrides are composed with the launcher's Hydra config, passed
through verl's own ``validate_config`` (and its rollout / algorithm dataclasses) and the plugin's
pre-launch checks, and every row of ``real_runs/verl/paper_settings.py`` is asserted against the
composed config and the controllers it builds; where gdro train's paper presets hold the same setting,
they must agree as the row says. docs/launch.md must carry the table as the module prints it.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("verl.protocol", reason="verl is not installed (the plugin's own venv runs these)")
from omegaconf import OmegaConf  # noqa: E402
from verl_helpers import CONFIG_DIR, compose_config  # noqa: E402

from real_runs.attention import choose_attention  # noqa: E402
from real_runs.verl import VerlPluginError  # noqa: E402
from real_runs.verl import paper_settings as ps  # noqa: E402
from real_runs.verl.runner import check_launch_config  # noqa: E402
from real_runs.verl.trainer import adv_clip_from_config, controller_from_config  # noqa: E402

ROOT = CONFIG_DIR.parents[2]


def script_overrides(script: str, tmp_path: Path, *extra: str, **env: str) -> list[str]:
    """The Hydra overrides ``script`` launches with (it prints them under GDRO_PRINT_CMD=1)."""
    environ = {**os.environ, "GDRO_PRINT_CMD": "1", "PYTHON": sys.executable, "VERL_DATA": str(tmp_path / "data"),
               "CKPT": str(tmp_path / "ckpt"), "RUN_DIR": str(tmp_path / "run"), **env}
    result = subprocess.run(["bash", str(CONFIG_DIR / script), *extra], env=environ, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[:3] == [sys.executable, "-m", "real_runs.verl.main"]
    implementation, _ = choose_attention("cuda")
    assert f"attention: {implementation} (" in result.stderr  # the one line saying which
    return lines[3:]


def verl_validated(overrides: list[str]) -> Any:
    """The composed config after the plugin's pre-launch checks and verl's own validation before fit."""
    from verl.trainer.config import AlgoConfig
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import omega_conf_to_dataclass, validate_config
    from verl.workers.config import RolloutConfig

    cfg = compose_config(overrides)
    check_launch_config(cfg)  # the launcher's checks (main.py), before Ray
    OmegaConf.resolve(cfg)  # as verl's TaskRunner.run, then its validate_config
    assert need_reference_policy(cfg) and not need_critic(cfg)  # KL loss: a reference model, no critic
    validate_config(config=cfg, use_reference_policy=True, use_critic=False)
    omega_conf_to_dataclass(cfg.actor_rollout_ref.rollout, dataclass_type=RolloutConfig)
    omega_conf_to_dataclass(cfg.algorithm, dataclass_type=AlgoConfig)
    return cfg


def derived(cfg: Any, name: str) -> Any:
    """The ``derived.*`` keys of the table, computed from the composed config and its controllers."""
    controller = controller_from_config(cfg)
    if name == "model_size":
        return cfg.actor_rollout_ref.model.path
    if name == "train_set":
        return Path(str(cfg.data.train_files)).stem.removesuffix("_train")  # convert writes <set>_train.parquet
    if name == "val_sets":
        return tuple(Path(p).stem for p in cfg.data.val_files)
    if name == "mini_batches":
        batch, mini = int(cfg.data.train_batch_size), int(cfg.actor_rollout_ref.actor.ppo_mini_batch_size)
        assert batch % mini == 0
        return batch // mini
    if name == "num_bins":
        assert controller.weighter.num_bins == controller.allocator.config.num_bins == controller.num_bins
        return controller.num_bins
    if name == "n_bar":
        return controller.allocator.config.n_bar
    if name == "arm_score_decay":
        return controller.allocator.config.score_decay
    raise KeyError(name)


def same(got: Any, want: Any) -> bool:
    if isinstance(want, bool) or isinstance(got, bool):
        return got is want or (isinstance(got, bool) and got == want and type(got) is type(want))
    if isinstance(want, float) or isinstance(got, float):
        return isinstance(got, (int, float)) and math.isclose(float(got), float(want), rel_tol=1e-12)
    if isinstance(want, tuple):
        return tuple(got) == want or (len(got) == len(want) and all(same(g, w) for g, w in zip(got, want)))
    return got == want


def check_rows(cfg: Any, method: str, size: str) -> int:
    """Assert every row of the table for ``method`` against ``cfg``; returns how many were checked."""
    controller = controller_from_config(cfg)
    parts = {"classifier_config": controller.classifier.config, "weighter_config": controller.weighter.config,
             "allocator_config": controller.allocator.config}
    for row in ps.rows_for(method):
        if row.key.startswith("derived."):
            got = derived(cfg, row.key.split(".", 1)[1])
            want = ps.MODEL_SIZES[size] if row.key == "derived.model_size" else row.value
        else:
            got = OmegaConf.select(cfg, row.key, default="<absent>")
            want = row.value
            if isinstance(want, tuple):
                got = tuple(got)
        assert same(got, want), f"{row.what}: {row.key} = {got!r}, the table says {want!r} ({row.source})"
        section = row.key.split(".")[1] if row.key.startswith("gdro.") else ""
        if section in parts:  # the controller the run builds got the value, not only the config
            built = getattr(parts[section], row.key.split(".")[2])
            assert same(tuple(built) if isinstance(want, tuple) else built, want), f"{row.what}: built {built!r}"
    assert adv_clip_from_config(cfg) == 5.0
    return len(ps.rows_for(method))


RUNS = [(method, size) for method in ps.METHODS for size in ps.MODEL_SIZES]


@pytest.mark.parametrize("method, size", RUNS)
def test_each_published_run_is_the_table(method, size, tmp_path):
    script = "paper_prompt_gdro.sh" if method == ps.PROMPT else "paper_rollout_gdro.sh"
    cfg = verl_validated(script_overrides(script, tmp_path, MODEL_SIZE=size))
    assert check_rows(cfg, method, size) >= 50
    assert cfg.trainer.nnodes == 1 and cfg.trainer.n_gpus_per_node == 8
    implementation, _ = choose_attention("cuda")
    assert cfg.actor_rollout_ref.model.override_config.attn_implementation == implementation
    assert cfg.actor_rollout_ref.model.use_remove_padding is (implementation == "flash_attention_2")
    assert cfg.trainer.default_local_dir == str(tmp_path / "ckpt") and cfg.gdro.run_dir == str(tmp_path / "run")
    assert not cfg.actor_rollout_ref.rollout.full_determinism  # identical rollouts per group under vLLM otherwise
    assert cfg.reward.custom_reward_function.path == str(ROOT / "real_runs" / "verl" / "reward.py")


def preset_value(size: str, method: str, path: str) -> Any:
    from real_runs.config import load_config

    cfg = load_config(f"paper-qwen3-{size}", [f"method.name={method}"])
    family, _, name = path.partition(".")
    if family in ("classifier", "weighter", "allocator"):
        part = cfg.method.controller_configs()[("classifier", "weighter", "allocator").index(family)]
        return getattr(part, name)
    return getattr(getattr(cfg, family), name)


@pytest.mark.parametrize("method, size", RUNS)
def test_gdro_train_presets_agree_where_they_overlap(method, size):
    checked = 0
    for row in ps.rows_for(method):
        if row.preset is None:
            continue
        got = preset_value(size, method, row.preset)
        want = row.preset_value if row.preset_value is not None else row.value
        if row.key == "derived.model_size":
            want = ps.MODEL_SIZES[size]
        if row.key == "derived.val_sets":
            got, want = sorted(got), sorted(want)
        assert same(got, want), f"{row.what}: preset {row.preset} = {got!r}, expected {want!r}"
        checked += 1
    assert checked >= 20


def test_single_gpu_and_four_nodes_validate(tmp_path):
    one = verl_validated(script_overrides("single_gpu.sh", tmp_path))
    assert one.trainer.n_gpus_per_node * one.trainer.nnodes == 1
    assert one.actor_rollout_ref.model.path == "Qwen/Qwen3-0.6B-Base" and one.gdro.allocator == "gdro"
    for method in ps.METHODS:
        four = verl_validated(script_overrides("multi_node.sh", tmp_path, METHOD=method))
        assert (four.trainer.nnodes, four.trainer.n_gpus_per_node) == (4, 8)
        check_rows(four, method, "8b")


@pytest.mark.parametrize("method", ps.METHODS)
def test_single_gpu_keeps_every_paper_setting_but_the_model_and_starts_training_at_once(method, tmp_path):
    """The single-GPU example must not validate the pooled set (1,745 prompts x 8 samples) before step 1 (was:
    Rollout-GDRO's val_before_train=true, which trainer.total_training_steps=20 does not skip)."""
    one = verl_validated(script_overrides("single_gpu.sh", tmp_path, METHOD=method))
    assert one.trainer.val_before_train is False
    for row in ps.rows_for(method):
        if not row.key.startswith("derived.") and row.key != "trainer.val_before_train":
            got = OmegaConf.select(one, row.key)
            assert same(tuple(got) if isinstance(row.value, tuple) else got, row.value), row.what
    again = verl_validated(script_overrides("single_gpu.sh", tmp_path, "trainer.val_before_train=true", METHOD=method))
    assert again.trainer.val_before_train is True  # the user's override still wins


def test_single_gpu_memory_estimate_is_the_hand_formula_and_the_docs_print_it():
    from real_runs.memory import QWEN3_SHAPES

    rows = {row.key: row.value for row in ps.SETTINGS if row.method in (None, ps.PROMPT)}
    assert (ps.MAX_PROMPT, ps.MAX_RESPONSE) == (rows["data.max_prompt_length"], rows["data.max_response_length"])
    assert all(shape["vocab_size"] == ps.QWEN3_VOCAB for shape in QWEN3_SHAPES.values())
    micro = rows["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu"]
    assert micro == 16
    by_hand = 16 * (3200 + 4096) * 151936 * 2 / 1e9  # micro-batch x padded sequence x vocabulary x bf16 bytes
    assert math.isclose(ps.logits_gb(micro), by_hand, rel_tol=1e-12) and 35 < by_hand < 36
    assert math.isclose(ps.logits_gb(4, 100, 1000, 4), 4 * 100 * 1000 * 4 / 1e9)
    docs = (ROOT / "docs" / "launch.md").read_text(encoding="utf-8")
    assert ps.single_gpu_memory_markdown() in docs, "docs/launch.md's memory sentence is stale"
    assert f"**{by_hand:.1f} GB**" in docs


def test_the_pooled_validation_set_has_the_size_the_docs_give():
    from real_runs.data import data_root, load_dataset_records

    if not (data_root() / "math500").is_dir() or not (data_root() / "olympiadbench").is_dir():
        pytest.skip("the full benchmark files are not here (GDRO_DATA / ../shared/data)")
    total = sum(len(load_dataset_records(name)) for name in ps.VAL_SETS)
    docs = (ROOT / "docs" / "launch.md").read_text(encoding="utf-8")
    assert f"{total:,} prompts x 8 samples" in docs and total > 1000


@pytest.mark.parametrize("bins", ["6", "3"])
@pytest.mark.parametrize("method", ps.METHODS)
def test_released_classifier_options(method, bins, tmp_path):
    script = "paper_prompt_gdro.sh" if method == ps.PROMPT else "paper_rollout_gdro.sh"
    cfg = verl_validated(script_overrides(script, tmp_path, BINS=bins))
    option = ps.CLASSIFIER_OPTIONS[bins]
    controller = controller_from_config(cfg)
    assert controller.classifier.config.edges == option["edges"]
    assert controller.classifier.config.window == option["window"][method]
    assert controller.classifier.config.exclude_extremes is option["exclude_extremes"]
    assert controller.num_bins == controller.weighter.num_bins == controller.allocator.config.num_bins == option["num_bins"]


def test_prompt_gdro_released_schedule(tmp_path):
    cfg = verl_validated(script_overrides("paper_prompt_gdro.sh", tmp_path, PROMPT_SCHEDULE="released"))
    assert (cfg.data.train_batch_size, cfg.trainer.total_training_steps) == ps.PROMPT_SCHEDULES["released"] == (512, 500)
    assert derived(cfg, "mini_batches") == 4  # the released script's mini-batch of 128 prompts


def test_a_user_override_comes_last_and_wins(tmp_path):
    cfg = verl_validated(script_overrides("paper_rollout_gdro.sh", tmp_path, "trainer.total_training_steps=20"))
    assert cfg.trainer.total_training_steps == 20


@pytest.mark.parametrize("env, message", [
    ({"MODEL_SIZE": "70b"}, "MODEL_SIZE=70b is unknown"),
    ({"BINS": "5"}, "BINS=5 is unknown"),
    ({"PROMPT_SCHEDULE": "released"}, "PROMPT_SCHEDULE is Prompt-GDRO's"),
    ({"GDRO_PRINT_CMD": "0"}, "VERL_DATA"),
])
def test_bad_knobs_exit_2_in_one_line(env, message, tmp_path):
    environ = {k: v for k, v in os.environ.items() if k != "VERL_DATA"}
    environ.update({"GDRO_PRINT_CMD": "1", "PYTHON": sys.executable, **env})
    result = subprocess.run(["bash", str(CONFIG_DIR / "paper_rollout_gdro.sh")], env=environ, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 2 and result.stderr.startswith("error: ") and message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and not result.stdout


def test_missing_data_and_missing_wandb_stop_before_launch(tmp_path):
    environ = {**os.environ, "PYTHON": sys.executable, "VERL_DATA": str(tmp_path)}
    run = lambda: subprocess.run(["bash", str(CONFIG_DIR / "paper_prompt_gdro.sh")], env=environ,  # noqa: E731
                                 capture_output=True, text=True, timeout=120)
    result = run()
    assert result.returncode == 2 and f"{tmp_path}/dapo_train.parquet is missing" in result.stderr
    for name in ("dapo_train", *ps.VAL_SETS):
        (tmp_path / f"{name}.parquet").write_bytes(b"")
    try:
        import wandb  # noqa: F401
        pytest.skip("wandb imports here: the launch would start")
    except ImportError:
        pass
    result = run()
    assert result.returncode == 2 and "wandb does not import" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_table_rows_name_their_source_and_the_docs_print_the_table():
    for row in ps.SETTINGS:
        assert row.source in (ps.PAPER, ps.RELEASED, ps.RELEASED_P, ps.RELEASED_R) or row.source.startswith("ours: ")
        assert row.method in (None, *ps.METHODS)
    keys = {(row.key, row.method) for row in ps.SETTINGS}
    assert len(keys) == len(ps.SETTINGS)  # one row per key and method
    docs = (ROOT / "docs" / "launch.md").read_text(encoding="utf-8")
    stale = "docs/launch.md's table is stale: paste `python -m real_runs.verl.paper_settings`"
    assert ps.markdown_table() in docs and ps.departures_markdown() in docs, stale


def test_the_old_script_is_retired_and_nothing_points_at_it():
    assert not (CONFIG_DIR / "one_node_8gpu.sh").exists()
    for path in [*CONFIG_DIR.glob("*.sh"), ROOT / "docs" / "launch.md", ROOT / "scripts" / "verl_smoke.sh"]:
        assert "one_node_8gpu" not in path.read_text(encoding="utf-8"), path


def test_bad_adv_clip_from_a_script_override_fails_before_launch(tmp_path):
    cfg = compose_config(script_overrides("paper_rollout_gdro.sh", tmp_path, "gdro.adv_clip=-1"))
    with pytest.raises(VerlPluginError, match="gdro.adv_clip=-1"):
        check_launch_config(cfg)


def docs_launch_commands() -> list[str]:
    """Every line of docs/launch.md's bash blocks that runs a launch script."""
    import re

    docs = (ROOT / "docs" / "launch.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```bash\n(.*?)```", docs, flags=re.S)
    return [line for block in blocks for line in block.splitlines() if "bash real_runs/verl/configs/" in line]


@pytest.mark.parametrize("line", docs_launch_commands())
def test_every_launch_command_in_the_docs_composes_and_validates(line, tmp_path):
    """The docs' commands as typed (their variables, script and overrides), composed and validated; they need
    GPUs to run, so VERL_DATA and CKPT point at a scratch folder and GDRO_PRINT_CMD=1 stops before launch."""
    import shlex

    words = shlex.split(line)
    start = words.index("bash")
    env = dict(word.split("=", 1) for word in words[:start])
    env.update({"VERL_DATA": str(tmp_path / "data"), "CKPT": str(tmp_path / "ckpt")})
    script = Path(words[start + 1])
    assert script.parent.as_posix() == "real_runs/verl/configs"
    cfg = verl_validated(script_overrides(script.name, tmp_path, *words[start + 2:], **env))
    method = ps.PROMPT if cfg.gdro.weighter == "gdro" else ps.ROLLOUT
    for row in ps.rows_for(method):
        if row.key.startswith("gdro.weighter_config") or row.key.startswith("gdro.allocator_config"):
            assert same(OmegaConf.select(cfg, row.key), row.value), row.what


def test_the_docs_show_every_run():
    lines = docs_launch_commands()
    for method in ("paper_prompt_gdro.sh", "paper_rollout_gdro.sh"):
        for size in ps.MODEL_SIZES:
            assert any(f"MODEL_SIZE={size} " in l and method in l for l in lines), (method, size)
    assert any("single_gpu.sh" in l for l in lines) and any("NNODES=4" in l and "multi_node.sh" in l for l in lines)


def _fake_nodes(shared: Path, own_disk: Path):
    """Two nodes: the head sees every path; the other sees ``shared`` and, elsewhere, a disk of its own."""
    from real_runs.verl import cluster

    nodes = [cluster.Node("a" * 56, "10.0.0.1 (head)"), cluster.Node("b" * 56, "10.0.0.2 (gpu-2)")]

    def read_all(nodes_, paths):
        def on_node_2(path: str) -> str:
            return path if Path(path).is_relative_to(shared) else str(own_disk / Path(path).relative_to("/"))
        return {nodes[0].node_id: cluster.read_markers(list(paths), wait_s=0.0),
                nodes[1].node_id: cluster.read_markers([on_node_2(p) for p in paths], wait_s=0.0)}

    return nodes, read_all


def test_the_four_node_recipe_puts_every_folder_it_writes_on_the_checked_shared_filesystem(tmp_path):
    """docs/launch.md's four-node recipe: `ray_cluster.sh check` names the checkpoint AND run folders, each
    launch's CKPT and RUN_DIR lie under them, and with /shared a folder every node sees, the launch's own
    shared-filesystem check passes. Left at its default ($HOME: one node's disk) RUN_DIR is refused by
    multi_node.sh in one line; set off the shared filesystem, the launch's check refuses it."""
    import shlex

    from real_runs.verl import cluster

    docs = (ROOT / "docs" / "launch.md").read_text(encoding="utf-8")
    checked = [Path(f) for line in docs.splitlines() if line.startswith("scripts/ray_cluster.sh check")
               for f in shlex.split(line)[2:]]
    launches = [line for line in docs_launch_commands() if "multi_node.sh" in line]
    assert checked and len(launches) == 2
    shared, own_disk = tmp_path / "shared", tmp_path / "node2_disk"
    nodes, read_all = _fake_nodes(shared, own_disk)
    for line in launches:
        words = shlex.split(line)
        env = dict(word.split("=", 1) for word in words[:words.index("bash")])
        for name in ("CKPT", "RUN_DIR"):
            assert name in env, f"{name} is not set in the documented launch: {line}"
            assert any(Path(env[name]).is_relative_to(folder) for folder in checked), (name, env[name], checked)
        env = {name: value.replace("/shared/", f"{shared}/") for name, value in env.items()}
        cfg = verl_validated(script_overrides("multi_node.sh", tmp_path, **env))
        assert set(cluster.folders_to_check(cfg)) == {"trainer.default_local_dir", "gdro.run_dir"}
        assert "gdro.run_dir=" in cluster.check_shared_folders(cluster.folders_to_check(cfg), nodes, read_all)

        off_shared = {**env, "RUN_DIR": str(tmp_path / "home" / "gdro_runs" / "x")}
        cfg = verl_validated(script_overrides("multi_node.sh", tmp_path, **off_shared))
        with pytest.raises(VerlPluginError, match=r"gdro.run_dir=.* is not one shared filesystem: node 10.0.0.2"):
            cluster.check_shared_folders(cluster.folders_to_check(cfg), nodes, read_all)

        environ = {k: v for k, v in os.environ.items() if k not in ("RUN_DIR", "CKPT")}
        environ.update({**env, "GDRO_PRINT_CMD": "1", "PYTHON": sys.executable})
        del environ["RUN_DIR"]
        refused = subprocess.run(["bash", str(CONFIG_DIR / "multi_node.sh")], env=environ, capture_output=True,
                                 text=True, timeout=120)
        assert refused.returncode == 2 and not refused.stdout
        assert refused.stderr.startswith("error: multi_node.sh needs RUN_DIR on the shared filesystem")
        assert len(refused.stderr.strip().splitlines()) == 1


def checkpoint_schedule(cfg: Any) -> tuple[set[int], set[int]]:
    """(validated steps after step 0, steps whose checkpoint is still on disk at the end), by verl 0.9.1's
    fit(): validate when ``step % test_freq == 0`` or at the last step, save when ``step % save_freq == 0`` or
    at the last step, keep the last ``max_actor_ckpt_to_keep`` saved (null or 0: all)."""
    trainer = cfg.trainer
    last, test_freq, save_freq = int(trainer.total_training_steps), int(trainer.test_freq), int(trainer.save_freq)
    steps = range(1, last + 1)
    validated = {s for s in steps if test_freq > 0 and (s % test_freq == 0 or s == last)}
    saved = [s for s in steps if save_freq > 0 and (s % save_freq == 0 or s == last)]
    keep = trainer.max_actor_ckpt_to_keep
    return validated, set(saved[-keep:] if keep else saved)


@pytest.mark.parametrize("script, env, extra", [
    *[("paper_prompt_gdro.sh" if m == ps.PROMPT else "paper_rollout_gdro.sh", {"MODEL_SIZE": size}, ())
      for m, size in RUNS],
    ("paper_prompt_gdro.sh", {"PROMPT_SCHEDULE": "released"}, ()),
    ("paper_rollout_gdro.sh", {"BINS": "6"}, ("trainer.total_training_steps=130",)),
    ("multi_node.sh", {"METHOD": "prompt_gdro"}, ()),
])
def test_every_validated_step_keeps_its_checkpoint_so_the_peak_can_be_recovered(script, env, extra, tmp_path):
    """The paper reports each run's peak checkpoint (Table 1): the best validated step must still be on disk at
    the end of the run, whichever step it is (was: Prompt-GDRO validated at 40, 80, ... and saved at 50, 100, ...,
    keeping 2)."""
    cfg = verl_validated(script_overrides(script, tmp_path, *extra, **env))
    validated, kept = checkpoint_schedule(cfg)
    assert validated and validated <= kept, f"validated steps without a checkpoint: {sorted(validated - kept)}"
    if not extra and env.get("PROMPT_SCHEDULE") != "released":  # the table's note counts the paper runs' checkpoints
        method = ps.PROMPT if cfg.gdro.weighter == "gdro" else ps.ROLLOUT
        note = next(r.note for r in ps.SETTINGS if r.key == "trainer.max_actor_ckpt_to_keep")
        name = "Prompt-GDRO" if method == ps.PROMPT else "Rollout-GDRO"
        assert f"{len(kept)} ({name})" in note, (len(kept), note)


def test_every_row_that_departs_from_the_paper_is_a_listed_departure():
    titles = {title for title, _ in ps.DEPARTURES}
    departing = [row for row in ps.SETTINGS if row.paper is not None]
    for row in departing:
        assert row.departure in titles, f"{row.what} ({row.method}) departs from App. A but DEPARTURES lacks it"
        assert not same(row.value, row.paper), f"{row.what}: equals the paper's {row.paper!r}, no departure"
    assert all(row.paper is not None for row in ps.SETTINGS if row.departure)
    # the rows known to depart: training temperature, Prompt-GDRO's 16 validation samples, k, the arm EMA
    assert {(row.key, row.method) for row in departing} >= {
        ("actor_rollout_ref.rollout.temperature", None), ("actor_rollout_ref.rollout.val_kwargs.n", ps.PROMPT),
        ("gdro.classifier_config.k", None), ("derived.arm_score_decay", ps.ROLLOUT)}
