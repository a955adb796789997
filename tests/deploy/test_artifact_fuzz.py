"""A seeded slice of the loader fuzzer (`python -m dy2st.testing.artifact_fuzz` runs the full
campaign): every corruption of a valid artifact loads to bit-identical outputs or is refused
with a Dy2StaticError."""

import pytest

from dy2st.testing import artifact_fuzz


def test_seeded_slice_every_kind(tmp_path):
    report = artifact_fuzz.campaign(cases=60, seed=14, timeout=60.0, workdir=str(tmp_path))
    assert report.failures() == [], report.text()
    assert set(report.counts()) == set(artifact_fuzz.KINDS)  # each kind drawn at least once
    assert sum(c["refused"] for c in report.counts().values()) >= 40


@pytest.mark.parametrize("kind", sorted(artifact_fuzz.KINDS))
def test_each_kind_once(tmp_path, kind):
    report = artifact_fuzz.campaign(cases=2, seed=3, workdir=str(tmp_path), kinds=[kind])
    assert report.failures() == [], report.text()


def test_the_command_line(tmp_path, capsys):
    assert artifact_fuzz.main(["--cases", "4", "--seed", "1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("4 cases in") and "total" in out and "raw-exception" in out
