"""The docs' command runner (scripts/doc_commands.py) and the paper page's generated claims
(scripts/paper_claims.py): directives parse or fail with file:line, substitutions must match the
block, GPU/cluster blocks must be dry runs or validated by a named test, a block's exit status and
a server's liveness decide its verdict, and every block of the real docs is well formed."""

from __future__ import annotations

from pathlib import Path

import pytest
from scriptload import load_script

ROOT = Path(__file__).resolve().parents[2]


dc = load_script("doc_commands")
claims = load_script("paper_claims")


def page(tmp_path: Path, text: str) -> list:
    (tmp_path / "docs").mkdir(exist_ok=True)
    path = tmp_path / "docs" / "p.md"
    path.write_text(text)
    return dc.blocks_of(path, tmp_path)


def test_every_block_of_the_real_docs_is_well_formed_and_counted() -> None:
    blocks = dc.all_blocks()
    assert any(b.path == "README.md" for b in blocks)
    counts = dc.counts(blocks)
    assert counts["run"] >= 8 and counts["dry"] >= 1  # the CPU jobs and at least one GPU dry run
    for block in blocks:
        block.command()  # every sub still matches its block


def test_a_block_runs_as_written_unless_a_directive_says_otherwise(tmp_path: Path) -> None:
    blocks = page(tmp_path, "text\n```bash\ngdro simulate --steps 1000\n```\n\n```python\nprint(1)\n```\n")
    assert len(blocks) == 1 and blocks[0].mode == "run" and blocks[0].line == 2
    assert blocks[0].command() == "gdro simulate --steps 1000"


def test_sub_and_append_make_fixture_sized_commands(tmp_path: Path) -> None:
    text = ('<!-- doc-test: sub "--steps 1000" "--steps 4" append "gdro sweep" "--seeds 1" -->\n```bash\n'
            "gdro simulate --steps 1000   # a comment\nnice -n 10 gdro sweep --grid a=1,2 \\\n    --methods grpo  # c\n"
            "gdro sweeper\n```\n")
    (block,) = page(tmp_path, text)
    assert block.command().split("\n") == [
        "gdro simulate --steps 4   # a comment", "nice -n 10 gdro sweep --grid a=1,2 \\",
        "    --methods grpo --seeds 1  # c", "gdro sweeper"]


def test_pip_install_becomes_a_dry_run(tmp_path: Path) -> None:
    (block,) = page(tmp_path, "```bash\npip install -e '.[sim]' && .venv/bin/pip install torch==2.13.0\n```\n")
    assert block.command() == ("pip install --dry-run --quiet -e '.[sim]' && "
                               ".venv/bin/pip install --dry-run --quiet torch==2.13.0")


def test_an_unlabelled_fence_is_a_command_only_when_it_reads_like_one(tmp_path: Path) -> None:
    blocks = page(tmp_path, "```\ngdro app --root x\n```\n```\npython 3.11.7, numpy 2.4.6\n```\n```\na -> b\n```\n")
    assert [b.text for b in blocks] == ["gdro app --root x"]


@pytest.mark.parametrize("directive, message", [
    ('<!-- doc-test: frobnicate -->', "unknown doc-test word 'frobnicate'"),
    ('<!-- doc-test: sub "nowhere" "x" -->', "sub 'nowhere' does not occur"),
    ('<!-- doc-test: append "gdro eval" "x" -->', "no command starts with 'gdro eval'"),
    ('<!-- doc-test: gpu -->', "a gpu block must run as a dry run"),
    ('<!-- doc-test: cluster validated-by "tests/nope.py::test_x" -->', "tests/nope.py, which does not exist"),
    ('<!-- doc-test: gpu validated-by "tests/scripts/test_doc_commands.py::test_nope" -->', "test_nope, which does not exist"),
    ('<!-- doc-test: sub "only-one" -->', "`sub` needs 2 argument(s)"),
    ('<!-- doc-test: env NOEQUALS -->', "env wants K=V"),
])
def test_a_bad_directive_names_the_file_line_and_the_problem(tmp_path: Path, directive: str, message: str) -> None:
    with pytest.raises(dc.DocTestError, match=r"docs/p\.md:2: .*" + __import__("re").escape(message)):
        page(tmp_path, f"{directive}\n```bash\ngdro simulate\n```\n")


