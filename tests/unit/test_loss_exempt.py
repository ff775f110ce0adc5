"""The loss program tells a flow's packets from a control connection's by ccrig's port plan: its constants must be
ccrig/ports.py's and ccrig/fields.py's, or random loss would spare (or hit) the wrong packets."""
import re

from ccrig import fields, ports
from ccrig.topologies.loss import program


def test_the_loss_programs_port_plan_is_ccrigs():
    src = program.SOURCE.read_text()
    defined = dict(re.findall(r"^#define (SERVER_PORT|CLIENT_PORT|MAX_FLOWS) (\d+)$", src, re.M))
    assert defined == {"SERVER_PORT": str(ports.SERVER_PORT), "CLIENT_PORT": str(ports.CLIENT_PORT),
                       "MAX_FLOWS": str(fields.MAX_FLOWS)}
    # the exempt counter's slot is the one program.py reads
    assert re.search(rf"EXEMPT = {program.EXEMPT},", src)
