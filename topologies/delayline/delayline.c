/* delayline: one direction of a link's propagation delay, for kernels without sch_netem.
 *
 *   delayline IN OUT DELAY_NS SLOTS SLOT_BYTES STATS_PATH
 *
 * Every Ethernet frame that arrives on IN (an AF_PACKET socket) is held until its due time and then sent on OUT,
 * in arrival order. It is a pure delay, never a queue: it has room for SLOTS frames (the largest bandwidth-delay
 * product the spec may ask, checked before set-up), and the link's queue stays the kernel qdisc upstream of IN.
 *
 * The arrival time is the kernel's (SO_TIMESTAMPNS, stamped when the frame entered this namespace's backlog), so
 * the time this process takes to wake does not add to the delay; only the wake-up for the release does. While
 * frames are held the process sleeps until the first one is due (at most NAP_NS, so the socket buffer never
 * overflows at high rates) instead of waking on each arrival, waking early by the timer's usual lag and spinning
 * the rest (wait_next); with nothing held it blocks in poll().
 *
 * Time-varying delay and trace-driven delivery are further `struct mode`s: a mode gives each frame its due time
 * from its arrival (a delay schedule) and may gate the release (a trace's delivery opportunities).
 *
 * STATS_PATH gets a JSON object, rewritten every STATS_NS and at exit (atomically, through a rename): counters
 * and a histogram of each frame's realised hold minus its configured delay, in microseconds (the "late" figure,
 * what the release's wake-up added). Readiness: "ready" on stdout once both sockets are bound.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_packet.h>
#include <linux/virtio_net.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BATCH 64
#define NAP_NS 1000000ULL        /* 1 ms: at 10 Gbit/s the socket buffer holds far more than a millisecond */
#define STATS_NS 500000000ULL
#define HIST_US 20000            /* late by 0..19999 us, one bin each; later ones counted apart */
#ifndef PACKET_IGNORE_OUTGOING
#define PACKET_IGNORE_OUTGOING 23
#endif

struct mode {
	const char *name;
	uint64_t delay_ns;
	uint64_t (*due)(const struct mode *m, uint64_t arrival_ns);
};

static uint64_t constant_due(const struct mode *m, uint64_t arrival_ns) { return arrival_ns + m->delay_ns; }

struct ring {
	uint32_t cap, slot_bytes, head, count;
	uint64_t *arrival, *due;
	uint32_t *len;
	struct virtio_net_hdr *vh;   /* the frame's offload state (a checksum left to finish) */
	unsigned char *buf;
};

struct stats {
	uint64_t packets, bytes, dropped_oversize, socket_drops, stamp_fallback, send_errors;
	uint64_t hold_min, hold_max, hold_sum, early, late_over;
	uint64_t late[HIST_US];
};

static volatile sig_atomic_t stop;
static void on_signal(int sig) { (void)sig; stop = 1; }

static uint64_t now_ns(clockid_t c)
{
	struct timespec t;
	clock_gettime(c, &t);
	return (uint64_t)t.tv_sec * 1000000000ULL + (uint64_t)t.tv_nsec;
}

static int packet_socket(const char *dev, int protocol, int *ifindex)
{
	int fd = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK, protocol);
	if (fd < 0)
		return -1;
	*ifindex = (int)if_nametoindex(dev);
	if (!*ifindex) {
		fprintf(stderr, "delayline: no interface %s\n", dev);
		exit(2);
	}
	struct sockaddr_ll sll = {.sll_family = AF_PACKET, .sll_protocol = (unsigned short)protocol,
				  .sll_ifindex = *ifindex};
	if (bind(fd, (struct sockaddr *)&sll, sizeof(sll)) < 0)
		return -1;
	return fd;
}

static void *map(size_t bytes)
{
	/* reserved, not committed: only the slots a run fills take memory */
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED) {
		perror("delayline: mmap");
		exit(1);
	}
	return p;
}

