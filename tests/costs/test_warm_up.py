"""The first run of a report after runs of it the other way is marked as warming that way up."""

from __future__ import annotations

from sketch_core.costs.warm_up import WayChanges


def test_only_the_first_run_after_a_switch_warms_up() -> None:
    changes = WayChanges()
    # sketched, sketched, plain, plain, plain, sketched, plain
    runs = [True, True, False, False, False, True, False]
    assert [changes.warms_up("report", sketched) for sketched in runs] == [
        False,  # a report's first run here: nothing to compare with
        False,
        True,
        False,
        False,
        True,
        True,
    ]


def test_reports_are_followed_apart() -> None:
    changes = WayChanges()
    assert not changes.warms_up("a", True)
    assert not changes.warms_up("b", False)  # another report's first run
    assert not changes.warms_up("a", True)
    assert changes.warms_up("b", True)


def test_only_the_most_recently_run_reports_are_remembered() -> None:
    changes = WayChanges(kept=2)
    changes.warms_up("a", True)
    changes.warms_up("b", True)
    changes.warms_up("a", True)  # "a" is now the most recent: "b" goes first
    changes.warms_up("c", True)
    assert changes.warms_up("a", False)  # remembered
    assert not changes.warms_up("b", False)  # forgotten: a first run again
