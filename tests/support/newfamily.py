"""A throwaway law family added the way tcp_modules/README.md says, in a copy of tcp_modules: its descriptor
(families/lin.py) and its C law (families/lin.h) written here, its vectors written by the copy's own
`vectors` module — three files, nothing else edited. The copy is imported as a package of its own (a unique
name), so it reads its own families and leaves ccrig.tcp_modules as it is.

The family: additive increase, additive decrease — per RTT W += alpha; on a loss W = max(W - beta, 2), beta
in segments. No kernel or paper has it under this name (kernel module tcp_lin, BPF names crl_...).
"""
from __future__ import annotations

import importlib
import itertools
import os
import shutil
import sys
from pathlib import Path

TCP_MODULES = Path(__file__).resolve().parents[2] / "tcp_modules"

DESCRIPTOR = '''"""Additive increase, additive decrease: per RTT W += alpha; on a loss W = max(W - beta, 2)."""
from __future__ import annotations

from dataclasses import dataclass, field

from ._family import MIN_CWND, Family, LawBase, param


@dataclass(frozen=True)
class Lin(LawBase):
    alpha: float = param("real", 1.0, lo=0, hi=100, lo_open=True, doc="increase per RTT in segments")
    beta: float = param("real", 1.0, lo=0, hi=100, lo_open=True, doc="segments removed on a loss",
                        meaning=" (segments removed on a loss)")
    halve_first: bool = param("flag", False, when_set=True, doc="1 halves the window at the first loss")
    law: str = field(default="lin", init=False)

    def increase(self, w: int) -> float:
        return self.alpha

    def loss_window(self, w: int) -> float:
        return max(w - self.beta, MIN_CWND)


def _sample(rng):
    return Lin(round(rng.uniform(0.05, 20), 6), round(rng.uniform(0.05, 50), 6), rng.random() < 0.3)


FAMILY = Family(law=Lin, letter="l", code=4, tunable="lin_param", summary="AIAD congestion control",
                presets={"lin_one": Lin(), "lin_three": Lin(2.0, 3.0)}, sample=_sample, n_random=12)
'''

C_LAW = '''/* SPDX-License-Identifier: GPL-2.0 */
/* lin.h: W <- W + alpha per RTT, W <- W - beta on a loss (the core floors it at 2 segments) */
#ifndef CCRIG_FAMILY_LIN_H
#define CCRIG_FAMILY_LIN_H

static inline u64 ccrig_law_increase(const struct ccrig_params *p, u32 w)
{
	(void)w;
	return p->alpha;
}

static inline u64 ccrig_law_loss_window(const struct ccrig_params *p, u32 w)
{
	u64 wq = (u64)w << CCRIG_FP;

	return wq > p->beta ? wq - p->beta : 0;
}

#endif
'''

_IGNORE = shutil.ignore_patterns("build", "__pycache__", "*.o", "*.ko", "*.mod", "*.mod.c", ".*.cmd", "tcp_*.c",
                                 "modules.order", "Module.symvers")


_COPIES = itertools.count()


def copy_with_family(parent: Path) -> Path:
    """A copy of tcp_modules under parent, named cclw_tm_<pid>_<n> (an importable package name, new for each
    copy: a second copy under the first one's name would import as the first, cached in sys.modules, and build
    there), with the lin family's descriptor and C law added; its vectors are not written yet (write_vectors)."""
    root = Path(parent) / f"cclw_tm_{os.getpid()}_{next(_COPIES)}"
    shutil.copytree(TCP_MODULES, root, ignore=_IGNORE)
    (root / "families" / "lin.py").write_text(DESCRIPTOR)
    (root / "families" / "lin.h").write_text(C_LAW)
    return root


def load(root: Path, module: str):
    """The copy's `module` (e.g. "spec", "families"), imported from the copy."""
    if str(root.parent) not in sys.path:
        sys.path.insert(0, str(root.parent))
    return importlib.import_module(f"{root.name}.{module}")


def write_vectors(root: Path) -> Path:
    """The third file, written by the copy's vectors module as a developer would (python -m ... vectors lin)."""
    vectors = load(root, "vectors")
    return vectors.write(load(root, "families").FAMILIES["lin"])
