"""The workload registry (experiments/workloads/): every kind is found by its module, the spec's `workload:` is
the union of them, and a bulk flow's programs and results are iperf3's."""
import json

import pytest

from ccrig.errors import InputError, RunError
from ccrig.experiments import spec as specmod
from ccrig.experiments import workloads
from ccrig.experiments.workloads import Flow, Workload
from ccrig.experiments.workloads.bulk import Bulk


def test_every_kind_is_found_by_its_module():
    assert {"bulk", "files"} <= set(workloads.kinds())   # a new kind is one more module, not an edit here
    assert all(issubclass(workloads.get(k), Workload) for k in workloads.kinds())
    with pytest.raises(InputError, match=r"workload.kind: got 'ftp'; expected one of .*bulk"):
        workloads.get("ftp")


def test_the_spec_takes_every_kind_and_bulk_by_default():
    raw = {"name": "t", "topology": {"name": "dumbbell", "bottleneck": {"rate": "10mbit"}}, "duration": "5s",
           "flows": [{"cc": "reno"}, {"workload": "bulk"}, {"workload": {"kind": "files", "size": "1kb"}}]}
    exp = specmod.validate(raw, "t")
    assert [type(f.workload) for f in exp.flows] == [Bulk, Bulk, workloads.get("files")]


def test_bulk_flow_is_an_iperf3_pair_and_reads_its_json(tmp_path):
    f = Flow(Bulk(), 2, "cubic", "cubic", "s2", "d2", start=1.0, duration=9.5)
    assert f.server_argv("198.18.0.2") == ["iperf3", "--server", "--one-off", "--bind", "198.18.0.2",
                                           "--port", "5203"]
    argv = f.client_argv("198.18.0.2")
    assert argv[argv.index("--cport") + 1] == "20003" and argv[argv.index("--time") + 1] == "10"
    (tmp_path / f.output_name).write_text(json.dumps({"end": {"sum_received": {"bytes": 1234}}}))
    assert f.workload.received_bytes(f, f.workload.result(f, tmp_path)) == 1234
    (tmp_path / f.output_name).write_text(json.dumps({"error": "unable to connect"}))
    with pytest.raises(RunError, match="unable to connect"):
        f.workload.result(f, tmp_path)
