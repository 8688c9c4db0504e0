"""The app's run list, names and damage flags on a generated root of 100+ runs (``root100``)."""

from __future__ import annotations

from root100 import Root100

from apps import listing


def test_the_generated_root_holds_what_a_user_has(root100: Root100) -> None:
    listed = listing.list_runs(root100.root)
    labels = [info.label for info in listed.runs]
    assert len(root100.study) == 100 and len(root100.sweep) == 12 and len(root100.train) == 3
    assert sorted(labels) == sorted(root100.readable), "every run is listed, the truncated one too"
    assert [info.label for info in listed.problems] == [root100.newer]
    assert not any(label.startswith(root100.not_a_run) for label in labels)
    producers = {info.meta["producer"] for info in listed.runs}
    assert producers == {"gdro-lab simulator", "gdro train"}, producers