def test_a_gpu_block_validated_by_an_existing_test_is_counted_apart(tmp_path: Path) -> None:
    (block,) = page(tmp_path, '<!-- doc-test: cluster validated-by '
                              '"tests/scripts/test_doc_commands.py::test_pip_install_becomes_a_dry_run" -->\n'
                              "```bash\nbash real_runs/verl/configs/x.sh\n```\n")
    assert block.kind == "cluster: validated by a test"
    assert dc.counts([block]) == {"run": 0, "dry": 0, "validated": 1, "skipped": 0}


def test_the_exit_status_decides_and_a_server_passes_while_it_is_up(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()

    def run(text: str, directive: str = "") -> bool:
        (block,) = page(tmp_path, f"{directive}\n```bash\n{text}\n```\n")
        ok, out, _ = dc.run_block(block, tmp_path, home, timeout_s=20)
        return ok

    assert run("true && echo $GDRO_DATA | grep -q tests/fixtures/data")
    assert not run("true\nfalse\ntrue")  # set -e: a failing line fails the block
    assert not run("false | true")  # pipefail
    assert run("sleep 30", "<!-- doc-test: server 1 -->")
    assert not run("exit 3", "<!-- doc-test: server 5 -->")  # a server that dies is a failure
    assert run('test "$MY_K" = v', "<!-- doc-test: env MY_K=v -->")


def test_the_readme_table_commands_are_parsed_by_the_real_cli(tmp_path: Path) -> None:
    found = dict((cmd, where) for where, cmd in dc.table_commands())
    assert any(cmd.startswith("gdro simulate") for cmd in found)
    ok, message = dc.check_table_command("README.md:1", "gdro simulate --steps 4", ROOT)
    assert ok, message
    ok, message = dc.check_table_command("README.md:1", "gdro simulate --no-such-flag 4", ROOT)
    assert not ok and "does not parse" in message
    ok, message = dc.check_table_command("README.md:1", "bash scripts/nope.sh", ROOT)
    assert not ok and "does not exist" in message


def test_the_paper_page_holds_the_reports_claims_and_the_check_sees_an_edit(tmp_path: Path, monkeypatch) -> None:
    assert claims.main(["--check"]) == 0
    page_copy = tmp_path / "paper.md"
    text = claims.PAGE.read_text()
    verdict = "**direction only, opposite**"
    assert verdict in text
    page_copy.write_text(text.replace(verdict, "**reproduced**", 1))
    monkeypatch.setattr(claims, "PAGE", page_copy)
    assert claims.main(["--check"]) == 1
    assert claims.main([]) == 0 and page_copy.read_text() == text


def test_parse_only_stops_before_anything_runs_and_train_overrides_resolve() -> None:
    ok, message = dc.check_table_command("README.md:1", "gdro train tiny-cpu method.name=rollout_gdro", ROOT)
    assert ok, message
    ok, message = dc.check_table_command("README.md:1", "gdro train tiny-cpu method.nosuch=1", ROOT)
    assert not ok and "method" in message
    # a parser that parses intermixed arguments is stopped too: `gdro app` would start a server otherwise
    ok, message = dc.check_table_command("README.md:1", "gdro app gdro-runs/", ROOT)
    assert ok, message


# ----------------------------------------------------------------------------- commands that show nothing

def _runs_folder(path: Path, count: int) -> Path:
    """A folder holding ``count`` run directories (meta and config only: what the app's list reads)."""
    from gdro_lab.runformat.runlog import RunWriter

    path.mkdir(parents=True, exist_ok=True)
    for index in range(count):
        RunWriter(path / f"run{index}", {"method": {"name": "grpo"}, "seed": index}, 4, producer="tests").close()
    return path


def _scratch(tmp_path: Path) -> tuple[Path, Path]:
    """A scratch repository whose .venv is this checkout's (the real `gdro` on PATH), and a HOME."""
    repo, home = tmp_path / "repo", tmp_path / "home"
    repo.mkdir()
    home.mkdir()
    (repo / ".venv").symlink_to(ROOT / ".venv")
    return repo, home


def test_a_command_that_shows_too_few_runs_or_lacks_its_expected_text_fails(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()

    def run(text: str, directive: str) -> tuple[bool, str]:
        (block,) = page(tmp_path, f"{directive}\n```bash\n{text}\n```\n")
        ok, out, _ = dc.run_block(block, tmp_path, home, timeout_s=20)
        return ok, out

    assert run('echo "3 runs listed under x"', "<!-- doc-test: runs 3 -->")[0]
    ok, out = run('echo "0 runs listed under x"', "<!-- doc-test: runs 1 -->")
    assert not ok and "shows 0 run(s) where at least 1 are expected" in out
    ok, out = run("echo nothing to count", "<!-- doc-test: runs 1 -->")
    assert not ok and "shows no count of runs" in out
    assert run("echo 7 figures in out", '<!-- doc-test: expect "figures in" -->')[0]
    ok, out = run("echo skipped", '<!-- doc-test: expect "figures in" -->')
    assert not ok and "does not show 'figures in'" in out
    with pytest.raises(dc.DocTestError, match="runs wants a number of runs"):
        page(tmp_path, '<!-- doc-test: runs many -->\n```bash\ngdro app x\n```\n')


def test_a_gdro_app_block_fails_when_the_app_would_list_no_run(tmp_path: Path) -> None:
    """`gdro app FOLDER` starts a server whatever FOLDER holds; the runner lists what the app would show
    (`--list-runs`, the app's data layer) and fails the block when that is no run."""
    repo, home = _scratch(tmp_path)
    _runs_folder(repo / "runs", 2)
    (repo / "empty").mkdir()
    assert dc.listing_commands("nice -n 5 gdro app runs \\\n  --port 9  # c\necho\n.venv/bin/gdro app x") == [
        "nice -n 5 gdro app runs --port 9 --list-runs", ".venv/bin/gdro app x --list-runs"]

    def run(text: str, directive: str = "") -> tuple[bool, str]:
        (block,) = page(tmp_path, f"{directive}\n```bash\n{text}\n```\n")
        ok, out, _ = dc.run_block(block, repo, home, timeout_s=120)
        return ok, out

    assert run("gdro app runs --list-runs")[0]
    ok, out = run("gdro app empty --list-runs")
    assert not ok and "0 runs listed under empty" in out and "showed nothing" in out
    assert not run("gdro app runs --list-runs", "<!-- doc-test: runs 3 -->")[0]
    ok, out = run("gdro app empty --print-command")  # exits 0 and prints a command: the listing decides
    assert not ok and "[doc-test: $ gdro app empty --print-command --list-runs]" in out
    assert run("gdro app runs --print-command")[0]
    assert run("gdro app empty --print-command", "<!-- doc-test: runs 0 -->")[0]


def test_the_readmes_app_example_must_list_runs(tmp_path: Path) -> None:
    (where, command), = [(w, c) for w, c in dc.table_commands() if c.startswith("gdro app")]
    assert command == "gdro app gdro-runs/"
    repo, home = _scratch(tmp_path)
    (repo / "gdro-runs").mkdir()
    ok, message = dc.check_table_app_lists_runs(where, command, repo, home)
    assert not ok and "lists no run: 0 runs listed under gdro-runs" in message
    _runs_folder(repo / "gdro-runs" / "study", 2)
    assert dc.check_table_app_lists_runs(where, command, repo, home) == (True, "")
