#!/usr/bin/env bash
# Mutation testing of one file of the training path with mutmut (pinned in the `dev` extra; NOT
# run in CI: minutes to hours per file on 2 cores). Usage:
#
#   bash scripts/mutation.sh real_runs/loss.py            # mutate, run, print the score + survivors
#   bash scripts/mutation.sh real_runs/loss.py show NAME  # the diff of one mutant (mutmut show)
#   bash scripts/mutation.sh real_runs/loss.py survivors  # the changed line of every surviving mutant
#   bash scripts/mutation.sh real_runs/ppo.py 'real_runs.ppo.x_ppo_update*'   # only these mutants (fnmatch)
#   MUTATION_TESTS="tests/a.py tests/b.py::test_x" bash scripts/mutation.sh FILE ...  # other tests than below
#   bash scripts/mutation.sh real_runs/train.py sample 150 2026 'real_runs.train.x__loop__*'   # a random sample:
#       N mutants drawn uniformly (Python's random.Random(SEED).sample) from the file's mutants whose names
#       match the patterns, names sorted naturally first; the drawn names go to $work/sample.txt and are run
#
# The training path's numbers in docs/mutation-testing.md were measured on real_runs/train.py before it was split
# (its functions now live in train.py, train_setup.py, ppo.py, step_scalars.py and eval_scoring.py); the
# same selections, file by file:
# the update and the record numbers (unit tests only; the end-to-end runs would cost minutes per mutant):
#   MUTATION_TESTS="$(bash scripts/mutation.sh real_runs/ppo.py units)" bash scripts/mutation.sh real_runs/ppo.py
#   MUTATION_TESTS="$(bash scripts/mutation.sh real_runs/ppo.py units)" bash scripts/mutation.sh real_runs/step_scalars.py
# the step loop (then `_loop`, `_train`, `main`: 908 mutants, seconds each end to end; now train.py's `main`,
# `_loop`, `_step`, `_update` and train_setup.py's `build`, `open_run_dir`): a random sample
# against the fast in-process runs (none may start the math reward's process pool: mutmut's forked workers
# cannot, and every mutant reaching such a test is then reported killed):
#   T=tests/real_runs MUTATION_TESTS="$T/test_train_invariants.py $T/test_train_arena.py $T/test_train_loop_wiring.py
#     $T/test_train.py::test_trainer_skips_the_old_logprob_pass_only_on_policy_and_logs_the_same_run
#     $T/test_train.py::test_gradient_checkpointing_and_micro_batching_do_not_change_the_run" \
#   bash scripts/mutation.sh real_runs/train.py sample 150 2026 'real_runs.train.x_*'
#   (the same MUTATION_TESTS) bash scripts/mutation.sh real_runs/train_setup.py sample 150 2026 \
#     'real_runs.train_setup.x_build__*' 'real_runs.train_setup.x_open_run_dir__*'
# the setup functions (then 189 mutants, about a minute with 2 test processes; the three test_train_cli tests
# need the data): train_setup.py's _load_model, _load_data, check_resumable, load_run_config, _new_run, make_rewards,
# _autocast, and eval_scoring.py's evaluate:
#   T=tests/real_runs MUTATION_TESTS="$T/test_train_setup.py $T/test_train_loop_wiring.py $T/test_train_invariants.py
#     $T/test_train_cli.py::test_resume_of_a_foreign_folder $T/test_train_cli.py::test_a_finished_run_is_complete_and_cannot_be_resumed
#     $T/test_train_cli.py::test_a_second_writer_is_refused_while_the_first_lives_and_welcome_after" MUTATION_CHILDREN=2 \
#   bash scripts/mutation.sh real_runs/train_setup.py 'real_runs.train_setup.x__load_model*' 'real_runs.train_setup.x__load_data*' \
#     'real_runs.train_setup.x_check_resumable*' 'real_runs.train_setup.x_load_run_config*' 'real_runs.train_setup.x__new_run*' \
#     'real_runs.train_setup.x_make_rewards*' 'real_runs.train_setup.x__autocast*'
#   (the same MUTATION_TESTS) bash scripts/mutation.sh real_runs/eval_scoring.py 'real_runs.eval_scoring.x_evaluate*'
#
# Files and the tests each is run against (only the tests that reach a mutated function run):
#   gdro_lab/functional/update_rules.py   tests/gdro_lab/functional/test_update_rules.py, test_prompt_gdro.py, test_rollout_gdro.py, test_arm_updates.py
#   real_runs/loss.py          tests/real_runs/test_loss.py + test_train_invariants.py's update tests
#   real_runs/batching.py      tests/real_runs/test_train_invariants.py's update/mask tests + test_train.py's unit tests
#   real_runs/{train,train_setup,ppo,step_scalars}.py   tests/real_runs/test_train_invariants.py + test_train.py's short runs
#   real_runs/eval_scoring.py  tests/real_runs/test_train_setup.py, test_eval_cli.py
#   real_runs/engines/hf.py    tests/real_runs/engines/test_engine_hf.py, test_engine_hf_units.py, test_train_invariants.py's temperature test
#   real_runs/rewards/{math,choice}.py   tests/real_runs/rewards/test_reward.py (its 10,000-response stress test excluded)
#   real_runs/rewards/{verdicts,math_task,pool}.py   test_reward_inprocess.py + test_reward.py -m "not slow"
#                              (math_task and the pool's worker loop run in worker processes, which mutmut's
#                              call tracing does not see: test_reward_inprocess.py calls them in-process)
#   real_runs/rewards/toy.py   tests/real_runs/rewards/test_toy_reward.py, test_train_setup.py (tiny-cpu's toy reward)
#   gdro_lab/**.py (the rest)  tests/gdro_lab without the loop replay (a replay hash catches any change to a
#                              number but names no behaviour: a mutant must be killed by a test that checks a value)
#   simulators/calibrate/*.py  tests/simulators/calibrate;  simulators/**.py (the rest): tests/simulators -m "not slow"
#
# The repository (tracked + untracked, not ignored files) is copied to $MUTATION_DIR/<file stem>
# (default /tmp/gdro-mutation) and mutmut runs there, so the work tree gets no mutants/ folder.
# Runs under `nice -n 10`, OMP_NUM_THREADS=1, $MUTATION_CHILDREN parallel test processes (default 1).
# Scores per file and the survivors' justifications: docs/mutation-testing.md.
set -euo pipefail
target=${1:?usage: bash scripts/mutation.sh FILE [show MUTANT | results | survivors]}
shift
repo=${REPO:-$(cd "$(dirname "$0")/.." && pwd)}
python=${PYTHON:-$repo/.venv/bin/python}     # a worktree without its own .venv: PYTHON=/path/to/venv/bin/python
[ -x "$python" ] || python=python3
T=tests/real_runs
case "$target" in
  gdro_lab/functional/update_rules.py)
    tests=(tests/gdro_lab/functional/test_update_rules.py tests/gdro_lab/controllers/test_prompt_gdro.py tests/gdro_lab/controllers/test_rollout_gdro.py tests/gdro_lab/controllers/test_arm_updates.py) ;;
  real_runs/loss.py)
    tests=("$T/test_loss.py" "$T/test_train_invariants.py::test_multi_step_ppo_update_uses_the_stored_old_logprobs"
           "$T/test_train_invariants.py::test_every_response_token_gets_its_gradient_including_the_last_and_a_single_one") ;;
  real_runs/batching.py)
    tests=("$T/test_train_invariants.py::test_multi_step_ppo_update_uses_the_stored_old_logprobs"
           "$T/test_train_invariants.py::test_response_mask_covers_exactly_the_generated_tokens_including_a_one_token_response"
           "$T/test_train_invariants.py::test_every_response_token_gets_its_gradient_including_the_last_and_a_single_one"
           "$T/test_train.py::test_data_order_is_seeded_and_resumable"
           "$T/test_train.py::test_micro_batches_respect_the_token_budget_and_cover_every_sample"
           "$T/test_train.py::test_response_logprobs_equal_a_full_forward_pass"
           "$T/test_train.py::test_on_policy_update_equals_the_update_with_recomputed_old_logprobs") ;;
  real_runs/train.py|real_runs/train_setup.py|real_runs/ppo.py|real_runs/step_scalars.py)
    tests=("$T/test_train_invariants.py" "$T/test_train.py::test_on_policy_update_only_with_one_optimizer_step_per_batch_and_no_dropout"
           "$T/test_train.py::test_on_policy_update_equals_the_update_with_recomputed_old_logprobs"
           "$T/test_train.py::test_ppo_update_without_old_logprobs_refuses_several_optimizer_steps"
           "$T/test_train.py::test_trainer_skips_the_old_logprob_pass_only_on_policy_and_logs_the_same_run"
           "$T/test_train.py::test_gradient_checkpointing_and_micro_batching_do_not_change_the_run") ;;
  real_runs/eval_scoring.py)
    tests=("$T/test_train_setup.py" "$T/test_eval_cli.py") ;;
  real_runs/engines/hf.py)
    tests=("$T/engines/test_engine_hf.py" "$T/engines/test_engine_hf_units.py"
           "$T/test_train_invariants.py::test_hf_engine_samples_follow_softmax_of_logits_over_temperature") ;;
  real_runs/rewards/math.py|real_runs/rewards/choice.py)
    tests=("$T/rewards/test_reward.py" "--deselect" "$T/rewards/test_reward.py::test_ten_thousand_responses_without_a_hang") ;;
  real_runs/rewards/verdicts.py|real_runs/rewards/math_task.py|real_runs/rewards/pool.py)
    # The in-process tests (math_task and the worker loop run in pytest's main thread, where mutmut traces
    # them) + test_reward.py without its three slow MATH-500-wide tests (minutes per surviving mutant).
    tests=("$T/rewards/test_reward_inprocess.py" "$T/rewards/test_reward.py" "-m" "not slow") ;;
  real_runs/rewards/toy.py)
    tests=("$T/rewards/test_toy_reward.py" "$T/test_train_setup.py") ;;
  gdro_lab/*.py)      # the rest of the core: the whole package's tests (the step, the method table, duet, ...)
    tests=(tests/gdro_lab "--deselect" tests/gdro_lab/test_loop_replay.py) ;;
  simulators/calibrate/*.py)   # predict, its report and the other calibrate modules: the calibrate tests
    tests=(tests/simulators/calibrate) ;;
  simulators/*.py)
    tests=(tests/simulators "-m" "not slow") ;;
  *) echo "mutation.sh: no test selection for $target: add one to scripts/mutation.sh" >&2; exit 2 ;;
esac
train_units=("$T/test_train_scalars.py" "$T/test_update_reference.py"
             "$T/test_train_invariants.py::test_multi_step_ppo_update_uses_the_stored_old_logprobs"
             "$T/test_train_invariants.py::test_every_response_token_gets_its_gradient_including_the_last_and_a_single_one"
             "$T/test_train.py::test_on_policy_update_only_with_one_optimizer_step_per_batch_and_no_dropout"
             "$T/test_train.py::test_on_policy_update_equals_the_update_with_recomputed_old_logprobs"
             "$T/test_train.py::test_ppo_update_without_old_logprobs_refuses_several_optimizer_steps"
             "$T/test_train.py::test_ppo_update_micro_batches_sum_to_verls_loss_with_an_empty_response")
if [ "${1:-}" = "units" ]; then echo "${train_units[*]}"; exit 0; fi   # ppo.py's and step_scalars.py's unit tests (see the top)
if [ -n "${MUTATION_TESTS:-}" ]; then read -r -d "" -a tests <<< "$MUTATION_TESTS" || true; fi   # words over any lines

stem=$(basename "$target" .py)
work=${MUTATION_DIR:-/tmp/gdro-mutation}/$stem
if [ "${1:-}" = "show" ] || [ "${1:-}" = "results" ]; then
  cd "$work" && exec "$python" -m mutmut "$@"
fi
if [ "${1:-}" = "survivors" ]; then     # the changed lines of every surviving mutant
  cd "$work"
  for name in $("$python" -m mutmut results 2>/dev/null | awk -F: '/: survived/ {print $1}'); do
    "$python" -m mutmut show "$name" 2>/dev/null | grep '^[-+][^-+]' | sed "s|^|${name##*.x_} |"
  done
  exit 0
fi
rm -rf "$work" && mkdir -p "$work"
(cd "$repo" && git ls-files -co --exclude-standard -z | xargs -0 cp -P --parents -t "$work")
package=${target%%/*}
toml_list() { local out="" x; for x in "$@"; do out+="\"$x\", "; done; echo "[${out%, }]"; }
others=()
for dir in gdro_lab simulators apps gdro_cli real_runs studykit; do [ "$dir" = "$package" ] || others+=("$dir"); done
cat >> "$work/pyproject.toml" <<EOF

[tool.mutmut]
source_paths = ["$package"]
only_mutate = ["$target"]
also_copy = $(toml_list "${others[@]}" tests docs)   # docs: tests run the docs' examples
pytest_add_cli_args = ["-p", "no:cacheprovider", "-q"]
pytest_add_cli_args_test_selection = $(toml_list "${tests[@]}")
EOF
cd "$work"
if [ "${1:-}" = "sample" ]; then        # sample N SEED PATTERN...: generate the mutants, draw N of the matching ones
  n=${2:?usage: mutation.sh FILE sample N SEED PATTERN...}; seed=${3:?usage: mutation.sh FILE sample N SEED PATTERN...}
  shift 3
  "$python" - "$target" "$n" "$seed" "$@" > /dev/null <<'PY'
import fnmatch, json, random, re, sys
from pathlib import Path
from mutmut.__main__ import create_file_mutants   # what `mutmut run` does first; it then finds them made
target, n, seed, patterns = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
result = create_file_mutants(Path(target))
if result.error:
    raise result.error
names = json.loads(Path("mutants", target + ".meta").read_text())["exit_code_by_key"]
def natural(name):
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]
pool = sorted((k for k in names if any(fnmatch.fnmatchcase(k, p) for p in patterns)), key=natural)
drawn = sorted(random.Random(seed).sample(pool, min(n, len(pool))), key=natural)
Path("sample.txt").write_text("\n".join(drawn) + "\n")
print(f"== sample: {len(drawn)} of {len(pool)} mutants matching {patterns} (seed {seed}): sample.txt", file=sys.stderr)
PY
  mapfile -t sampled < sample.txt
  set -- "${sampled[@]}"
fi
echo "== mutmut run: $target in $work against ${tests[*]}"
nice -n 10 env OMP_NUM_THREADS=1 GDRO_DATA="${GDRO_DATA:-}" "$python" -m mutmut run --max-children "${MUTATION_CHILDREN:-1}" \
  "$@" || echo "(mutmut run exited $?)"
"$python" -m mutmut results --all true > results.txt 2>&1 || "$python" -m mutmut results > results.txt 2>&1 || true
echo "== score of $target (killed / total): see results.txt; survivors:"
grep -v ": killed" results.txt | sed 's/^/  /' || true
