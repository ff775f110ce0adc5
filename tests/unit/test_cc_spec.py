"""A flow's `cc`: names, presets, parameterisations, and the errors for everything else."""
import pytest
from pydantic import BaseModel, ValidationError

from ccrig.errors import InputError
from ccrig.experiments.spec import format_errors
from ccrig.tcp_modules import laws
from ccrig.tcp_modules.bpf import NAME_RE, generated_name
from ccrig.tcp_modules.spec import AlphaBetaCc, CcField, PolyCc, cc_key, law_of, parse_cc, preset_of


class Flow(BaseModel):
    cc: CcField = "cubic"


def error_of(value) -> str:
    with pytest.raises(ValidationError) as e:
        Flow(cc=value)
    return str(format_errors("spec.yaml", e.value))


def test_names_and_presets():
    assert Flow(cc="reno").cc == "reno"
    assert Flow(cc="ab_smooth").cc == "ab_smooth"
    assert law_of("ab_smooth") == laws.AlphaBeta(0.31, 0.875)
    assert law_of("cubic") is None


def test_alphabeta_mapping():
    cc = Flow(cc={"law": "alphabeta", "alpha": 1.25, "beta": 0.25}).cc
    assert cc == AlphaBetaCc(alpha=1.25, beta=0.25)
    assert cc_key(cc) == "alphabeta(alpha=1.25,beta=0.25)"
    assert preset_of(law_of(cc)) == "ab_responsive"


def test_friendly_form_derives_alpha():
    cc = Flow(cc={"law": "alphabeta", "beta": 0.875, "friendly": True}).cc
    assert cc.alpha == pytest.approx(0.3125)
    # the dumped form validates again (round trip through a resolved spec.yaml), friendly kept
    dumped = Flow(cc=cc).model_dump()["cc"]
    assert dumped == {"law": "alphabeta", "alpha": pytest.approx(0.3125), "beta": 0.875, "friendly": True}
    assert list(dumped) == ["law", "alpha", "beta", "friendly"]
    assert Flow(cc=Flow(cc=dumped).model_dump()["cc"]).cc == cc


def test_poly_mapping_defaults():
    cc = Flow(cc={"law": "poly", "k": 1, "l": 1, "terms": 2}).cc
    assert cc == PolyCc(k=1, l=1, terms=2, alpha=1.0, beta=0.5, per_ack=False)
    assert cc_key(cc) == "poly(k=1,l=1,terms=2,alpha=1,beta=0.5)"
    assert preset_of(law_of(cc)) == "poly_pipd"
    assert cc_key({"law": "poly", "k": 0, "l": 1, "per_ack": True}).endswith(",per_ack)")


def test_poly_halve_first_option():
    cc = Flow(cc={"law": "poly", "k": 1, "l": 1, "terms": 2, "alpha": 20, "beta": 0.1, "halve_first": True}).cc
    assert cc == laws.PRESETS["poly_pipd_paper"] and preset_of(law_of(cc)) == "poly_pipd_paper"
    assert cc_key(cc) == "poly(k=1,l=1,terms=2,alpha=20,beta=0.1,halve_first)"
    assert cc_key({"law": "poly", "k": 0, "l": 1, "per_ack": True, "halve_first": True}).endswith(
        ",per_ack,halve_first)")
    # off: the law, its key and its parameters (so its generated BPF name) are what they were before the option
    off = Flow(cc={"law": "poly", "k": 1, "l": 1, "terms": 2, "halve_first": False}).cc
    assert off == laws.PRESETS["poly_pipd"] and cc_key(off) == "poly(k=1,l=1,terms=2,alpha=1,beta=0.5)"
    assert "halve_first" not in off.params() and cc.params()["halve_first"] is True
    assert "halve_first: got 'yes'" in error_of({"law": "poly", "k": 0, "l": 1, "halve_first": "yes"})


@pytest.mark.parametrize("value,where,accepted", [
    ({"law": "alphabeta", "alpha": 0, "beta": 0.5}, "flows[0].cc: alpha: got 0", "a number > 0"),
    ({"law": "alphabeta", "alpha": -1, "beta": 0.5}, "alpha: got -1", "a number > 0"),
    ({"law": "alphabeta", "alpha": 1, "beta": 1.0}, "beta: got 1.0", "strictly between 0 and 1"),
    ({"law": "alphabeta", "alpha": 1, "beta": 0}, "beta: got 0", "strictly between 0 and 1"),
    ({"law": "alphabeta", "beta": 0.5}, "alpha: got None", "friendly: true"),
    ({"law": "alphabeta", "alpha": 2, "beta": 0.5, "friendly": True}, "alpha: got 2", "it is derived"),
    ({"law": "cubic", "alpha": 1}, "law: got 'cubic'", "one of alphabeta, generic, poly"),
    ({"alpha": 1}, "law: got None", "one of alphabeta, generic, poly"),
    ({"law": "poly", "k": 5, "l": 1}, "k: got 5", "an integer from -3 to 3"),
    ({"law": "poly", "k": 0, "l": -4}, "l: got -4", "an integer from -3 to 3"),
    ({"law": "poly", "k": 0}, "l: got None", "an integer from -3 to 3"),
    ({"law": "poly", "k": 0, "l": 1, "terms": 0}, "terms: got 0", "an integer from 1 to 4"),
    ({"law": "poly", "k": 0.5, "l": 1}, "k: got 0.5", "an integer"),
    ({"law": "poly", "k": 0, "l": 1, "gamma": 2}, "gamma: got 2", "its fields are law, k, l"),
    ({"law": "poly", "k": 0, "l": 1, "halve_first": 1}, "halve_first: got 1", "true or false"),
    ("a_name_far_too_long", "flows[0].cc: got 'a_name_far_too_long'", "at most 15 characters"),
    ("bad name", "got 'bad name'", "a preset (ab_standard"),
    (3, "got 3", "a kernel congestion control name"),
])
def test_errors_name_field_value_and_what_is_accepted(value, where, accepted):
    class Spec(BaseModel):
        flows: list[Flow]
    with pytest.raises(ValidationError) as e:
        Spec(flows=[{"cc": value}])
    msg = str(format_errors("spec.yaml", e.value))
    assert msg.startswith("spec.yaml: flows[0].cc")
    assert where in msg and accepted in msg, msg


def test_parse_cc_raises_input_error_outside_pydantic():
    with pytest.raises(InputError, match=r"^cc\.beta: got 1.5; expected a number strictly between 0 and 1"):
        parse_cc({"law": "alphabeta", "alpha": 1, "beta": 1.5})


def test_generated_names_are_short_and_recognisable():
    a = generated_name("ccrig-12345", laws.PRESETS["ab_smooth"])
    p = generated_name("ccrig-12345", laws.PRESETS["poly_pipd"])
    assert len(a) <= 15 and len(p) <= 15
    assert NAME_RE.match(a).group(1) == "a" and NAME_RE.match(p).group(1) == "p"
    # same prefix and parameters: same name; another prefix or other parameters: another name
    assert a == generated_name("ccrig-12345", laws.AlphaBeta(0.31, 0.875))
    assert a != generated_name("ccrig-12346", laws.PRESETS["ab_smooth"])
    assert a != generated_name("ccrig-12345", laws.AlphaBeta(0.31, 0.8))
    assert NAME_RE.match(a).group(2) == NAME_RE.match(generated_name("ccrig-12345", laws.PRESETS["poly_aimd"])).group(2)
