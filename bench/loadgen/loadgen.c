/*
 * Open-loop memcached `set` load generator for the agent experiment (bench/agent_experiment.py).
 *
 * Thesis §5.1: libmemcached clients send write requests in batches, one batch every gauss()
 * interval. This program does the same with the memcached text protocol over a few loopback TCP
 * connections, from one thread driven by epoll + an absolute timerfd, so it costs a few per cent of
 * one CPU at a few thousand requests/s and never dominates a 2-CPU box.
 *
 * Open loop: batch i is due at a fixed schedule that does not wait for replies, and latency is
 * measured from that *intended* time. A client that waits for replies before sending would send
 * less exactly when the server is slow and so hide the slowness ("coordinated omission"); here a
 * stalled server or a stalled generator both show up as latency. The latency from the actual
 * write() is reported too ("sent"), to tell generator lateness from server lateness.
 *
 * Output: one JSON object (summary + per-second counts) on stdout or --out FILE.
 * Build: cc -O2 -o loadgen loadgen.c -lm   (the experiment script does this into bench/.work/).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#define MAX_CONNS 16
#define RING 65536 /* outstanding requests per connection; far above what a few k req/s needs */

typedef struct {
    int64_t intended, sent;
} slot_t;

typedef struct {
    int fd;
    char *out;
    size_t out_len, out_cap, out_off;
    char in[65536];
    size_t in_len;
    slot_t ring[RING];
    size_t head, tail; /* tail: next to push; head: oldest outstanding */
    size_t unsent;     /* the newest `unsent` ring entries have bytes not yet written */
} conn_t;

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* xorshift64*: cheap, seedable, good enough for key choice and Box-Muller. */
static uint64_t rng_state = 88172645463325252ULL;
static uint64_t rng_next(void) {
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ULL;
}
static double rng_unit(void) { return ((rng_next() >> 11) + 0.5) / 9007199254740992.0; }
static double rng_gauss(void) {
    return sqrt(-2.0 * log(rng_unit())) * cos(2.0 * M_PI * rng_unit());
}

typedef struct {
    int64_t *v;
    size_t n, cap;
} vec_t;
static void vec_push(vec_t *a, int64_t x) {
    if (a->n == a->cap) {
        a->cap = a->cap ? a->cap * 2 : 65536;
        a->v = realloc(a->v, a->cap * sizeof *a->v);
        if (!a->v) { perror("realloc"); exit(1); }
    }
    a->v[a->n++] = x;
}
static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}
/* Nearest-rank percentile on a sorted array. */
static double pct(const vec_t *a, double p) {
    if (!a->n) return NAN;
    size_t k = (size_t)ceil(p / 100.0 * a->n);
    if (k < 1) k = 1;
    return a->v[k - 1] / 1000.0;
}
static void print_stats(FILE *f, const char *name, vec_t *a) {
    qsort(a->v, a->n, sizeof *a->v, cmp_i64);
    double sum = 0;
    for (size_t i = 0; i < a->n; i++) sum += a->v[i];
    double mean = a->n ? sum / a->n / 1000.0 : NAN;
    /* JSON has no NaN; an empty window prints nulls. */
    if (!a->n) {
        fprintf(f, "\"%s\": null", name);
        return;
    }
    fprintf(f,
            "\"%s\": {\"mean\": %.1f, \"p50\": %.1f, \"p95\": %.1f, \"p99\": %.1f, \"p999\": %.1f, "
            "\"max\": %.1f}",
            name, mean, pct(a, 50), pct(a, 95), pct(a, 99), pct(a, 99.9), a->v[a->n - 1] / 1000.0);
}

static void out_append(conn_t *c, const char *s, size_t n) {
    if (c->out_len + n > c->out_cap) {
        /* compact before growing: the written prefix is dead */
        if (c->out_off) {
            memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
            c->out_len -= c->out_off;
            c->out_off = 0;
        }
        while (c->out_len + n > c->out_cap) c->out_cap = c->out_cap ? c->out_cap * 2 : 65536;
        c->out = realloc(c->out, c->out_cap);
        if (!c->out) { perror("realloc"); exit(1); }
    }
    memcpy(c->out + c->out_len, s, n);
    c->out_len += n;
}

/* Write what the socket takes now; mark the requests whose bytes are all out as sent. Partial
 * writes are rare on loopback, so "sent" = time of the write() that carried the request's
 * last byte, approximated per flush. */
static int flush_conn(conn_t *c, int epfd, int want_out_now) {
    while (c->out_off < c->out_len) {
        ssize_t w = write(c->fd, c->out + c->out_off, c->out_len - c->out_off);
        if (w < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) break;
            if (errno == EINTR) continue;
            perror("write");
            return -1;
        }
        c->out_off += (size_t)w;
    }
    int64_t t = now_ns();
    if (c->out_off == c->out_len) {
        for (size_t i = 0; i < c->unsent; i++) c->ring[(c->tail - 1 - i) % RING].sent = t;
        c->unsent = 0;
        c->out_off = c->out_len = 0;
    }
    struct epoll_event ev = {.events = EPOLLIN | (c->out_off < c->out_len ? EPOLLOUT : 0),
                             .data.ptr = c};
    if (want_out_now || c->out_off < c->out_len) epoll_ctl(epfd, EPOLL_CTL_MOD, c->fd, &ev);
    return 0;
}

