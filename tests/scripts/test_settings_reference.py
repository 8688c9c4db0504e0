"""docs/settings.md is generated from the typed configs and cannot drift from them."""

from __future__ import annotations

import dataclasses

from scriptload import load_script


def test_the_page_matches_the_code(capsys):
    assert load_script("settings_reference").main(["--check"]) == 0, capsys.readouterr().out


def test_every_field_has_a_row_with_its_docstring():
    """Reference: dataclasses.fields of every section, and each field's docstring read from the source."""
    from real_runs.config import SECTIONS
    from simulators.simulator_config import SimConfig
    from simulators.world import WorldConfig
    from gdro_lab.controllers.registry import REGISTRY
    from simulators.knobs import CONTROLLER_NAMESPACES
    module = load_script("settings_reference")
    page = module.render()
    controllers = [(f"{ns}.", REGISTRY[family][name].config_class) for ns, (family, name) in CONTROLLER_NAMESPACES.items()]
    for prefix, cls in [*((f"{n}.", c) for n, c in SECTIONS.items()), ("", SimConfig), ("world.", WorldConfig),
                        *controllers]:
        docs = module.field_docs(cls)
        for field in dataclasses.fields(cls):
            row = next((line for line in page.splitlines() if line.startswith(f"| `{prefix}{field.name}` |")), None)
            assert row is not None, f"{prefix}{field.name} has no row"
            assert docs.get(field.name), f"{cls.__name__}.{field.name} has no docstring in the code"
            assert docs[field.name].replace("|", "\\|") in row


def test_check_fails_on_a_page_that_drifted(tmp_path, monkeypatch, capsys):
    module = load_script("settings_reference")
    stale = tmp_path / "settings.md"
    stale.write_text(module.render().replace("| `optim.lr` |", "| `optim.learning_rate` |"))
    monkeypatch.setattr(module, "PAGE", stale)
    monkeypatch.setattr(module, "ROOT", tmp_path)
    assert module.main(["--check"]) == 1
    assert "differs from the code" in capsys.readouterr().out
