// Random loss on a link's egress, for kernels without netem: a tc classifier in direct-action mode on clsact's
// egress hook that drops (TC_ACT_SHOT) a packet with a given probability, or by a Gilbert-Elliott two-state
// chain, or every packet while the link is "down" (a handoff). The runner sets the state and reads the counts
// through the one array map (topologies/loss/program.py names the slots); every drop is counted, so the
// system loss includes it.
//
// Random loss is the path's, not the rig's: a flow's own packets meet it, and the connections that only steer a
// measurement (iperf3's control connection, from an ephemeral port to the flow's server port) pass untouched. At
// PER 0.4 a control connection losing its packets backed off for tens of seconds and iperf3 missed its deadline
// (study 001: "iperf3 client of flow 17 did not finish within 42 s"). A flow's packets are known by its ports
// (ccrig/ports.py: the server listens on SERVER_PORT + i, the client binds CLIENT_PORT + i); a TCP or UDP packet
// to or from a server port whose other port is not a client port belongs to no flow and is exempt (counted).
//
// A probability p is stored as a threshold p * 2^32 (u64, so p = 1 is 2^32): a packet is dropped when
// bpf_get_prandom_u32() < threshold, which happens with probability threshold / 2^32 = p.
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/in.h>

// ccrig/ports.py's SERVER_PORT, CLIENT_PORT and ccrig/fields.py's MAX_FLOWS (tests/unit/test_loss_exempt.py holds
// them equal)
#define SERVER_PORT 5201
#define CLIENT_PORT 20001
#define MAX_FLOWS 1000

enum slot {
	MODE = 0,        // 0: pass, 1: Bernoulli, 2: Gilbert-Elliott
	P_LOSS = 1,      // Bernoulli: the drop probability; Gilbert-Elliott: the drop probability in the good state
	P_GOOD_BAD = 2,  // Gilbert-Elliott: good -> bad per packet
	P_BAD_GOOD = 3,  // Gilbert-Elliott: bad -> good per packet
	P_LOSS_BAD = 4,  // Gilbert-Elliott: the drop probability in the bad state
	STATE = 5,       // Gilbert-Elliott: 0 good, 1 bad
	DOWN = 6,        // 1: the link is down, nothing passes
	DROPPED = 7,     // counters: packets dropped at random,
	PASSED = 8,      //           packets let through,
	DOWN_DROPPED = 9,//           packets dropped while the link was down
	EXEMPT = 10,     //           packets of no flow (a control connection) passed untouched
	SLOTS = 11,
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} ccrig_loss SEC(".maps");

static __always_inline __u64 get(__u32 k)
{
	__u64 *v = bpf_map_lookup_elem(&ccrig_loss, &k);
	return v ? *v : 0;
}

static __always_inline void count(__u32 k)
{
	__u64 *v = bpf_map_lookup_elem(&ccrig_loss, &k);
	if (v)
		__sync_fetch_and_add(v, 1);
}

static __always_inline int chance(__u64 threshold)
{
	return (__u64)bpf_get_prandom_u32() < threshold;
}

static __always_inline int in_range(__u16 port, __u16 first)
{
	return port >= first && port < first + MAX_FLOWS;
}

// Whether the packet is a TCP or UDP packet to or from a flow's server port that is not the flow's own (its other
// port is no client port): a control connection, which random loss leaves alone
static __always_inline int exempt(struct __sk_buff *skb)
{
	__u32 l4 = ETH_HLEN;
	__u8 proto;
	if (skb->protocol == bpf_htons(ETH_P_IP)) {
		struct iphdr ip;
		if (bpf_skb_load_bytes(skb, ETH_HLEN, &ip, sizeof(ip)) < 0 || ip.frag_off & bpf_htons(0x1FFF))
			return 0;
		proto = ip.protocol;
		l4 += ip.ihl * 4;
	} else {
		struct ipv6hdr ip6;
		if (bpf_skb_load_bytes(skb, ETH_HLEN, &ip6, sizeof(ip6)) < 0)
			return 0;
		proto = ip6.nexthdr;
		l4 += sizeof(ip6);
	}
	if (proto != IPPROTO_TCP && proto != IPPROTO_UDP)
		return 0;
	__be16 ports[2];
	if (bpf_skb_load_bytes(skb, l4, ports, sizeof(ports)) < 0)
		return 0;
	__u16 src = bpf_ntohs(ports[0]), dst = bpf_ntohs(ports[1]);
	return (in_range(dst, SERVER_PORT) && !in_range(src, CLIENT_PORT)) ||
	       (in_range(src, SERVER_PORT) && !in_range(dst, CLIENT_PORT));
}

SEC("tc")
int ccrig_drop(struct __sk_buff *skb)
{
	if (get(DOWN)) {
		count(DOWN_DROPPED);
		return TC_ACT_SHOT;
	}
	// random loss is for IP packets only: dropping ARP too makes the router's neighbour resolution fail at
	// high loss (three requests lost at 40 % is 6 % per link), and connects then fail with "No route to host"
	if (skb->protocol != bpf_htons(ETH_P_IP) && skb->protocol != bpf_htons(ETH_P_IPV6))
		return TC_ACT_OK;
	__u64 mode = get(MODE), p = get(P_LOSS);
	if (mode != 0 && exempt(skb)) {
		count(EXEMPT);
		return TC_ACT_OK;
	}
	if (mode == 2) {
		__u32 k = STATE;
		__u64 *state = bpf_map_lookup_elem(&ccrig_loss, &k);
		if (state) {
			// the chain moves once per packet, then the packet meets the new state's loss
			if (*state == 0 && chance(get(P_GOOD_BAD)))
				*state = 1;
			else if (*state == 1 && chance(get(P_BAD_GOOD)))
				*state = 0;
			if (*state == 1)
				p = get(P_LOSS_BAD);
		}
	}
	if (mode != 0 && chance(p)) {
		count(DROPPED);
		return TC_ACT_SHOT;
	}
	count(PASSED);
	return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "GPL";
