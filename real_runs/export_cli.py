"""`gdro export RUN_DIR[/checkpoints/step_N] OUT [--dtype bfloat16]`: a trained model as a Hugging Face folder.

The export itself is :func:`real_runs.export.export`; here the arguments are parsed and checked (the
checkpoint first, then OUT: a new or empty folder, nothing touched otherwise). Bad input is one line
on stderr and exit status 2; set ``GDRO_DEBUG=1`` for the traceback.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Sequence

from studykit.args import OneLineParser, new_folder_problem
from real_runs.export import ExportError, check_dtype, export, find_checkpoint


def main(argv: Sequence[str] | None = None) -> int:
    parser = OneLineParser(prog="gdro export", description=__doc__.splitlines()[0].split(": ", 1)[1])
    parser.add_argument("source", help="RUN_DIR (its newest checkpoint) or RUN_DIR/checkpoints/step_N")
    parser.add_argument("out", help="new folder for the Hugging Face model")
    parser.add_argument("--dtype", default=None, help="float32 (as trained, default), bfloat16 or float16")
    args = parser.parse_args(argv)
    try:
        check_dtype(args.dtype)
        find_checkpoint(args.source)
        problem = new_folder_problem(args.out)
        if problem is not None:
            raise ExportError(f"OUT {args.out} {problem}: choose a new folder for the model (nothing was touched)")
        print(f"gdro export: writing {args.out}", flush=True)  # the first line, before seconds of copying
        target = export(args.source, args.out, args.dtype)
    except OSError as err:
        if os.environ.get("GDRO_DEBUG"):
            raise
        where = f"OUT {args.out}" if str(err.filename or "").startswith(str(Path(args.out).parent)) else err.filename
        print(f"gdro export: {where} cannot be written or read ({err.strerror or err}): check the path and its "
              "permissions (nothing was exported)", file=sys.stderr)
        return 2
    except ValueError as err:
        if os.environ.get("GDRO_DEBUG"):
            raise
        print(f"gdro export: {' '.join(str(err).split())}", file=sys.stderr)
        return 2
    print(f"gdro export: wrote {target} (load it with gdro eval --model {target}, "
          "AutoModelForCausalLM.from_pretrained or vLLM)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
