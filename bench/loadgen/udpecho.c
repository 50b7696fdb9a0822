/*
 * UDP echo on loopback for the host validation (bench/host_validate.py): a server that answers
 * each datagram, and a client that sends requests at random gaps and prints each round trip.
 *
 *   udpecho server PORT             answers on 127.0.0.1:PORT until SIGTERM; then prints
 *                                   "<requests> <cpu ns used>" (its own user + system time
 *                                   since it printed "ready": not its start, whose fork from a
 *                                   large parent and exec cost 2-30 ms, charged to the child)
 *   udpecho client PORT N GAP_MS SEED
 *                                   N requests, gaps uniform in [GAP_MS/2, 3 GAP_MS/2]; prints one
 *                                   round trip per line in ns ("lost" after 1 s without a reply)
 *
 * Build: cc -O2 -o udpecho udpecho.c   (the bench script does this into bench/.work/).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stop;
static void on_term(int sig) { (void)sig; stop = 1; }

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static struct sockaddr_in loopback(int port) {
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
}

static long long cpu_ns(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000LL +
           (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000LL;
}

static int server(int port) {
    struct sigaction sa = {0};
    sa.sa_handler = on_term; /* no SA_RESTART: recvfrom returns EINTR */
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in a = loopback(port);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) < 0) {
        perror("udpecho server: bind");
        return 1;
    }
    long long ready = cpu_ns();
    printf("ready\n");
    fflush(stdout);
    char buf[2048];
    long long served = 0;
    while (!stop) {
        struct sockaddr_in from;
        socklen_t len = sizeof from;
        ssize_t n = recvfrom(fd, buf, sizeof buf, 0, (struct sockaddr *)&from, &len);
        if (n < 0) {
            if (errno == EINTR) continue;
            perror("udpecho server: recvfrom");
            return 1;
        }
        sendto(fd, buf, (size_t)n, 0, (struct sockaddr *)&from, len);
        served++;
    }
    printf("%lld %lld\n", served, cpu_ns() - ready);
    return 0;
}

static int client(int port, long n, double gap_ms, unsigned seed) {
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in to = loopback(port);
    struct timeval tv = {1, 0};
    if (fd < 0 || connect(fd, (struct sockaddr *)&to, sizeof to) < 0 ||
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) < 0) {
        perror("udpecho client");
        return 1;
    }
    srand(seed);
    char req[100] = {0}, rep[2048]; /* a 100-byte payload, like ping's */
    for (long i = 0; i < n; i++) {
        double gap = gap_ms * (0.5 + (double)rand() / RAND_MAX);
        struct timespec ts = {(time_t)(gap / 1000), (long)(gap * 1e6) % 1000000000L};
        nanosleep(&ts, NULL);
        memcpy(req, &i, sizeof i);
        int64_t t0 = now_ns();
        if (send(fd, req, sizeof req, 0) < 0) {
            perror("udpecho client: send");
            return 1;
        }
        for (;;) { /* skip a late reply to an earlier request */
            ssize_t got = recv(fd, rep, sizeof rep, 0);
            if (got < 0) {
                printf("lost\n");
                break;
            }
            long id;
            memcpy(&id, rep, sizeof id);
            if (id == i) {
                printf("%lld\n", (long long)(now_ns() - t0));
                break;
            }
        }
    }
    fflush(stdout);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "server") == 0) return server(atoi(argv[2]));
    if (argc == 6 && strcmp(argv[1], "client") == 0)
        return client(atoi(argv[2]), atol(argv[3]), atof(argv[4]), (unsigned)atoi(argv[5]));
    fprintf(stderr, "usage: udpecho server PORT | udpecho client PORT N GAP_MS SEED\n");
    return 2;
}
