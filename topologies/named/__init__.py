"""The named topologies, one module each, found by the spec model it declares (`TOPOLOGY = ...Spec`, whose
`name` is what a spec's `topology: {name: ...}` says): a new topology is one module here and nothing else changes."""
from ccrig.kinds import Kinds


def _topology_of(module) -> dict[str, type]:
    spec = getattr(module, "TOPOLOGY", None)
    return {spec.model_fields["name"].default: spec} if spec is not None else {}


KINDS = Kinds(__name__, __path__, _topology_of, "topology")
