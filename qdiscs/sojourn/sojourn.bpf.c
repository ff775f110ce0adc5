// Queue occupancy and per-packet sojourn of chosen root qdiscs, from the qdisc tracepoints.
//
// qdisc:qdisc_enqueue fires after a root qdisc accepted a packet (a dropped one never fires it), and
// qdisc:qdisc_dequeue after the root handed packets to the driver; so enqueue -> dequeue of one skb is its time
// in the whole tree (htb and the discipline under it), and the root's qlen/backlog read there are the tree's
// occupancy just after the event. Each event goes to user space through a ring buffer, 32 bytes:
// {t_ns, sojourn_ns (dequeue only), slot, kind, qlen, backlog bytes}.
//
// A qdisc is chosen by its device's (network namespace inode, ifindex): ifindexes repeat across namespaces.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#define MAX_TARGETS 16
#define MAX_BULK 16   // packets one dequeue may hand over as a list (bulk dequeue)

struct event {
	__u64 t_ns;
	__u64 sojourn_ns;
	__u32 slot;
	__u32 kind;   // 0 enqueue, 1 dequeue, 2 dequeue of a packet whose enqueue was not seen
	__u32 qlen;
	__u32 backlog;
};

struct target {
	__u32 netns;
	__u32 ifindex;
};

// (namespace inode, ifindex) -> slot: one lookup per event, whatever the number of qdiscs on the machine
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_TARGETS);
	__type(key, struct target);
	__type(value, __u32);
} targets SEC(".maps");

// skb -> enqueue time; LRU so packets freed without a dequeue (a reset qdisc) cannot fill it
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, __u64);
} enqueued SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 22);
} events SEC(".maps");

// events the ring buffer had no room for (user space too slow): said in the archive
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} lost SEC(".maps");

static __always_inline int slot_of(struct Qdisc *q)
{
	struct net_device *dev = BPF_CORE_READ(q, dev_queue, dev);
	struct target t = {.netns = BPF_CORE_READ(dev, nd_net.net, ns.inum), .ifindex = BPF_CORE_READ(dev, ifindex)};
	__u32 *slot = bpf_map_lookup_elem(&targets, &t);
	return slot ? (int)*slot : -1;
}

static __always_inline void emit(__u32 slot, __u32 kind, __u64 now, __u64 sojourn, struct Qdisc *q)
{
	struct event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		__u32 k = 0;
		__u64 *n = bpf_map_lookup_elem(&lost, &k);
		if (n)
			__sync_fetch_and_add(n, 1);
		return;
	}
	e->t_ns = now;
	e->sojourn_ns = sojourn;
	e->slot = slot;
	e->kind = kind;
	e->qlen = BPF_CORE_READ(q, q.qlen);
	e->backlog = BPF_CORE_READ(q, qstats.backlog);
	bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);   // the loader drains the ring every few ms
}

SEC("tp_btf/qdisc_enqueue")
int BPF_PROG(on_enqueue, struct Qdisc *q, const struct netdev_queue *txq, struct sk_buff *skb)
{
	int slot = slot_of(q);
	if (slot < 0)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	__u64 key = (__u64)skb;
	bpf_map_update_elem(&enqueued, &key, &now, BPF_ANY);
	emit(slot, 0, now, 0, q);
	return 0;
}

SEC("tp_btf/qdisc_dequeue")
int BPF_PROG(on_dequeue, struct Qdisc *q, const struct netdev_queue *txq, int packets, struct sk_buff *skb)
{
	if (!skb)
		return 0;
	int slot = slot_of(q);
	if (slot < 0)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	struct sk_buff *s = skb;
	for (int i = 0; i < MAX_BULK && s; i++) {
		__u64 key = (__u64)s;
		__u64 *t = bpf_map_lookup_elem(&enqueued, &key);
		if (t) {
			emit(slot, 1, now, now - *t, q);
			bpf_map_delete_elem(&enqueued, &key);
		} else {
			emit(slot, 2, now, 0, q);   // a requeued packet's second dequeue, or one enqueued before we looked
		}
		s = BPF_CORE_READ(s, next);
	}
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
