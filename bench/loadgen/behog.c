/*
 * Best-effort CPU hog for the agent experiment: spins on integer work and counts iterations, the
 * "BE work done" (the thesis used pts/openssl signs/s; any CPU-bound loop measures the same thing:
 * how much CPU time the BE side got and how fast it ran there).
 *
 * SIGUSR1 prints one line "<iterations> <CLOCK_MONOTONIC ns> <cpu the task is on>" to stdout, so the
 * experiment script can read the counter at the start and the end of its measurement window
 * without restarting the hog. SIGTERM/SIGINT print the same line and exit.
 *
 * Build: cc -O2 -o behog behog.c   (the experiment script does this into bench/.work/).
 */
#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t report, stop;
static void on_usr1(int sig) { (void)sig; report = 1; }
static void on_term(int sig) { (void)sig; stop = 1; }

static void print_counter(uint64_t iters) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    printf("%llu %lld %d\n", (unsigned long long)iters, (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec,
           sched_getcpu());
    fflush(stdout);
}

int main(void) {
    struct sigaction sa = {0};
    sa.sa_handler = on_usr1;
    sigaction(SIGUSR1, &sa, NULL);
    sa.sa_handler = on_term;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    uint64_t x = 88172645463325252ULL, iters = 0;
    for (;;) {
        /* 4096 xorshift steps per iteration: long enough that the flag checks cost nothing,
         * short enough (~10 us) that a report is prompt. */
        for (int i = 0; i < 4096; i++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
        }
        __asm__ volatile("" : "+r"(x)); /* keep the loop from being optimised away */
        iters++;
        if (report) {
            report = 0;
            print_counter(iters);
        }
        if (stop) {
            print_counter(iters);
            return 0;
        }
    }
}