static void write_stats(const char *path, const struct mode *m, const struct ring *r, const struct stats *s)
{
	char tmp[4096];
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	FILE *f = fopen(tmp, "w");
	if (!f)
		return;
	/* the process's own CPU (and the softirq work the kernel charges it: the frames' delivery after sendmmsg) */
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	uint64_t cpu = (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000ULL +
		       (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000ULL;
	fprintf(f, "{\"mode\":\"%s\",\"cpu_ns\":%llu,\"delay_ns\":%llu,\"slots\":%u,\"held\":%u,\"packets\":%llu,\"bytes\":%llu,"
		"\"dropped_oversize\":%llu,\"socket_drops\":%llu,\"stamp_fallback\":%llu,"
		"\"send_errors\":%llu,\"hold_min_ns\":%llu,\"hold_max_ns\":%llu,\"hold_sum_ns\":%llu,\"early\":%llu,"
		"\"late_over_us\":%d,\"late_over\":%llu,\"late_us\":{",
		m->name, (unsigned long long)cpu, (unsigned long long)m->delay_ns, r->cap, r->count, (unsigned long long)s->packets,
		(unsigned long long)s->bytes, (unsigned long long)s->dropped_oversize, (unsigned long long)s->socket_drops,
		(unsigned long long)s->stamp_fallback, (unsigned long long)s->send_errors,
		(unsigned long long)(s->packets ? s->hold_min : 0), (unsigned long long)s->hold_max,
		(unsigned long long)s->hold_sum, (unsigned long long)s->early, HIST_US,
		(unsigned long long)s->late_over);
	const char *sep = "";
	for (int i = 0; i < HIST_US; i++)
		if (s->late[i]) {
			fprintf(f, "%s\"%d\":%llu", sep, i, (unsigned long long)s->late[i]);
			sep = ",";
		}
	fprintf(f, "}}\n");
	fclose(f);
	rename(tmp, path);
}

/* The realtime clock's lead over the monotonic one, read between two monotonic reads: an interrupt or softirq
 * (net_rx_action runs up to 2 ms) between two plain reads is taken into the lead, and every stamp of the batch then
 * comes out that much early: a frame released before its delay (CI, four lines side by side at 100 Mbit/s: a TCP min
 * RTT of 39.26 ms over a 40 ms path). A window wider than LEAD_WINDOW_NS is tried again (three tries at most, the
 * narrowest kept), so the usual batch pays one more clock read than before. *mono gets the kept try's last read. */
#define LEAD_WINDOW_NS 10000ULL

static uint64_t realtime_lead(uint64_t *mono)
{
	uint64_t best = UINT64_MAX, lead = 0;
	for (int i = 0; i < 3 && best > LEAD_WINDOW_NS; i++) {
		uint64_t m1 = now_ns(CLOCK_MONOTONIC), rt = now_ns(CLOCK_REALTIME), m2 = now_ns(CLOCK_MONOTONIC);
		if (m2 - m1 < best) {
			best = m2 - m1;
			lead = rt - (m1 + (m2 - m1) / 2);
			*mono = m2;
		}
	}
	return lead;
}

/* Arrival on the monotonic clock from the kernel's realtime stamp; `now` where the stamp is missing or absurd. */
static uint64_t arrival_of(struct msghdr *h, uint64_t mono, uint64_t offset, struct stats *s)
{
	for (struct cmsghdr *c = CMSG_FIRSTHDR(h); c; c = CMSG_NXTHDR(h, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_TIMESTAMPNS)
			continue;
		struct timespec t;
		memcpy(&t, CMSG_DATA(c), sizeof(t));
		uint64_t rt = (uint64_t)t.tv_sec * 1000000000ULL + (uint64_t)t.tv_nsec;
		uint64_t a = rt - offset;
		if (rt > offset && a <= mono + 1000000ULL && a + 10000000000ULL >= mono)
			return a;
	}
	s->stamp_fallback++;
	return mono;
}

static void receive(int fd, struct ring *r, const struct mode *m, struct stats *s)
{
	struct mmsghdr msgs[BATCH];
	struct iovec iov[BATCH][2];
	char ctl[BATCH][CMSG_SPACE(sizeof(struct timespec)) + 64];
	for (;;) {
		uint32_t room = r->cap - r->count, n = room < BATCH ? room : BATCH;
		if (n == 0)
			return;   /* full: what waits stays in the socket (counted by the kernel if it overflows) */
		uint32_t tail = (r->head + r->count) % r->cap;
		for (uint32_t i = 0; i < n; i++) {
			uint32_t k = (tail + i) % r->cap;
			iov[i][0] = (struct iovec){&r->vh[k], sizeof(r->vh[k])};
			iov[i][1] = (struct iovec){r->buf + (size_t)k * r->slot_bytes, r->slot_bytes};
			msgs[i].msg_hdr = (struct msghdr){.msg_iov = iov[i], .msg_iovlen = 2, .msg_control = ctl[i],
							  .msg_controllen = sizeof(ctl[i])};
		}
		int got = recvmmsg(fd, msgs, n, MSG_DONTWAIT, NULL);
		if (got <= 0)
			return;
		uint64_t mono = 0, offset = realtime_lead(&mono);
		uint64_t last = r->count ? r->due[(tail + r->cap - 1) % r->cap] : 0;
		for (int i = 0; i < got; i++) {
			if (msgs[i].msg_hdr.msg_flags & MSG_TRUNC) {
				s->dropped_oversize++;   /* a super-packet: the line's feeder must send wire packets */
				continue;
			}
			uint32_t k = (r->head + r->count) % r->cap;
			uint32_t len = msgs[i].msg_len - (uint32_t)sizeof(struct virtio_net_hdr);
			if (k != (tail + i) % r->cap) {   /* an earlier frame of the batch was dropped: move it down */
				memmove(r->buf + (size_t)k * r->slot_bytes, iov[i][1].iov_base, len);
				r->vh[k] = *(struct virtio_net_hdr *)iov[i][0].iov_base;
			}
			uint64_t a = arrival_of(&msgs[i].msg_hdr, mono, offset, s);
			uint64_t due = m->due(m, a);
			r->arrival[k] = a;
			r->due[k] = due > last ? due : last;   /* in order, whatever the stamps of two frames say */
			last = r->due[k];
			r->len[k] = len;
			r->count++;
		}
		if ((uint32_t)got < n)
			return;
	}
}

static void account(struct stats *s, uint64_t hold, uint64_t delay, uint32_t len)
{
	s->packets++;
	s->bytes += len;
	s->hold_sum += hold;
	if (s->packets == 1 || hold < s->hold_min)
		s->hold_min = hold;
	if (hold > s->hold_max)
		s->hold_max = hold;
	if (hold < delay) {
		s->early++;
		return;
	}
	uint64_t late_us = (hold - delay) / 1000;
	if (late_us < HIST_US)
		s->late[late_us]++;
	else
		s->late_over++;
}

static void release(int fd, struct ring *r, const struct mode *m, struct stats *s)
{
	struct mmsghdr msgs[BATCH];
	struct iovec iov[BATCH][2];
	for (;;) {
		uint64_t now = now_ns(CLOCK_MONOTONIC);
		uint32_t n = 0;
		while (n < BATCH && n < r->count && r->due[(r->head + n) % r->cap] <= now) {
			uint32_t k = (r->head + n) % r->cap;
			iov[n][0] = (struct iovec){&r->vh[k], sizeof(r->vh[k])};
			iov[n][1] = (struct iovec){r->buf + (size_t)k * r->slot_bytes, r->len[k]};
			msgs[n].msg_hdr = (struct msghdr){.msg_iov = iov[n], .msg_iovlen = 2};
			n++;
		}
		if (n == 0)
			return;
		int sent = sendmmsg(fd, msgs, n, 0);
		if (sent <= 0) {
			if (errno == EAGAIN || errno == ENOBUFS || errno == EINTR)
				return;   /* the send buffer is full: again at the next wake-up, still in order */
			sent = 1;         /* a frame the device refused: counted, never retried for ever */
			s->send_errors++;
		}
		uint64_t t = now_ns(CLOCK_MONOTONIC);
		for (int i = 0; i < sent; i++) {
			uint32_t k = (r->head + i) % r->cap;
			account(s, t - r->arrival[k], m->delay_ns, r->len[k]);
		}
		r->head = (r->head + (uint32_t)sent) % r->cap;
		r->count -= (uint32_t)sent;
	}
}

static void socket_drops(int fd, struct stats *s)
{
	struct tpacket_stats st;
	socklen_t l = sizeof(st);
	if (getsockopt(fd, SOL_PACKET, PACKET_STATISTICS, &st, &l) == 0)
		s->socket_drops += st.tp_drops;   /* the kernel resets them on each read */
}

/* How late clock_nanosleep returns here (a smoothed estimate, ns): the line sleeps that much less and spins the
 * rest, so the release is late by the spin's exit and a sendmmsg rather than by a wake-up (60-120 us on this VM).
 * The spin only ever follows a sleep and is capped (LAG_MAX_NS): when frames are due closer together than the lag
 * (high rates) the line sleeps to the next one and sends what is due by then as one batch, so its CPU stays bounded
 * and it never busy-polls a core another process needs. */
static uint64_t wake_lag = 20000;
#define LAG_MAX_NS 100000ULL

static void sleep_until(uint64_t t)
{
	struct timespec ts = {.tv_sec = (time_t)(t / 1000000000ULL), .tv_nsec = (long)(t % 1000000000ULL)};
	clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
}

static void wait_next(int fd, const struct ring *r)
{
	if (r->count == 0) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		poll(&p, 1, (int)(STATS_NS / 1000000ULL));
		return;
	}
	uint64_t now = now_ns(CLOCK_MONOTONIC), due = r->due[r->head];
	if (due <= now)
		return;
	uint64_t until = due < now + NAP_NS ? due : now + NAP_NS;
	if (until <= now + wake_lag) {
		sleep_until(until);
		return;
	}
	uint64_t target = until - wake_lag;
	sleep_until(target);
	now = now_ns(CLOCK_MONOTONIC);
	uint64_t lag = now > target ? now - target : 0;
	wake_lag = (wake_lag * 7 + (lag < LAG_MAX_NS ? lag : LAG_MAX_NS)) / 8;
	while (until == due && now < due && !stop)
		now = now_ns(CLOCK_MONOTONIC);
}

static void setup_process(void)
{
	struct sigaction sa = {.sa_handler = on_signal};
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	/* the release's wake-up is the line's only error: no timer slack, and (where allowed) a real-time priority, as
	 * netem's timers run in softirq above every task; under CFS a busy 2-core machine made frames 0.9 ms late. It
	 * cannot starve the machine: it sleeps between releases, its spin is capped by LAG_MAX_NS after each sleep, and
	 * the kernel's real-time throttling bounds it regardless. */
	prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
	struct sched_param sp = {.sched_priority = 10};
	sched_setscheduler(0, SCHED_FIFO, &sp);
}

int main(int argc, char **argv)
{
	if (argc != 7) {
		fprintf(stderr, "usage: delayline IN OUT DELAY_NS SLOTS SLOT_BYTES STATS_PATH\n");
		return 2;
	}
	struct mode m = {.name = "constant", .delay_ns = strtoull(argv[3], NULL, 10), .due = constant_due};
	struct ring r = {.cap = (uint32_t)strtoul(argv[4], NULL, 10), .slot_bytes = (uint32_t)strtoul(argv[5], NULL, 10)};
	if (r.cap == 0 || r.slot_bytes < 64) {
		fprintf(stderr, "delayline: SLOTS must be > 0 and SLOT_BYTES >= 64\n");
		return 2;
	}
	r.arrival = map((size_t)r.cap * 8);
	r.due = map((size_t)r.cap * 8);
	r.len = map((size_t)r.cap * 4);
	r.vh = map((size_t)r.cap * sizeof(struct virtio_net_hdr));
	r.buf = map((size_t)r.cap * r.slot_bytes);
	struct stats *s = calloc(1, sizeof(*s));
	setup_process();

	int in_index, out_index;
	int rx = packet_socket(argv[1], htons(ETH_P_ALL), &in_index);
	int tx = packet_socket(argv[2], 0, &out_index);   /* protocol 0: sends only, never receives */
	if (rx < 0 || tx < 0) {
		perror("delayline: packet socket");
		return 1;
	}
	int one = 1, big = 64 << 20;
	setsockopt(rx, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof(one));
	/* a sender's checksum is often left to offload (CHECKSUM_PARTIAL): the virtio header carries where it goes, so
	 * the frame leaves as it came and the checksum is finished where the kernel would have finished it */
	if (setsockopt(rx, SOL_PACKET, PACKET_VNET_HDR, &one, sizeof(one)) < 0 ||
	    setsockopt(tx, SOL_PACKET, PACKET_VNET_HDR, &one, sizeof(one)) < 0) {
		perror("delayline: PACKET_VNET_HDR");
		return 1;
	}
	setsockopt(rx, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof(one));
	setsockopt(rx, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof(big));
	setsockopt(tx, SOL_SOCKET, SO_SNDBUFFORCE, &big, sizeof(big));
	setsockopt(tx, SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof(one));

	write_stats(argv[6], &m, &r, s);
	printf("ready\n");
	fflush(stdout);
	uint64_t next_stats = now_ns(CLOCK_MONOTONIC) + STATS_NS;
	while (!stop) {
		receive(rx, &r, &m, s);
		release(tx, &r, &m, s);
		uint64_t now = now_ns(CLOCK_MONOTONIC);
		if (now >= next_stats) {
			socket_drops(rx, s);
			write_stats(argv[6], &m, &r, s);
			next_stats = now + STATS_NS;
		}
		wait_next(rx, &r);
	}
	socket_drops(rx, s);
	write_stats(argv[6], &m, &r, s);
	return 0;
}
