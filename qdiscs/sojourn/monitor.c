// Loads sojourn.bpf.o, watches the root qdiscs named on the command line and writes every event the program
// reports to stdout as a 32-byte binary record (struct event in sojourn.bpf.c), until SIGINT/SIGTERM or stdin
// closes. "ready" on stderr once attached; at exit "lost N" (events the ring buffer dropped). After each drain of
// the ring it writes a mark record (slot MARK_SLOT, kind 3) whose t_ns says every event stamped before it is
// written: a reader cuts its intervals by the events' own times and waits for the mark, however late a busy
// machine runs this loop.
//
//   monitor OBJECT NETNS_INODE:IFINDEX [...]
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

struct target { unsigned int netns, ifindex; };
struct record { unsigned long long t_ns, sojourn_ns; unsigned int slot, kind, qlen, backlog; };   // struct event
#define MARK_SLOT 0xffffffffu
#define MARK_KIND 3u
// an event's time is read before its slot in the ring is reserved: one stamped a moment before the drain may be
// committed just after it, so the mark claims only what was stamped 1 ms before the drain began
#define MARK_MARGIN_NS 1000000ull

static unsigned long long monotonic_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);   // bpf_ktime_get_ns's clock
	return (unsigned long long)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static volatile sig_atomic_t stop;
static void on_signal(int sig) { (void)sig; stop = 1; }

static int on_event(void *ctx, void *data, size_t size)
{
	(void)ctx;
	if (fwrite(data, size, 1, stdout) != 1)
		stop = 1;
	return 0;
}

static int quiet(enum libbpf_print_level level, const char *fmt, va_list args)
{
	return level == LIBBPF_WARN ? vfprintf(stderr, fmt, args) : 0;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: %s OBJECT NETNS_INODE:IFINDEX [...]\n", argv[0]);
		return 2;
	}
	libbpf_set_print(quiet);
	struct bpf_object *obj = bpf_object__open_file(argv[1], NULL);
	if (!obj) {
		fprintf(stderr, "cannot open %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	if (bpf_object__load(obj)) {
		fprintf(stderr, "cannot load %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	int targets = bpf_object__find_map_fd_by_name(obj, "targets");
	for (int i = 2; i < argc && i - 2 < 16; i++) {
		struct target t;
		unsigned int slot = i - 2;
		if (sscanf(argv[i], "%u:%u", &t.netns, &t.ifindex) != 2) {
			fprintf(stderr, "bad target %s: expected NETNS_INODE:IFINDEX\n", argv[i]);
			return 2;
		}
		bpf_map_update_elem(targets, &t, &slot, BPF_ANY);
	}
	struct bpf_program *prog;
	bpf_object__for_each_program(prog, obj) {
		if (!bpf_program__attach(prog)) {
			fprintf(stderr, "cannot attach %s: %s\n", bpf_program__name(prog), strerror(errno));
			return 1;
		}
	}
	struct ring_buffer *rb = ring_buffer__new(bpf_object__find_map_fd_by_name(obj, "events"), on_event, NULL, NULL);
	if (!rb) {
		fprintf(stderr, "cannot open the ring buffer: %s\n", strerror(errno));
		return 1;
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGPIPE, on_signal);
	fprintf(stderr, "ready\n");
	fflush(stderr);
	struct pollfd in = {.fd = 0, .events = POLLIN};
	// the program does not wake us per event (thousands a second): the ring is drained on a period instead,
	// 4 MiB holding 131072 events, far more than arrive in one
	while (!stop) {
		usleep(20000);
		unsigned long long began = monotonic_ns();
		if (ring_buffer__consume(rb) < 0)
			break;
		struct record mark = {.t_ns = began - MARK_MARGIN_NS, .slot = MARK_SLOT, .kind = MARK_KIND};
		if (fwrite(&mark, sizeof(mark), 1, stdout) != 1)
			break;
		fflush(stdout);
		char c;
		// the parent's end of stdin closing is the other way to stop (a killed parent leaves no monitor behind)
		if (poll(&in, 1, 0) > 0 && (in.revents & (POLLHUP | POLLERR) || read(0, &c, 1) == 0))
			break;
	}
	ring_buffer__consume(rb);
	fflush(stdout);
	unsigned int zero = 0;
	unsigned long long lost = 0;
	bpf_map_lookup_elem(bpf_object__find_map_fd_by_name(obj, "lost"), &zero, &lost);
	fprintf(stderr, "lost %llu\n", lost);
	ring_buffer__free(rb);
	bpf_object__close(obj);
	return 0;
}
