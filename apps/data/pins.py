"""Names and tags a user pins to runs, kept beside the app: never in a run folder.

One JSON file in the app's state folder (``$GDRO_APP_STATE``, else ``$XDG_STATE_HOME/gdro-lab``,
else ``~/.local/state/gdro-lab``), keyed by the run folder's absolute path; atomic writes; an
unreadable file counts as no pins and is not overwritten. No Streamlit here. Format:
docs/app-data-notes.md#apps-data-pins.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

STATE_ENV = "GDRO_APP_STATE"
PINS_FILE = "pins.json"
VERSION = 1


class PinError(Exception):
    """Pins cannot be saved; the message is one line naming the problem and the fix."""


@dataclass(frozen=True)
class Pin:
    """A user's display name (empty: keep the automatic one) and tags for one run."""

    name: str = ""
    tags: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.name and not self.tags


def state_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The app's state folder (see the module docstring)."""
    environ = os.environ if environ is None else environ
    if environ.get(STATE_ENV):
        return Path(environ[STATE_ENV]).expanduser()
    base = Path(environ["XDG_STATE_HOME"]).expanduser() if environ.get("XDG_STATE_HOME") else \
        Path.home() / ".local" / "state"
    return base / "gdro-lab"


def pins_path(environ: Mapping[str, str] | None = None) -> Path:
    """The pins file."""
    return state_dir(environ) / PINS_FILE


def pin_key(run_path: Path) -> str:
    """A run's key in the pins file: its absolute folder path."""
    return str(Path(run_path).expanduser().resolve())


def tags_from_text(text: str) -> tuple[str, ...]:
    """Tags typed as text, separated by commas: trimmed, empty ones dropped, duplicates once."""
    return tuple(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))


def _read(path: Path) -> dict[str, Any] | None:
    """The file's JSON object, {} when there is no file, None when it cannot be read."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError):
        return None
    return raw if isinstance(raw, dict) else None


def load_pins(path: Path) -> dict[str, Pin]:
    """Run key -> pin; {} when the file is absent or cannot be read."""
    raw = _read(path) or {}
    runs = raw.get("runs")
    if not isinstance(runs, dict):
        return {}
    out = {}
    for key, value in runs.items():
        if not isinstance(value, dict):
            continue
        raw_name = value.get("name")
        name = raw_name if isinstance(raw_name, str) else ""
        tags = tuple(str(tag) for tag in value.get("tags", []) if isinstance(tag, str) and tag.strip()) \
            if isinstance(value.get("tags"), list) else ()
        pin = Pin(name.strip(), tags)
        if not pin.empty:
            out[str(key)] = pin
    return out


def save_pin(path: Path, run_path: Path, pin: Pin) -> dict[str, Pin]:
    """Pin ``pin`` to the run at ``run_path`` (an empty pin removes it); returns every pin.

    Raises :class:`PinError` when the state folder lies inside the run folder or the file
    cannot be written, or when an existing pins file cannot be read (it is left as it is)."""
    if path.resolve().is_relative_to(run_path.resolve()):
        raise PinError(f"the app's state folder {path.parent} is inside the run folder {run_path}: "
                       f"set {STATE_ENV} to a folder outside the runs")
    raw = _read(path)
    if raw is None:
        raise PinError(f"{path} cannot be read as JSON: fix or remove it, then pin again")
    found = raw.get("runs")
    runs: dict[str, Any] = found if isinstance(found, dict) else {}
    key = pin_key(run_path)
    if pin.empty:
        runs.pop(key, None)
    else:
        runs[key] = {"name": pin.name.strip(), "tags": list(pin.tags)}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(prefix=".pins-", suffix=".json", dir=path.parent)
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump({"version": VERSION, "runs": runs}, out, indent=1, sort_keys=True)
        os.replace(temporary, path)
    except OSError as err:
        raise PinError(f"cannot write {path} ({err.strerror or err}): set {STATE_ENV} to a writable folder") from None
    return load_pins(path)
