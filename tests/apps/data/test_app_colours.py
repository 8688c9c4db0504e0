"""Line styles of many groups: up to 20 told apart by colour and dash, the paper's methods in their own
colours, beyond that the top k and one muted "others"."""

from __future__ import annotations

import itertools

import numpy as np

from apps.data import colours


def _lab(colour: str) -> np.ndarray:
    """CIELAB coordinates of a hex colour (D65), for a perceptual distance."""
    rgb = np.array([int(colour[index:index + 2], 16) / 255 for index in (1, 3, 5)])
    linear = np.where(rgb > 0.04045, ((rgb + 0.055) / 1.055) ** 2.4, rgb / 12.92)
    xyz = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]]) @ linear
    f = np.cbrt(np.maximum(xyz / np.array([0.95047, 1.0, 1.08883]), 0.008856))
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def test_twenty_groups_get_twenty_distinct_styles_and_distinct_colours() -> None:
    groups = [f"group {index}" for index in range(20)]
    styles = colours.group_styles(groups, {})
    assert len(set(styles.values())) == 20 and len({colour for colour, _ in styles.values()}) == 20
    assert sum(1 for _, dash in styles.values() if dash) == 10, "the second ten dashed too"
    distances = [np.linalg.norm(_lab(a) - _lab(b)) for a, b in itertools.combinations(colours.STYLE_COLOURS, 2)]
    assert min(distances) > 25, "no two colours (bands have no dash) look alike"
    assert all(_lab(colour)[0] < 80 for colour in colours.STYLE_COLOURS), "none too pale to see on white"


def test_the_papers_methods_keep_their_colours_and_the_rest_are_others() -> None:
    method_of = {"grpo lr×1": "grpo", "grpo lr×2": "grpo", "prompt_gdro lr×1": "prompt_gdro", "mine": "mine"}
    styles = colours.group_styles(list(method_of), method_of)
    assert styles["grpo lr×1"] == (colours.METHOD_COLOURS["grpo"], ())
    assert styles["prompt_gdro lr×1"] == (colours.METHOD_COLOURS["prompt_gdro"], ())
    assert len(set(styles.values())) == 4
    assert colours.METHOD_COLOURS["rollout_gdro"] not in {colour for colour, _ in styles.values()}, \
        "another method's colour only when no other solid colour is left"
    many = [f"g{index}" for index in range(25)]
    styles = colours.group_styles(many, {}, top_k=7)
    assert len({styles[group] for group in many[:7]}) == 7
    assert {styles[group] for group in many[7:]} == {(colours.OTHERS_COLOUR, colours.OTHERS_DASH)}
    assert colours.rank_groups(["a", "b", "c"], {"a": 0.1, "b": float("nan"), "c": 0.5}) == ["c", "a", "b"]
