"""A Topology is data: nodes, and links whose two directions each say how that end transmits.

Like Mininet's Topo it knows nothing of how it is realised; topologies/testbeds/netns.py (and the other testbeds)
turn it into namespaces, veth pairs, routes and tc. Addresses are assigned here so every testbed agrees:
link i is the subnet 198.18.i.0/24 (RFC 2544's benchmarking range), its end a is .1, its end b is .2.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from ccrig.units import Rate, Size, wire_bytes
from ccrig.qdiscs.base import Qdisc


@dataclass(frozen=True)
class Egress:
    """How one end of a link transmits: the rate it is shaped to, the discipline and buffer that queue for
    it, and the impairments (delay, random loss) applied on the way out. None/0 means "as the wire does"."""
    rate: Rate | None = None
    buffer: Size | None = None
    qdisc: Qdisc | None = None
    delay: float = 0.0  # seconds, one way
    # ratio 0..1, or a Gilbert-Elliott chain (topologies/loss/: always realised by the BPF program)
    loss: object = 0.0

    @property
    def needs_netem(self) -> bool:
        return self.delay > 0 or (isinstance(self.loss, float) and self.loss > 0)


@dataclass(frozen=True)
class Node:
    name: str
    role: str = "host"  # host | router


@dataclass(frozen=True)
class Link:
    a: str
    b: str
    a_to_b: Egress = Egress()
    b_to_a: Egress = Egress()


@dataclass(frozen=True)
class Interface:
    node: str
    name: str      # interface name inside the node, e.g. eth0
    address: str   # e.g. 198.18.3.1
    prefix: int
    peer: str      # the node at the other end
    peer_address: str
    egress: Egress


@dataclass
class Topology:
    name: str
    nodes: list[Node] = field(default_factory=list)
    links: list[Link] = field(default_factory=list)
    # (sender, receiver) host pairs that flows are placed on, in order
    pairs: list[tuple[str, str]] = field(default_factory=list)
    # the link and direction whose egress is the bottleneck: (a, b) means a's egress toward b
    bottleneck: tuple[str, str] | None = None
    mtu: int = 1500
    # senders hand super-packets to the network; every shaped egress cuts them into wire packets (qdiscs/shaper.py)
    gso: bool = False

    @property
    def wire(self) -> int:
        """A full-size packet on this topology's links as a queue sees it (bytes)."""
        return wire_bytes(self.mtu)

    def add_node(self, name: str, role: str = "host") -> str:
        self.nodes.append(Node(name, role))
        return name

    def add_link(self, a: str, b: str, a_to_b: Egress = Egress(), b_to_a: Egress = Egress()) -> Link:
        link = Link(a, b, a_to_b, b_to_a)
        self.links.append(link)
        return link

    def node(self, name: str) -> Node:
        return next(n for n in self.nodes if n.name == name)

    def interfaces(self) -> dict[str, list[Interface]]:
        """Every node's interfaces, named eth0, eth1, ... in link order."""
        out: dict[str, list[Interface]] = {n.name: [] for n in self.nodes}
        for i, link in enumerate(self.links):
            net = self.subnet(i)
            for me, peer, mine, theirs, eg in ((link.a, link.b, 1, 2, link.a_to_b),
                                              (link.b, link.a, 2, 1, link.b_to_a)):
                out[me].append(Interface(me, f"eth{len(out[me])}", f"{net}.{mine}", 24, peer,
                                         f"{net}.{theirs}", eg))
        return out

    def path(self, src: str, dst: str) -> list[tuple[str, str]]:
        """The egresses a packet from src to dst leaves by, in order, as (node, toward): the routes' fewest hops."""
        ifs = self.interfaces()
        out, cur = [], src
        while cur != dst:
            hop = _first_hops(ifs, cur)[dst][1].peer
            out.append((cur, hop))
            cur = hop
        return out

    def rtt(self, src: str, dst: str) -> float:
        """The propagation RTT the links add between two hosts: every egress delay on the path there and back."""
        return sum(self.egress_of(a, b).egress.delay for a, b in self.path(src, dst) + self.path(dst, src))

    def queues(self) -> list[tuple[str, str]]:
        """The egresses whose queues can drop: the bottleneck first, then every other one with a buffer of its own
        (a PAUSE chain's node-1 queue), in link order, as (node, toward)."""
        out = [tuple(self.bottleneck)] if self.bottleneck else []
        for link in self.links:
            for a, b, eg in ((link.a, link.b, link.a_to_b), (link.b, link.a, link.b_to_a)):
                if (a, b) not in out and eg.buffer is not None:
                    out.append((a, b))
        return out

    def address(self, node: str) -> str:
        """A host's address: the one on its first interface."""
        return self.interfaces()[node][0].address

    def egress_of(self, a: str, b: str) -> Interface:
        return next(i for i in self.interfaces()[a] if i.peer == b)

    def subnet(self, i: int) -> str:
        """Link i's subnet prefix (three octets)."""
        return f"198.18.{i}" if i < 256 else f"198.19.{i - 256}"

    def routes(self) -> dict[str, list[tuple[str, str]]]:
        """Static routes for every node: (destination subnet, next-hop address), by fewest hops."""
        ifs = self.interfaces()
        out: dict[str, list[tuple[str, str]]] = {}
        for node in ifs:
            hops = _first_hops(ifs, node)  # other node -> (distance, my interface toward it)
            routes = []
            for i, link in enumerate(self.links):
                if node in (link.a, link.b):
                    continue
                ends = [e for e in (link.a, link.b) if e in hops]
                if ends:
                    nearest = min(ends, key=lambda e: hops[e][0])
                    routes.append((f"{self.subnet(i)}.0/24", hops[nearest][1].peer_address))
            out[node] = routes
        return out


    def own_namespace_routes(self) -> dict[str, list[tuple[str, str]]]:
        """routes() for nodes in network namespaces of their own (netns, Mininet): a host with one interface gets
        one default route instead of one per subnet (a 30-sender dumbbell's hosts would otherwise add thousands),
        which clobbers nothing there. A lab host keeps its own default route: the hosts testbed uses routes()."""
        ifs = self.interfaces()
        return {node: [("default", ifs[node][0].peer_address)] if len(ifs[node]) == 1 and routes else routes
                for node, routes in self.routes().items()}


def _first_hops(ifs: dict[str, list[Interface]], src: str) -> dict[str, tuple[int, Interface]]:
    """Breadth-first from src: for every reachable node, its distance and src's interface toward it."""
    found: dict[str, tuple[int, Interface]] = {}
    queue = deque()
    for i in ifs[src]:
        if i.peer != src and i.peer not in found:
            found[i.peer] = (1, i)
            queue.append(i.peer)
    while queue:
        cur = queue.popleft()
        for i in ifs[cur]:
            if i.peer != src and i.peer not in found:
                found[i.peer] = (found[cur][0] + 1, found[cur][1])
                queue.append(i.peer)
    return found
