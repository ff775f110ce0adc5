"""The experiment spec: YAML -> a validated Experiment, and the sweep that turns it into points.

    name: default
    testbed: netns
    topology: {name: dumbbell, bottleneck: {rate: 10mbit, buffer: 100pkt, qdisc: pfifo}}
    flows:
      - {count: 2, cc: cubic}
      - {cc: reno, workload: bulk}
    duration: 30s
    interval: 1s
    warmup: 1            # measurement intervals discarded at the start
    repetitions: 1
    sweep: {topology.bottleneck.buffer: [10pkt, 50pkt]}
    ci: 0.95             # confidence level of every interval
    seed: 7              # order of the (point, repetition) pairs (default derived and recorded)

Every error names the path of the field, the value given and what is accepted.
"""
from __future__ import annotations

import copy
import itertools
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model, field_validator, model_validator

from ccrig.tcp_modules.spec import CcField, cc_key
from ccrig.topologies import testbeds, topology_union
from ccrig.topologies.named.dumbbell import MAX_PAIRS
from ccrig.topologies.delayline import DelaySpec
from ccrig.errors import InputError
from ccrig.fields import MAX_FLOWS, FlowCount, TimeField
from ccrig.experiments import events, spec_errors, workloads
from ccrig.experiments.run.capture import CaptureSpec, interfaces as capture_interfaces
from ccrig.experiments.run.sender_tcp import TcpSettings

TopologyField = topology_union()
# a sampling interval shorter than this cannot be kept: each one reads every flow's TCP_INFO and every qdisc
MIN_INTERVAL_S = 0.01
MAX_REPETITIONS = 1000
# a spec file longer than this is not a spec someone wrote (the seed studies' are under 2 KiB)
MAX_SPEC_BYTES = 1024 * 1024
WorkloadField = workloads.workload_union()
EventField = events.event_union()


class Flow(BaseModel):
    model_config = ConfigDict(extra="forbid")
    count: FlowCount = 1
    # a kernel name (net.ipv4.tcp_available_congestion_control), a preset of the alpha/beta, polynomial or
    # Generic laws (ab_smooth, poly_pipd, generic_40, ...), or a parameterisation {law: alphabeta|generic|poly, ...}:
    # tcp_modules/spec.py
    cc: CcField = "cubic"
    # one of the workloads (experiments/workloads/), by kind; bulk when none is named
    workload: WorkloadField = Field(default_factory=workloads.default)
    start: TimeField = 0.0
    # the flow ends at `stop` (contention that decreases); its metrics cover its active intervals only
    stop: TimeField | None = None
    # the sender's congestion window never exceeds this many packets (the route's `cwnd lock`)
    max_window: int | None = Field(None, ge=1, le=1_000_000)
    # per-sender TCP behaviour (sack, recovery, frto, ecn, initcwnd, rto_min, quickack): sender_tcp.py
    tcp: TcpSettings | None = None
    # what figures and reports call the flow (a paper's name for it: "Generic", "Telnet"); by default its
    # congestion control. Claims still pick flows by index or by cc
    label: str | None = Field(None, min_length=1, max_length=32, pattern=r"^[^\n]+$")

    @property
    def cc_label(self) -> str:
        """The congestion control as a researcher reads it: a name, or law(parameters)."""
        return cc_key(self.cc)

    @field_validator("workload", mode="before")
    @classmethod
    def _short(cls, v):
        return {"kind": v} if isinstance(v, str) else v

    @model_validator(mode="after")
    def _cc_of_udp(self):
        if "cc" in self.model_fields_set and not self.workload.congestion_control:
            raise ValueError(f"cc: got {self.cc_label!r} for a {self.workload.kind} flow; a UDP source has no "
                             f"congestion control: leave cc out")
        return self


