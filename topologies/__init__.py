"""Topologies: the model (topology.py), the named topologies (named/, one module each), and their realisation on
each testbed (testbeds/)."""
from .named import KINDS

# every named topology's spec model, by name; the spec's `topology:` is validated against these by `name`
SPECS = [KINDS.available()[name] for name in KINDS.kinds() if name in KINDS.available()]


def topology_union():
    from typing import Annotated, Union
    from pydantic import Field
    if len(SPECS) == 1:
        return SPECS[0]
    return Annotated[Union[tuple(SPECS)], Field(discriminator="name")]
