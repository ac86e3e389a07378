"""The check-config report: golden JSON and text, failure forms, exit codes, predicate summaries."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flowplex.diagnostics import CheckReport, check_config, describe_predicate
from flowplex.spec import PredicateSpec

DATA = Path(__file__).parent / "data"


@pytest.fixture
def in_data_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    """Run from the data folder so that ``path`` in the report is the bare file name."""
    monkeypatch.chdir(DATA)


@pytest.mark.usefixtures("in_data_dir")
def test_golden_json() -> None:
    report = check_config("golden.yaml")
    expected = json.loads((DATA / "golden.json").read_text())
    assert report.to_json() == expected
    json.dumps(report.to_json())  # plain JSON types only


@pytest.mark.usefixtures("in_data_dir")
def test_golden_text() -> None:
    assert check_config("golden.yaml").to_text() + "\n" == (DATA / "golden.txt").read_text()


@pytest.mark.usefixtures("in_data_dir")
def test_findings_make_the_exit_code_1_but_the_config_is_ok() -> None:
    report = check_config("golden.yaml")
    assert report.ok
    assert report.exit_code == 1


def test_a_clean_graph_exits_0(tmp_path: Path) -> None:
    path = tmp_path / "clean.yaml"
    path.write_text(
        "input_ports: [i]\nnodes: [{name: a, kernel: K, input_ports: [i], output_ports: [o]}]\noutput_ports: "
        "[o]\n"
    )
    report = check_config(path)
    assert (report.ok, report.exit_code, report.error) == (True, 0, None)
    data = report.to_json()
    assert data["ok"] is True
    assert data["path"] == str(path)
    assert data["diagnostics"] == []
    assert data["stats"] == "basic"
    assert report.to_text().splitlines()[0] == f"ok: {path}"


def test_unknown_kernels_are_fine(tmp_path: Path) -> None:
    path = tmp_path / "g.yaml"
    path.write_text("nodes: [{kernel: NotRegisteredAnywhere, output_ports: [o]}]\noutput_ports: [o]\n")
    assert check_config(path).ok


def test_invalid_config_failure_forms(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("nodes:\n  - kernal: K\n")
    report = check_config(path)
    message = f"{path}:2: nodes[0]: unknown field `kernal`; did you mean `kernel`?"
    assert (report.ok, report.exit_code, report.plan, report.error) == (False, 1, None, message)
    assert report.to_json() == {
        "ok": False,
        "path": str(path),
        "diagnostics": [{"message": message, "code": 1}],
    }
    assert report.to_text() == f"check-config: {message}"


def test_a_missing_file_is_an_invalid_config(tmp_path: Path) -> None:
    report = check_config(tmp_path / "nope.yaml")
    assert not report.ok
    assert report.error is not None
    assert "cannot be read" in report.error


def test_reports_are_frozen() -> None:
    report = CheckReport(path="x.yaml", error="boom")
    with pytest.raises(AttributeError):
        report.path = "y.yaml"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("predicate", "summary"),
    [
        (PredicateSpec("metadata", key="confidence", op="gte", value=0.8), "confidence gte 0.8"),
        (PredicateSpec("metadata", key="label", op="eq", value="car"), 'label eq "car"'),
        (PredicateSpec("metadata", key="flag", op="eq", value=True), "flag eq true"),
        (PredicateSpec("metadata", key="k", op="exists"), "k exists"),
        (PredicateSpec("timestamp", op="lt", value=100), "timestamp lt 100"),
        (
            PredicateSpec(
                "any",
                children=(
                    PredicateSpec("metadata", key="a", op="ne", value=1),
                    PredicateSpec(
                        "not", children=(PredicateSpec("metadata", key="b", op="contains", value="x"),)
                    ),
                ),
            ),
            'any(a ne 1, not(b contains "x"))',
        ),
    ],
)
def test_describe_predicate(predicate: PredicateSpec, summary: str) -> None:
    assert describe_predicate(predicate) == summary
