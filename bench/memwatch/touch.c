/* The allocating side of bench/memwatch_perf.py (run inside the test memory cgroup).
 *
 *   touch latency ROUNDS THRESHOLD_BYTES USAGE_FILE REGION_MB HOLD_MS
 *     Each round: read the group's usage B0, mmap REGION_MB and touch it page by page, taking
 *     CLOCK_MONOTONIC after each page; print "B0 t_cross t_cross_early ns_per_page pages", where
 *     t_cross is the touch of page ceil((THRESHOLD-B0)/4096) (the one whose charge brings usage
 *     to the threshold) and t_cross_early the touch 64 pages before it (the kernel charges in
 *     batches of up to 64 pages, so the counter may cross that much earlier); hold HOLD_MS above,
 *     munmap, hold HOLD_MS below. A round touches REGION_MB plus 0-127 more pages, at random:
 *     the kernel checks thresholds once every 128 page events (charges and uncharges) of a CPU,
 *     and with the same page count in every round that check fell at the same distance past the
 *     threshold in all rounds of a run, a distance drawn anew in each run.
 *   touch bw ROUNDS REGION_MB
 *     mmap + touch + munmap REGION_MB ROUNDS times; print bytes per second.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096UL

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static uint64_t read_usage(const char *path) {
    FILE *f = fopen(path, "r");
    unsigned long long v = 0;
    if (!f || fscanf(f, "%llu", &v) != 1) {
        perror(path);
        exit(1);
    }
    fclose(f);
    return v;
}

static char *map(size_t bytes) {
    char *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    return p;
}

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

int main(int argc, char **argv) {
    if (argc >= 7 && !strcmp(argv[1], "latency")) {
        long rounds = atol(argv[2]);
        uint64_t threshold = strtoull(argv[3], NULL, 10);
        const char *usage_file = argv[4];
        size_t most = ((size_t)atol(argv[5]) << 20) / PAGE + 127;
        long hold = atol(argv[6]);
        uint64_t *ts = calloc(most, sizeof *ts);
        memset(ts, 1, most * sizeof *ts); /* charged before the first round */
        srand(getpid());
        for (long r = 0; r < rounds; r++) {
            size_t pages = most - rand() % 128, bytes = pages * PAGE;
            uint64_t b0 = read_usage(usage_file);
            if (b0 >= threshold) {
                fprintf(stderr, "usage %llu already at the threshold\n", (unsigned long long)b0);
                return 1;
            }
            size_t k = (threshold - b0 + PAGE - 1) / PAGE; /* pages to touch to reach it */
            if (k > pages) {
                fprintf(stderr, "the region is too small to reach the threshold\n");
                return 1;
            }
            char *p = map(bytes);
            uint64_t start = now_ns();
            for (size_t i = 0; i < pages; i++) {
                p[i * PAGE] = 1;
                ts[i] = now_ns();
            }
            size_t early = k > 64 ? k - 64 : 1;
            printf("%llu %llu %llu %.1f %zu\n", (unsigned long long)b0,
                   (unsigned long long)ts[k - 1], (unsigned long long)ts[early - 1],
                   (double)(ts[pages - 1] - start) / pages, pages);
            fflush(stdout);
            sleep_ms(hold);
            munmap(p, bytes);
            sleep_ms(hold);
        }
        return 0;
    }
    if (argc >= 4 && !strcmp(argv[1], "bw")) {
        long rounds = atol(argv[2]);
        size_t bytes = (size_t)atol(argv[3]) << 20;
        uint64_t t0 = now_ns();
        for (long r = 0; r < rounds; r++) {
            char *p = map(bytes);
            for (size_t i = 0; i < bytes; i += PAGE)
                p[i] = 1;
            munmap(p, bytes);
        }
        double s = (double)(now_ns() - t0) / 1e9;
        printf("%.0f\n", (double)bytes * rounds / s);
        return 0;
    }
    fprintf(stderr, "usage: touch latency ROUNDS THRESHOLD USAGE_FILE REGION_MB HOLD_MS | touch bw ROUNDS REGION_MB\n");
    return 2;
}
