/* The machine's TCP_INFO sampler in C: the same command line and output as experiments/nodes/sampler.py's
 * many-namespace mode (--period, --ns PATH|ino:N, --sock LADDR,LPORT,RADDR,RPORT, --count), which says how it
 * works (a netlink socket made inside each namespace, exact INET_DIAG lookups by 4-tuple, one send per
 * namespace). Why C: measured on this 2-core machine, the Python sampler spends ~0.24 of a core on 100 flows
 * (200 sockets) at 50 Hz, most of it building 200 dicts and their JSON each period; the budget is 0.05.
 * This one does the same work in a fraction of that (tests/bench/bench_scale.py reports it).
 *
 * Built on demand by experiments/run/collectors.py (`cc -O2`, cached by the source's hash) on the machine that runs
 * it; where no compiler is found (a remote host without one) the Python sampler runs instead, unchanged.
 * Only libc and the kernel's UAPI headers: nothing to install.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/times.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define MAXNS 4096
#define ST_TIME_WAIT 6   /* include/net/tcp_states.h */
#define ST_LISTEN 10
#define MAXSOCK 16384

struct req { struct nlmsghdr nlh; struct inet_diag_req_v2 r; };
struct sk { char key[16]; };
struct ns { char name[256]; int fd; int first, n; };

static struct ns spaces[MAXNS];
static struct sk socks[MAXSOCK];
static struct req reqs[MAXSOCK];
static int nspaces, nsocks;
static volatile sig_atomic_t running = 1;
static char out[1 << 22];
static size_t outlen;

static void stop(int sig) { (void)sig; running = 0; }

static void emit(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(out + outlen, sizeof out - outlen, fmt, ap);
    va_end(ap);
    if (n > 0 && outlen + n < sizeof out) outlen += n;
}

/* the fields sampler.py reports, at the offsets of struct tcp_info (linux/tcp.h) */
struct field { const char *name; int size, off; };
static const struct field FIELDS[] = {
    {"state", 1, 0}, {"ca_state", 1, 1}, {"rto_us", 4, 8}, {"snd_mss", 4, 16}, {"unacked", 4, 24},
    {"sacked", 4, 28}, {"lost", 4, 32}, {"retrans", 4, 36}, {"pmtu", 4, 60}, {"rtt_us", 4, 68},
    {"rttvar_us", 4, 72}, {"snd_ssthresh", 4, 76}, {"snd_cwnd", 4, 80}, {"total_retrans", 4, 100},
    {"pacing_rate", 8, 104}, {"bytes_acked", 8, 120}, {"bytes_received", 8, 128}, {"segs_out", 4, 136},
    {"segs_in", 4, 140}, {"min_rtt_us", 4, 148}, {"data_segs_in", 4, 152}, {"data_segs_out", 4, 156},
    {"delivery_rate", 8, 160}, {"delivered", 4, 192}, {"delivered_ce", 4, 196}, {"bytes_sent", 8, 200},
    {"bytes_retrans", 8, 208}, {"dsack_dups", 4, 216},
};

static int found_any;

/* "name":value without printf: 200 sockets x 28 fields each period are most of the sampler's own time */
static void put_field(const char *name, uint64_t v, int first) {
    char digits[24];
    int n = 0;
    size_t len = strlen(name);
    if (outlen + len + 32 >= sizeof out) return;
    if (!first) out[outlen++] = ',';
    out[outlen++] = '"';
    memcpy(out + outlen, name, len);
    outlen += len;
    out[outlen++] = '"';
    out[outlen++] = ':';
    do { digits[n++] = '0' + v % 10; v /= 10; } while (v);
    while (n) out[outlen++] = digits[--n];
}

static void report(const char *key, const unsigned char *info, int ilen, const char *cc) {
    emit("%s\"%s\":{", found_any ? "," : "", key);
    found_any = 1;
    int first = 1;
    for (size_t i = 0; i < sizeof FIELDS / sizeof FIELDS[0]; i++) {
        const struct field *f = &FIELDS[i];
        if (f->off + f->size > ilen) continue;
        uint64_t v = 0;
        if (f->size == 1) v = info[f->off];
        else if (f->size == 4) { uint32_t x; memcpy(&x, info + f->off, 4); v = x; }
        else memcpy(&v, info + f->off, 8);
        put_field(f->name, v, first);
        first = 0;
    }
    if (cc) emit("%s\"cc\":\"%s\"", first ? "" : ",", cc);
    emit("}");
}

/* requests sent at once: their replies (~400 bytes each) must fit the socket's receive buffer, which
 * net.core.rmem_max caps (208 KiB by default), or the kernel drops some */
