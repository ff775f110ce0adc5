"""Topologies: the model (topology.py), the named topologies, and their realisation on each testbed."""
from .dumbbell import DumbbellSpec
from .parking_lot import ParkingLotSpec
from .pause_chain import PauseChainSpec
from .tandem import TandemSpec

# every named topology's spec model; the spec's `topology:` is validated against these by `name`
SPECS = [DumbbellSpec, PauseChainSpec, ParkingLotSpec, TandemSpec]


def topology_union():
    from typing import Annotated, Union
    from pydantic import Field
    if len(SPECS) == 1:
        return SPECS[0]
    return Annotated[Union[tuple(SPECS)], Field(discriminator="name")]