class _Experiment(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
    description: str = ""
    # a testbed's kind (topologies/testbeds/), or auto: netns where this kernel has what the spec needs, else vm
    testbed: str = "netns"
    topology: TopologyField
    # how the alpha/beta and polynomial laws are loaded: kernel module where possible, else BPF (auto)
    cc_form: Literal["auto", "kmod", "bpf"] = "auto"
    flows: list[Flow] = Field(min_length=1)
    duration: TimeField
    interval: TimeField = 1.0
    warmup: int = Field(1, ge=0)
    repetitions: int = Field(1, ge=1, le=MAX_REPETITIONS)
    # each swept path's values, one point per value: an empty list would make a grid of no points
    sweep: dict[str, Annotated[list[Any], Field(min_length=1)]] = {}
    # link events on a schedule (experiments/events/): down, rate, loss, delay
    events: list[EventField] = []
    # pause_chain: every point also runs without PAUSE (T1 = T2 = B2) and reports the goodput gain
    pause_gain: bool = False
    # packet capture per link, headers only, capped in size (experiments/run/capture.py)
    capture: CaptureSpec | None = None
    # the bottleneck's (and PAUSE queues') occupancy at every change and each packet's sojourn (qdiscs/sojourn/)
    queue_monitor: bool = False
    # strict fails the run (exit 1) when a point was testbed-limited (experiments/run/fidelity.py); warn
    # only reports the verdict
    fidelity: Literal["warn", "strict"] = "warn"
    # the confidence level of every interval (0.95; 0.9973 is Keshav's 3σ, `ccrig run --sigma 3`)
    ci: float = Field(0.95, gt=0.5, lt=1.0)
    # the seed of the randomised order of (point, repetition) pairs and of every flow's random times
    # (schedule.flow_seed); none: derived from the run's name and recorded in summary.json (a resumed run
    # reuses it)
    seed: int | None = Field(None, ge=0, le=2**63 - 1)
    # how added delay is made: netem, or a delay line on kernels without it (topologies/delayline/); auto: netem
    # where the kernel has it
    delay: DelaySpec = DelaySpec()
    # which host pair each flow runs on: fixed, flow i on pair i (modulo the pairs) in every repetition; rotate,
    # repetition r moves flow i to pair i + r, so whatever belongs to a pair (its addresses, and so a hashing
    # queue's bucket, its place in the set-up order, a per_pair link) is not one flow's in every repetition
    pair_order: Literal["fixed", "rotate"] = "fixed"

    @field_validator("testbed")
    @classmethod
    def _testbed(cls, v):
        if v not in [*testbeds.kinds(), "auto"]:
            raise ValueError(f"got {v!r}; expected {', '.join(repr(k) for k in testbeds.kinds())} or 'auto'")
        return v

    @field_validator("topology", mode="before")
    @classmethod
    def _qdisc_short(cls, v):
        # `qdisc: red` is short for `qdisc: {kind: red}` on any link that has one
        if isinstance(v, dict):
            v = copy.deepcopy(v)
            for part in v.values():
                if isinstance(part, dict) and isinstance(part.get("qdisc"), str):
                    part["qdisc"] = {"kind": part["qdisc"]}
        return v

    @model_validator(mode="after")
    def _builds(self):
        # what only the flows' count decides (a dumbbell's per_pair entries against its pairs) is checked here,
        # so its error names the spec file as every other field's does
        self.topology.build(self.n_flows)
        return self

    @model_validator(mode="after")
    def _gso(self):
        if getattr(self.topology, "gso", False) and self.testbed != "auto" and not testbeds.get(self.testbed).gso:
            able = " or ".join(k for k, t in testbeds.available().items() if t.gso)
            raise ValueError(f"topology.gso: got true on testbed {self.testbed!r}; expected testbed {able} (the "
                             f"others send wire packets on every hop), or gso: false")
        return self

    @model_validator(mode="after")
    def _delay_line(self):
        if self.delay.via == "line" and self.testbed != "auto" and not testbeds.get(self.testbed).delay_lines:
            able = " or ".join(k for k, t in testbeds.available().items() if t.delay_lines)
            raise ValueError(f"delay.via: got 'line' on testbed {self.testbed!r}; expected testbed {able} (the "
                             f"others make delay with netem alone), or via: netem or auto")
        return self

    @model_validator(mode="after")
    def _capture_links(self):
        if self.capture is not None:   # each link named must be one of the topology's
            capture_interfaces(self.capture, self.topology.build(self.n_flows))
        return self

    @model_validator(mode="after")
    def _intervals(self):
        if self.interval < MIN_INTERVAL_S:
            raise ValueError(f"interval: got {self.interval:g}s; expected a time of at least "
                             f"{MIN_INTERVAL_S * 1e3:g}ms such as 1s (every interval samples each flow and qdisc)")
        n = int(round(self.duration / self.interval))
        if n < self.warmup + 2:
            raise ValueError(f"duration: got {self.duration:g}s, which is {n} intervals of {self.interval:g}s; "
                             f"expected at least warmup + 2 = {self.warmup + 2} intervals")
        if self.n_flows > MAX_FLOWS:
            raise ValueError(f"flows: got {self.n_flows} flows in all; expected at most {MAX_FLOWS} (the most one "
                             f"run starts)")
        if getattr(self.topology, "pairs", 1) is None and self.n_flows > MAX_PAIRS:
            raise ValueError(f"flows: got {self.n_flows} flows, each on a host pair of its own; expected at most "
                             f"{MAX_PAIRS} (the topology's address plan), or set topology.pairs to share pairs")
        for i, f in enumerate(self.flows):
            if f.start >= self.duration:
                raise ValueError(f"flows[{i}].start: got {f.start:g}s; expected a time before the end of the run "
                                 f"(duration {self.duration:g}s)")
            if f.stop is not None and f.stop <= f.start:
                raise ValueError(f"flows[{i}].stop: got {f.stop:g}s; expected a time after start ({f.start:g}s)")
            if f.stop is not None and f.stop > self.duration:
                raise ValueError(f"flows[{i}].stop: got {f.stop:g}s; expected a time within the run "
                                 f"(duration {self.duration:g}s)")
        if self.events:   # every event on a link the topology has (netem is the testbed's: preflight)
            problems = events.problems(self.events, self.topology.build(self.n_flows), True, self.duration)
            if problems:
                raise ValueError(problems[0])
        return self

    @property
    def n_flows(self) -> int:
        return sum(f.count for f in self.flows)

    @property
    def n_intervals(self) -> int:
        return int(round(self.duration / self.interval))

    def flow_pairs(self, topo, rep: int = 0) -> list[tuple]:
        """Each flow's (sender, receiver) pair of the built topology in repetition rep (see pair_order)."""
        n = len(topo.pairs)
        shift = rep if self.pair_order == "rotate" else 0
        return [topo.pairs[(i + shift) % n] for i in range(self.n_flows)]

    def flow_list(self) -> list[Flow]:
        """One entry per flow, counts expanded, in spec order."""
        return [f for f in self.flows for _ in range(f.count)]


def _testbed_sections() -> dict:
    """Each testbed's options as a spec section named after it (`mininet: {switch: lxbr}`, `vm: {kernel: ...}`).
    A testbed whose module does not import here keeps its section as a plain mapping: choosing that testbed is
    what says why it is missing."""
    out = {}
    found = testbeds.available()
    for kind in testbeds.kinds():
        cls = found.get(kind)
        if cls is None:
            out[kind] = (dict | None, None)
        elif cls.options is not None:
            out[kind] = (cls.options, Field(default_factory=cls.options))
    return out


# the experiment with a section for each testbed that takes options, so a new testbed adds its own
Experiment = create_model("Experiment", __base__=_Experiment, __module__=__name__, **_testbed_sections())


# --- loading -------------------------------------------------------------------------------------------

def format_errors(source: str, err: ValidationError) -> InputError:
    """A validation error as the one-line message the command line prints (spec_errors.py)."""
    return spec_errors.format_errors(source, err, Experiment)


def parse_value(text: str):
    """A --set value: YAML scalar or list, so `--set repetitions=3` is an int and `x=[1,2]` a list. A value that
    opens a YAML mapping or list but does not parse is refused with YAML's reason: taken as a string it failed
    later as "not a valid dictionary", which hid that a key such as flows[4].cc must be quoted there."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        if text.lstrip()[:1] in ("{", "["):
            problem = getattr(e, "problem", None) or str(e).splitlines()[0]
            raise InputError(f"--set: got {text!r}: not valid YAML ({problem}); quote a key with brackets or "
                             f"dots, e.g. sweep={{\"flows[4].cc\": [poly_mimd]}}") from None
        return text


def set_path(raw: dict, path: str, value, source: str = "--set") -> None:
    """Sets a dotted path (flows[0].cc, topology.bottleneck.buffer) in the raw spec, making dicts as needed."""
    cur: Any = raw
    parts = _split_path(path, source)
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if isinstance(part, int):
            if not isinstance(cur, list) or part >= len(cur):
                raise InputError(f"{source}: {path}: no list element [{part}] there")
            if last:
                cur[part] = value
            else:
                cur = cur[part]
        else:
            if not isinstance(cur, dict):
                raise InputError(f"{source}: {path}: {part!r} is not inside a mapping")
            if last:
                cur[part] = value
            else:
                cur = cur.setdefault(part, {})


def _split_path(path: str, source: str) -> list:
    import re
    parts: list = []
    for token in path.split("."):
        m = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*)((?:\[\d+\])*)", token)
        if not m:
            raise InputError(f"{source}: {path!r}: not a spec path; expected names joined by dots, "
                             f"e.g. topology.bottleneck.rate or flows[0].cc")
        parts.append(m.group(1))
        parts.extend(int(x) for x in __import__("re").findall(r"\[(\d+)\]", m.group(2)))
    return parts


def load_raw(path: Path) -> dict:
    if not path.is_file():
        raise InputError(f"{path}: no such spec file; expected a YAML file such as experiments/specs/default.yaml")
    try:
        with path.open("rb") as f:   # one byte more than a spec may have says it is too long
            data = f.read(MAX_SPEC_BYTES + 1)
        if len(data) > MAX_SPEC_BYTES:
            raise InputError(f"{path}: got a file of more than {MAX_SPEC_BYTES} bytes; expected a spec of at "
                             f"most {MAX_SPEC_BYTES // 1024} KiB")
        if b"\x00" in data:   # valid UTF-8 perhaps, but binary all the same
            raise UnicodeDecodeError("utf-8", data, data.index(b"\x00"), data.index(b"\x00") + 1, "NUL byte")
        raw = yaml.safe_load(data.decode("utf-8"))
    except OSError as e:
        raise InputError(f"{path}: cannot read the spec file: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise InputError(f"{path}: not a text file (byte {e.object[e.start]:#04x} at offset {e.start}); "
                         f"expected a YAML spec in UTF-8") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise InputError(f"{path}: not valid YAML{where}: {problem}") from None
    if not isinstance(raw, dict):
        raise InputError(f"{path}: expected a mapping of spec fields at the top level, got {type(raw).__name__}")
    return raw


def validate(raw: dict, source: str) -> Experiment:
    try:
        return Experiment.model_validate(raw)
    except ValidationError as e:
        raise format_errors(source, e) from None
    except InputError as e:  # a cross-field check that raised directly
        raise InputError(f"{source}: {e}") from None


def load(path: Path, overrides: list[str] = ()) -> tuple[dict, Experiment]:
    """Loads and validates a spec file with `path=value` overrides; returns the raw dict and the model."""
    raw = load_raw(path)
    for item in overrides:
        if "=" not in item:
            raise InputError(f"--set: got {item!r}; expected path=value, e.g. topology.bottleneck.rate=20mbit")
        key, value = item.split("=", 1)
        set_path(raw, key.strip(), parse_value(value), "--set")
    exp = validate(raw, str(path))
    points(raw, exp, str(path))  # validates every sweep point before anything runs
    return raw, exp


class Point(BaseModel):
    """One setting of the swept parameters: its index, the values and the experiment as it resolves."""
    index: int
    params: dict[str, Any]
    experiment: Experiment
    raw: dict


def points(raw: dict, exp: Experiment, source: str = "spec") -> list[Point]:
    """The sweep grid, in order: the product of every swept path's values (one point when nothing sweeps)."""
    keys = list(exp.sweep)
    out = []
    for i, combo in enumerate(itertools.product(*(exp.sweep[k] for k in keys))):
        r = copy.deepcopy(raw)
        r.pop("sweep", None)
        for k, v in zip(keys, combo):
            set_path(r, k, v, f"{source}: sweep")
        where = ", ".join(f"{k}={v}" for k, v in zip(keys, combo))
        e = validate(r, f"{source}: sweep point {where}" if keys else source)
        out.append(Point(index=i, params=dict(zip(keys, combo)), experiment=e, raw=r))
    return out
