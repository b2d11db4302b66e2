"""The balanced spec sampler and the coverage figures."""

from __future__ import annotations

from collections import Counter

import pytest

from coworkgym.families import FAMILIES, family_for
from coworkgym.spec import TaskLabels
from coworkgym.taxonomy import (
    SampledSpec,
    cell_of,
    coverage,
    load_taxonomy,
    sample_specs,
    served_grid,
    validate_labels,
)


def counts_per_cell(specs: list[SampledSpec]) -> Counter[tuple[str, str]]:
    return Counter(spec.cell for spec in specs)


def test_the_same_seed_gives_the_same_specs() -> None:
    assert sample_specs(60, seed=3) == sample_specs(60, seed=3)


def test_another_seed_gives_other_specs() -> None:
    assert sample_specs(60, seed=3) != sample_specs(60, seed=4)


def test_a_shorter_run_is_a_prefix_of_a_longer_one() -> None:
    assert sample_specs(140, seed=1)[:50] == sample_specs(50, seed=1)


@pytest.mark.parametrize("served_only", [True, False])
@pytest.mark.parametrize("count", [0, 1, 140, 641])
def test_cells_differ_by_at_most_one(count: int, served_only: bool) -> None:
    tax = load_taxonomy()
    grid = len(served_grid()) if served_only else len(tax.scenarios) * len(tax.capabilities)
    specs = sample_specs(count, seed=11, served_only=served_only)
    assert len(specs) == count
    cells = counts_per_cell(specs)
    if count:
        assert max(cells.values()) - min(cells.values()) <= 1
        assert len(cells) == min(count, grid)
        assert max(cells.values()) == -(-count // grid)  # the quota: ceil(count / cells)


def test_140_specs_over_a_14_cell_grid_are_10_per_cell() -> None:
    tax = load_taxonomy()
    domains = list(tax.scenarios)[:7]
    capabilities = ["data_analysis", "reconciliation"]
    specs = sample_specs(
        140, seed=5, domains=domains, capabilities=capabilities, served_only=False
    )
    cells = counts_per_cell(specs)
    assert set(cells) == {(d, c) for d in domains for c in capabilities}
    assert set(cells.values()) == {10}


def test_every_cell_of_the_whole_grid_yields_valid_specs() -> None:
    tax = load_taxonomy()
    grid = len(tax.scenarios) * len(tax.capabilities)
    specs = sample_specs(2 * grid, seed=7, served_only=False)
    assert all(validate_labels(s.labels) == [] for s in specs)
    assert set(counts_per_cell(specs).values()) == {2}


def test_only_served_cells_are_drawn_and_each_equally() -> None:
    served = served_grid()
    specs = sample_specs(4 * len(served), seed=7)
    assert set(counts_per_cell(specs)) == set(served)
    assert set(counts_per_cell(specs).values()) == {4}
    assert all(validate_labels(s.labels) == [] for s in specs)


def test_specs_are_consistent_with_their_cell_and_turns() -> None:
    tax = load_taxonomy()
    for spec in sample_specs(200, seed=2, turns=[1, 3]):
        domain, capability = spec.cell
        assert spec.labels.scenario in tax.leaves_of(domain)
        assert spec.labels.capabilities[0] == capability
        assert spec.labels.user_role in tax.scenarios[domain].roles
        assert spec.turns in (1, 3)
        task = spec.task_spec()  # a valid TaskSpec for the synth loop
        assert (task.seed, task.turns, task.family) == (spec.seed, spec.turns, spec.family)


def test_served_specs_carry_their_familys_labels() -> None:
    for spec in sample_specs(300, seed=9):
        assert spec.family is not None
        family = FAMILIES[spec.family]
        assert family.serves(spec.labels.scenario, spec.labels.capabilities[0], spec.turns)
        assert set(spec.labels.capabilities) == set(family.capabilities_at(spec.turns))
        assert spec.labels.deliverables == list(family.deliverables)
        assert spec.labels.modality == list(family.modalities)
        assert spec.labels.safety == list(family.safety)


def test_whole_grid_sampling_reaches_unserved_leaves_without_a_family() -> None:
    served = {s for f in FAMILIES.values() for s in f.scenarios}
    specs = sample_specs(300, seed=9, served_only=False)
    unserved = [s for s in specs if s.labels.scenario not in served]
    assert unserved and all(s.family is None for s in unserved)
    assert len({s.labels.scenario for s in specs}) > 40
    for spec in specs:  # where a family is named, it serves the labels
        if spec.family is not None:
            family_for(
                spec.labels.scenario, spec.labels.capabilities, spec.turns, family=spec.family
            )


def test_every_served_spec_is_accepted_by_the_family_selection() -> None:
    for spec in sample_specs(100, seed=1):
        chosen = family_for(spec.labels.scenario, spec.labels.capabilities, spec.turns)
        assert chosen.serves(spec.labels.scenario, spec.labels.capabilities[0], spec.turns)


def test_a_capability_a_later_turn_exercises_needs_the_turns() -> None:
    specs = sample_specs(200, seed=3, turns=[1])
    assert all(s.turns == 1 for s in specs)
    assert not {"requirement_tracking", "dependency_tracking"} & {
        c for s in specs for c in s.labels.capabilities
    }
    specs = sample_specs(200, seed=3)
    tracked = [s for s in specs if s.labels.capabilities[0] == "requirement_tracking"]
    assert tracked and all(s.turns == 3 for s in tracked)


def test_the_sampler_varies_the_other_dimensions() -> None:
    specs = sample_specs(400, seed=4)
    assert {s.labels.difficulty for s in specs} == {"easy", "medium", "hard"}
    assert {s.turns for s in specs} == {1, 2, 3}
    assert len({d for s in specs for d in s.labels.deliverables}) >= 6
    assert len({m for s in specs for m in s.labels.modality}) >= 5
    assert len({x for s in specs for x in s.labels.safety}) >= 3
    grid = sample_specs(400, seed=4, served_only=False)
    assert len({d for s in grid for d in s.labels.deliverables}) >= 8
    assert len({x for s in grid for x in s.labels.safety}) >= 5


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"turns": 4}, "turns"),
        ({"turns": []}, "turns"),
        ({"domains": ["finanse"]}, "domains: 'finanse'"),
        ({"capabilities": []}, "empty"),
    ],
)
def test_bad_arguments_are_rejected(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        sample_specs(5, 0, **kwargs)  # type: ignore[arg-type]


# --- coverage -----------------------------------------------------------------------------


def test_a_balanced_sample_has_perfect_balance_figures() -> None:
    cov = coverage(sample_specs(140, seed=0, served_only=False))
    assert cov.total == 140
    assert cov.filled == 140
    assert cov.max_min_ratio == 1.0
    assert cov.cv == 0.0
    assert cov.gini == pytest.approx(0.0)
    assert "140 specs in 140/" in cov.summary()


def unbalanced() -> list[TaskLabels]:
    def one(capability: str) -> TaskLabels:
        return TaskLabels(
            capabilities=[capability, "aggregation"],
            scenario="data_analysis/reporting/periodic_report",
        )

    return [one("data_analysis")] * 3 + [one("data_cleaning")]


def test_coverage_counts_primary_capabilities_and_measures_imbalance() -> None:
    cov = coverage(unbalanced())
    assert cov.counts == {
        ("data_analysis", "data_analysis"): 3,
        ("data_analysis", "data_cleaning"): 1,
    }
    assert cov.max_min_ratio == 3.0
    assert cov.cv == pytest.approx(0.5)
    assert cov.gini == pytest.approx(0.25)
    assert cov.by_domain() == {"data_analysis": 4}
    assert cov.by_capability() == {"data_analysis": 3, "data_cleaning": 1}


def test_coverage_can_count_every_listed_capability() -> None:
    cov = coverage(unbalanced(), all_capabilities=True)
    assert cov.counts[("data_analysis", "aggregation")] == 4
    assert (cov.specs, cov.total) == (4, 8)
    assert cov.summary().startswith("4 specs in 3/")


def test_coverage_of_nothing_is_well_defined() -> None:
    cov = coverage([])
    assert (cov.specs, cov.filled, cov.max_min_ratio, cov.cv, cov.gini) == (0, 0, 1.0, 0.0, 0.0)
    assert cov.summary().startswith("0 specs")


def test_cell_of_uses_the_domain_and_primary_capability() -> None:
    assert cell_of(unbalanced()[0]) == ("data_analysis", "data_analysis")


def test_with_no_families_only_whole_grid_sampling_works() -> None:
    with pytest.raises(ValueError, match="served_only=False"):
        sample_specs(5, seed=2, families={})


def test_with_no_families_every_leaf_is_fair_game() -> None:
    specs = sample_specs(100, seed=2, families={}, served_only=False)
    assert all(s.family is None for s in specs)
    assert all(validate_labels(s.labels) == [] for s in specs)
