"""Every claim of every study reads points its specs' sweeps have: each quantity's `at` names exactly one point of
the spec's full sweep (a path inside a swept value, as `flows[0].cc`, included), so a typo shows here and not as
a not-applicable verdict after a full run."""
import json

import pytest

from ccrig.analysis.claims import quantities
from ccrig.analysis.verdicts import Archive
from ccrig.experiments import spec as specmod
from ccrig.experiments.run import study_file as studymod


def _points(folder, name) -> list[dict]:
    raw, exp = specmod.load(studymod.spec_path(folder, name))
    # params as summary.json keeps them (JSON), with a stand-in result
    return [{"index": p.index, "params": json.loads(json.dumps(p.params)), "system": {}} for p in
            specmod.points(raw, exp, name)]


@pytest.mark.parametrize("name", sorted(studymod.find()))
def test_every_claim_names_one_point_of_its_spec(name):
    study, folder = studymod.load(name)
    archive = Archive({e.spec: _points(folder, e.spec) for e in study.specs})
    for claim in study.claims:
        along = getattr(claim.test, "along", None)
        for q in quantities(claim.test):
            if along is None:
                archive.point(q.spec, q.at)   # raises NotRun naming the problem
            else:   # a trend reads every point along its path
                assert [p for p in archive.points[q.spec] if along in p["params"]], (claim.id, along)