static void usage(void) {
    fprintf(stderr,
            "usage: loadgen --port P [--host 127.0.0.1] [--rate 3000] [--batch 10] [--gap-sd 0.3]\n"
            "               [--conns 4] [--warmup 10] [--duration 45] [--value-size 100]\n"
            "               [--keys 10000] [--seed 1] [--out FILE]\n");
    exit(2);
}

int main(int argc, char **argv) {
    const char *host = "127.0.0.1", *out_path = NULL;
    int port = 0, batch = 10, nconns = 4, value_size = 100, keys = 10000;
    double rate = 3000, gap_sd = 0.3, warmup = 10, duration = 45;
    uint64_t seed = 1;
    static struct option opts[] = {
        {"host", 1, 0, 'h'},  {"port", 1, 0, 'p'},    {"rate", 1, 0, 'r'},       {"batch", 1, 0, 'b'},
        {"gap-sd", 1, 0, 'g'}, {"conns", 1, 0, 'c'},  {"warmup", 1, 0, 'w'},     {"duration", 1, 0, 'd'},
        {"value-size", 1, 0, 'v'}, {"keys", 1, 0, 'k'}, {"seed", 1, 0, 's'},     {"out", 1, 0, 'o'},
        {0, 0, 0, 0}};
    int o;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (o) {
        case 'h': host = optarg; break;
        case 'p': port = atoi(optarg); break;
        case 'r': rate = atof(optarg); break;
        case 'b': batch = atoi(optarg); break;
        case 'g': gap_sd = atof(optarg); break;
        case 'c': nconns = atoi(optarg); break;
        case 'w': warmup = atof(optarg); break;
        case 'd': duration = atof(optarg); break;
        case 'v': value_size = atoi(optarg); break;
        case 'k': keys = atoi(optarg); break;
        case 's': seed = strtoull(optarg, NULL, 10); break;
        case 'o': out_path = optarg; break;
        default: usage();
        }
    }
    if (port <= 0 || rate <= 0 || batch < 1 || nconns < 1 || nconns > MAX_CONNS || duration <= 0 ||
        value_size < 1 || value_size > 1 << 20 || keys < 1)
        usage();
    rng_state ^= seed * 0x9E3779B97F4A7C15ULL;
    if (!rng_state) rng_state = 1;

    int epfd = epoll_create1(0);
    static conn_t conns[MAX_CONNS];
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
    if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) { fprintf(stderr, "bad host %s\n", host); return 2; }
    for (int i = 0; i < nconns; i++) {
        conn_t *c = &conns[i];
        c->fd = socket(AF_INET, SOCK_STREAM, 0);
        int one = 1;
        /* Nagle would hold back small writes while a reply is outstanding and add its delay to
         * every latency sample. */
        setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (connect(c->fd, (struct sockaddr *)&sa, sizeof sa) < 0) { perror("connect"); return 1; }
        /* non-blocking after connect: a stalled server must not stall the schedule */
        fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK);
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        epoll_ctl(epfd, EPOLL_CTL_ADD, c->fd, &ev);
    }
    int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK);
    struct epoll_event tev = {.events = EPOLLIN, .data.ptr = NULL};
    epoll_ctl(epfd, EPOLL_CTL_ADD, tfd, &tev);

    char *value = malloc(value_size + 2);
    memset(value, 'x', value_size);
    memcpy(value + value_size, "\r\n", 2);

    const double mean_gap_ns = batch / rate * 1e9;
    const int64_t t0 = now_ns();
    const int64_t win_start = t0 + (int64_t)(warmup * 1e9);
    const int64_t win_end = win_start + (int64_t)(duration * 1e9);
    const int64_t drain_end = win_end + 2000000000LL; /* replies later than 2 s count as lost */
    const int nsec = (int)ceil(duration);
    long *per_sec = calloc(nsec, sizeof(long));
    vec_t lat = {0}, lat_sent = {0};
    long sent_win = 0, done_win = 0, errors = 0, recv_in_win = 0, outstanding = 0, scheduled = 0;
    int64_t next_batch = t0;
    int conn_rr = 0;
    int generating = 1;

    for (;;) {
        int64_t now = now_ns();
        if (generating) {
            /* Catch up on every batch that is due: open loop, the schedule never slips. */
            while (next_batch <= now && next_batch < win_end) {
                for (int j = 0; j < batch; j++) {
                    conn_t *c = &conns[conn_rr];
                    conn_rr = (conn_rr + 1) % nconns;
                    if ((c->tail - c->head) >= RING) { errors++; continue; } /* ring full: drop */
                    char hdr[96];
                    int n = snprintf(hdr, sizeof hdr, "set k%u 0 0 %d\r\n",
                                     (unsigned)(rng_next() % (uint64_t)keys), value_size);
                    out_append(c, hdr, (size_t)n);
                    out_append(c, value, (size_t)value_size + 2);
                    c->ring[c->tail % RING] = (slot_t){next_batch, 0};
                    c->tail++;
                    c->unsent++;
                    outstanding++;
                    scheduled++;
                    if (next_batch >= win_start) sent_win++;
                }
                double gap = mean_gap_ns + gap_sd * mean_gap_ns * rng_gauss();
                next_batch += (int64_t)(gap > 0 ? gap : 0); /* gauss() may go negative: clip */
            }
            for (int i = 0; i < nconns; i++)
                if (conns[i].out_len > conns[i].out_off && flush_conn(&conns[i], epfd, 0) < 0) return 1;
            if (next_batch >= win_end) generating = 0;
        }
        if (!generating && (outstanding == 0 || now >= drain_end)) break;
        int64_t wake = generating ? next_batch : drain_end;
        struct itimerspec its = {.it_value = {.tv_sec = wake / 1000000000LL, .tv_nsec = wake % 1000000000LL}};
        timerfd_settime(tfd, TFD_TIMER_ABSTIME, &its, NULL);

        struct epoll_event evs[MAX_CONNS + 1];
        int n = epoll_wait(epfd, evs, MAX_CONNS + 1, -1);
        if (n < 0) {
            if (errno == EINTR) continue;
            perror("epoll_wait");
            return 1;
        }
        for (int e = 0; e < n; e++) {
            conn_t *c = evs[e].data.ptr;
            if (!c) {
                uint64_t exp;
                while (read(tfd, &exp, sizeof exp) > 0) {}
                continue;
            }
            if (evs[e].events & EPOLLOUT && flush_conn(c, epfd, 1) < 0) return 1;
            if (!(evs[e].events & (EPOLLIN | EPOLLERR | EPOLLHUP))) continue;
            for (;;) {
                ssize_t r = read(c->fd, c->in + c->in_len, sizeof c->in - c->in_len);
                if (r < 0) {
                    if (errno == EINTR) continue;
                    if (errno != EAGAIN && errno != EWOULDBLOCK) { perror("read"); return 1; }
                    break;
                }
                if (r == 0) { fprintf(stderr, "loadgen: server closed the connection\n"); return 1; }
                c->in_len += (size_t)r;
                int64_t t = now_ns();
                /* one reply line per request, in request order on each connection */
                size_t pos = 0;
                for (;;) {
                    char *nl = memmem(c->in + pos, c->in_len - pos, "\r\n", 2);
                    if (!nl) break;
                    size_t len = (size_t)(nl - (c->in + pos));
                    int ok = len == 6 && memcmp(c->in + pos, "STORED", 6) == 0;
                    pos += len + 2;
                    if (c->head == c->tail) { fprintf(stderr, "loadgen: unexpected reply\n"); return 1; }
                    slot_t s = c->ring[c->head % RING];
                    c->head++;
                    outstanding--;
                    if (!ok) { errors++; continue; }
                    if (t >= win_start && t < win_end) {
                        recv_in_win++;
                        per_sec[(t - win_start) / 1000000000LL]++;
                    }
                    if (s.intended >= win_start && s.intended < win_end) {
                        done_win++;
                        vec_push(&lat, t - s.intended);
                        vec_push(&lat_sent, t - (s.sent ? s.sent : s.intended));
                    }
                }
                memmove(c->in, c->in + pos, c->in_len - pos);
                c->in_len -= pos;
                if ((size_t)r < sizeof c->in) break;
            }
        }
    }

    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double cpu_s = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
    double wall_s = (now_ns() - t0) / 1e9;
    FILE *f = out_path ? fopen(out_path, "w") : stdout;
    if (!f) { perror(out_path); return 1; }
    fprintf(f, "{\"offered_rate\": %.1f, \"batch\": %d, \"gap_sd_frac\": %.3f, \"conns\": %d, "
               "\"value_size\": %d, \"keys\": %d, \"warmup_s\": %.1f, \"window_s\": %.1f, ",
            rate, batch, gap_sd, nconns, value_size, keys, warmup, duration);
    fprintf(f, "\"scheduled\": %ld, \"sent_in_window\": %ld, \"done_in_window\": %ld, \"errors\": %ld, "
               "\"lost\": %ld, \"qps\": %.1f, \"cpu_s\": %.3f, \"wall_s\": %.3f, ",
            scheduled, sent_win, done_win, errors, outstanding, recv_in_win / duration, cpu_s, wall_s);
    print_stats(f, "lat_us", &lat);
    fprintf(f, ", ");
    print_stats(f, "lat_sent_us", &lat_sent);
    fprintf(f, ", \"per_second\": [");
    for (int i = 0; i < nsec; i++) fprintf(f, "%s%ld", i ? ", " : "", per_sec[i]);
    fprintf(f, "]}\n");
    if (out_path) fclose(f);
    return 0;
}