#define CHUNK 128

static void poll_chunk(struct ns *s, int first, int count);

static void poll_ns(struct ns *s) {
    for (int i = 0; i < s->n; i += CHUNK)
        poll_chunk(s, s->first + i, s->n - i < CHUNK ? s->n - i : CHUNK);
}

static void poll_chunk(struct ns *s, int first, int count) {
    static unsigned char buf[1 << 20];
    if (send(s->fd, &reqs[first], sizeof(struct req) * count, 0) < 0) return;
    int left = count;
    while (left > 0) {
        ssize_t len = recv(s->fd, buf, sizeof buf, 0);
        if (len <= 0) return;
        struct nlmsghdr *h = (struct nlmsghdr *)buf;
        int seen = 0;
        for (; NLMSG_OK(h, len); h = NLMSG_NEXT(h, len)) {
            seen = 1;
            left--;   /* one answer per request: the socket, or an error (ENOENT: not there yet) */
            if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY) continue;
            int i = (int)h->nlmsg_seq - 1;
            if (i < first || i >= first + count) continue;
            struct inet_diag_msg *m = NLMSG_DATA(h);
            /* a lookup that fell on the listener or a TIME_WAIT socket is not the connection */
            if (m->idiag_state == ST_LISTEN || m->idiag_state == ST_TIME_WAIT) continue;
            if (m->id.idiag_sport != reqs[i].r.id.idiag_sport || m->id.idiag_dport != reqs[i].r.id.idiag_dport)
                continue;
            const unsigned char *info = NULL;
            int ilen = 0;
            char cc[32] = "";
            int rlen = h->nlmsg_len - NLMSG_LENGTH(sizeof *m);
            for (struct rtattr *a = (struct rtattr *)(m + 1); RTA_OK(a, rlen); a = RTA_NEXT(a, rlen)) {
                if (a->rta_type == INET_DIAG_INFO) { info = RTA_DATA(a); ilen = RTA_PAYLOAD(a); }
                else if (a->rta_type == INET_DIAG_CONG) snprintf(cc, sizeof cc, "%s", (char *)RTA_DATA(a));
            }
            if (info) report(socks[i].key, info, ilen, cc[0] ? cc : NULL);
        }
        if (!seen) return;
    }
}

/* the path of the namespace with this inode: /run/netns first, then any process living in it */
static int find_inode(unsigned long ino, char *path, size_t size) {
    const char *dirs[] = {"/run/netns", "/proc"};
    for (int d = 0; d < 2; d++) {
        DIR *dir = opendir(dirs[d]);
        if (!dir) continue;
        struct dirent *e;
        while ((e = readdir(dir))) {
            if (e->d_name[0] == '.') continue;
            if (d == 0) snprintf(path, size, "/run/netns/%s", e->d_name);
            else if (e->d_name[0] >= '0' && e->d_name[0] <= '9')
                snprintf(path, size, "/proc/%s/ns/net", e->d_name);
            else continue;
            struct stat st;
            if (stat(path, &st) == 0 && st.st_ino == ino) { closedir(dir); return 0; }
        }
        closedir(dir);
    }
    return -1;
}

static int open_in(const char *name, int home) {
    char path[512];
    if (!strncmp(name, "ino:", 4)) {
        if (find_inode(strtoul(name + 4, NULL, 10), path, sizeof path)) {
            fprintf(stderr, "no network namespace with inode %s on this machine\n", name + 4);
            exit(1);
        }
    } else snprintf(path, sizeof path, "%s", name);
    int fd = open(path, O_RDONLY);
    if (fd < 0 || setns(fd, CLONE_NEWNET) < 0) { perror(path); exit(1); }
    int s = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    if (s < 0) { perror("netlink socket"); exit(1); }
    if (setns(home, CLONE_NEWNET) < 0) { perror("setns back"); exit(1); }
    close(fd);
    int rcv = 1 << 20;
    setsockopt(s, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof rcv);
    return s;
}

