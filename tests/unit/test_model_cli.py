"""`ccrig model pause|gaimd` through typer's CliRunner (in-process)."""
import pytest
from typer.testing import CliRunner

from ccrig.analysis import model_cli, pause_markov as pm, throughput as tp
from ccrig.errors import InputError

runner = CliRunner()


def invoke(*args):
    return runner.invoke(model_cli.app, list(args))


def test_pause_prints_the_measures_and_gain():
    r = invoke("pause", "--lam", "25,1", "--t1", "15", "--rtt", "1")
    assert r.exit_code == 0, r.output
    m = pm.solve(pm.PauseParams(lam=(25.0, 1.0), T1=15, T2=15, rtt=1.0))
    g, _, _ = pm.gain(pm.PauseParams(lam=(25.0, 1.0), T1=15, T2=15, rtt=1.0))
    assert model_cli._fmt(m.throughput) in r.output and model_cli._fmt(m.EQ2) in r.output
    assert f"{g:+.3f}" in r.output


def test_pause_ranges_give_one_row_per_point():
    r = invoke("pause", "--rtt", "0.5:1.5:0.5", "--t1", "14,16", "--t2", "10", "--no-gain")
    assert r.exit_code == 0, r.output
    rows = [line for line in r.output.splitlines() if line.startswith("│")]
    assert len(rows) == 6


def test_pause_figure_prints_the_sweep():
    r = invoke("pause", "--figure", "fig6")
    assert r.exit_code == 0, r.output
    rows = [line for line in r.output.splitlines() if line.startswith("│")]
    assert len(rows) == len(pm.FIGURES["fig6"]["values"])


@pytest.mark.parametrize("args,prefix", [
    (("pause", "--t2", "30"), "--t2: got 30; expected an integer in 1..T1"),
    (("pause", "--rtt", "fast"), "--rtt: got 'fast'; expected numbers as"),
    (("pause", "--lam", "1,5"), "--lam: got"),
    (("pause", "--figure", "fig9"), "--figure: got 'fig9'; expected one of fig4"),
    (("pause", "--method", "magic"), "--method: got 'magic'"),
    (("gaimd", "--p", "0", "--rtt", "0.1"), "--p: got 0.0; expected a loss event rate"),
    (("gaimd", "--p", "0.1", "--rtt", "0.1", "--beta", "1.5"), "--beta: got 1.5"),
])
def test_bad_options_raise_input_error_naming_them(args, prefix):
    r = invoke(*args)
    assert isinstance(r.exception, InputError), r.output
    assert str(r.exception).startswith(prefix)


def test_gaimd_prints_the_three_predictions():
    r = invoke("gaimd", "--p", "0.01", "--rtt", "0.1", "--beta", "0.875", "--friendly", "--t0", "1")
    assert r.exit_code == 0, r.output
    a = tp.tcp_friendly_alpha(0.875)
    for value in (tp.gaimd(0.01, 0.1, 1.0, 1, a, 0.875), tp.padhye(0.01, 0.1, 1.0), tp.mathis(0.01, 0.1)):
        assert model_cli._fmt(value) in r.output


def test_parse_values():
    assert model_cli.parse_values("--x", "0.1:0.3:0.1") == [0.1, 0.2, 0.3]
    assert model_cli.parse_values("--x", "2,4", integer=True) == [2, 4]
    assert model_cli.parse_values("--x", "5") == [5.0]
    with pytest.raises(InputError, match="^--x: got '1:2'"):
        model_cli.parse_values("--x", "1:2")
