"""`loss`: a new random loss on a's egress toward b (a ratio or a Gilbert-Elliott chain), back to the link's own
after `for`. Realised by the BPF program whether or not the kernel has netem, so every drop is counted."""
from __future__ import annotations

from typing import Literal

from ccrig.fields import RatioField
from ccrig.topologies.loss import LossModel
from ccrig.experiments.events.base import LinkEvent, LinkState


class Loss(LinkEvent):
    kind: Literal["loss"] = "loss"
    loss: RatioField | LossModel

    def _model(self):
        return self.loss.realised() if isinstance(self.loss, LossModel) else self.loss

    def begin(self, state: LinkState) -> str:
        m = self._model()
        state.droppers[(*self.ends, self.hook)].set_loss(m)
        return f"loss {m:g}" if isinstance(m, float) else f"loss gilbert mean {m.mean:g}"

    def end(self, state: LinkState) -> str:
        d = state.droppers[(*self.ends, self.hook)]
        own = state.topology.egress_of(*self.ends).egress.loss
        d.set_loss(own)
        return f"loss {own:g} (the link's own)"