static void add_sock(const char *spec) {
    char a[64], b[64];
    unsigned lp, rp;
    if (nspaces == 0 || nsocks >= MAXSOCK || sscanf(spec, "%63[^,],%u,%63[^,],%u", a, &lp, b, &rp) != 4) {
        fprintf(stderr, "--sock %s: expected LADDR,LPORT,RADDR,RPORT after a --ns\n", spec);
        exit(2);
    }
    struct req *q = &reqs[nsocks];
    memset(q, 0, sizeof *q);
    q->nlh.nlmsg_len = sizeof *q;
    q->nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    q->nlh.nlmsg_flags = NLM_F_REQUEST;
    q->nlh.nlmsg_seq = nsocks + 1;
    q->r.sdiag_family = AF_INET;
    q->r.sdiag_protocol = IPPROTO_TCP;
    q->r.idiag_ext = (1 << (INET_DIAG_INFO - 1)) | (1 << (INET_DIAG_CONG - 1));
    q->r.idiag_states = 0xFFF & ~((1 << ST_LISTEN) | (1 << ST_TIME_WAIT));
    q->r.id.idiag_sport = htons(lp);
    q->r.id.idiag_dport = htons(rp);
    inet_pton(AF_INET, a, &q->r.id.idiag_src[0]);
    inet_pton(AF_INET, b, &q->r.id.idiag_dst[0]);
    q->r.id.idiag_cookie[0] = q->r.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
    snprintf(socks[nsocks].key, sizeof socks[nsocks].key, "%u:%u", lp, rp);
    spaces[nspaces - 1].n++;
    nsocks++;
}

/* The sampler must not be the victim of the load it measures: at a test's end hundreds of iperf3 processes (each
 * a session, so an autogroup, of its own) wake at once, and a sampler at their priority missed 1.4 s of polls while
 * the flows' last data went out (study 001: "collector disagreement"). So it asks for the lowest real-time
 * priority (it sleeps between polls: a few percent of a core), else the highest nice its group may have; and, where
 * its output is a pipe, a larger one (the runner gives it a file: collectors.py). Says which: "fifo", "nice" or "". */
static const char *prioritise(void) {
    fcntl(1, F_SETPIPE_SZ, 1 << 20);
    struct sched_param sp = {.sched_priority = 1};
    if (sched_setscheduler(0, SCHED_FIFO, &sp) == 0) return "fifo";
    FILE *ag = fopen("/proc/self/autogroup", "w");
    int grouped = ag && fprintf(ag, "-10\n") > 0;
    if (ag && fclose(ag) != 0) grouped = 0;
    return setpriority(PRIO_PROCESS, 0, -10) == 0 && grouped ? "nice" : "";
}

int main(int argc, char **argv) {
    double period = 0.02;
    long count = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--period")) period = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--count")) count = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--ns")) {
            if (nspaces >= MAXNS) { fprintf(stderr, "too many --ns\n"); return 2; }
            snprintf(spaces[nspaces].name, sizeof spaces[nspaces].name, "%s", argv[i + 1]);
            spaces[nspaces].first = nsocks;
            nspaces++;
        } else if (!strcmp(argv[i], "--sock")) add_sock(argv[i + 1]);
        else { fprintf(stderr, "unknown option %s\n", argv[i]); return 2; }
    }
    signal(SIGTERM, stop);
    signal(SIGINT, stop);
    signal(SIGPIPE, SIG_IGN);
    int home = open("/proc/self/ns/net", O_RDONLY);
    if (home < 0) { perror("/proc/self/ns/net"); return 1; }
    for (int i = 0; i < nspaces; i++) spaces[i].fd = open_in(spaces[i].name, home);
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    long n = 0;
    long tick = sysconf(_SC_CLK_TCK);
    const char *sched = prioritise();
    while (running) {
        struct timespec now;
        outlen = 0;
        found_any = 0;
        clock_gettime(CLOCK_REALTIME, &now);
        emit("{\"t\":%ld.%06ld,", (long)now.tv_sec, now.tv_nsec / 1000);
        if (sched) emit("\"sched\":\"%s\",", sched);   /* the first line only */
        sched = NULL;
        emit("\"s\":{");
        for (int i = 0; i < nspaces; i++) poll_ns(&spaces[i]);
        struct tms t;
        times(&t);
        emit("},\"cpu\":%.3f}\n", (double)(t.tms_utime + t.tms_stime) / tick);
        if (fwrite(out, 1, outlen, stdout) != outlen || fflush(stdout) != 0) break;   /* the reader is gone */
        if (count && ++n >= count) break;
        long ns = (long)(period * 1e9);
        next.tv_nsec += ns % 1000000000L;
        next.tv_sec += ns / 1000000000L + next.tv_nsec / 1000000000L;
        next.tv_nsec %= 1000000000L;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec > next.tv_sec || (now.tv_sec == next.tv_sec && now.tv_nsec >= next.tv_nsec)) {
            /* fell behind (a busy machine, a slow poll): do not burst to catch up, and at real-time priority
             * still leave the CPU half a period, so a poll longer than the period cannot take a core */
            next = now;
            next.tv_nsec += ns / 2;
            next.tv_sec += next.tv_nsec / 1000000000L;
            next.tv_nsec %= 1000000000L;
        }
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
    }
    return 0;
}
