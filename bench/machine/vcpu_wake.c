/* How long a thread blocked on an idle CPU of this VM takes to wake up (bench/RESULTS.md, "This
 * machine: waking an idle vCPU").
 *
 *   cc -O2 -pthread -o bench/.work/vcpu_wake bench/machine/vcpu_wake.c
 *   bench/.work/vcpu_wake ROUNDS WAKEUPS
 *
 * A writer thread on CPU 1 writes its CLOCK_MONOTONIC time into a pipe every 1-5 ms (uniform); a
 * reader thread on CPU 0, blocked in read(2), takes the time when the read returns. Each round
 * measures WAKEUPS wake-ups twice: with CPU 0 idle ("idle"), then with a SCHED_IDLE busy loop on
 * CPU 0 ("kept awake"). The loop keeps the vCPU from halting (so waking the reader needs no exit
 * to the host) and gives way to the reader at once: on wake-up the scheduler preempts an
 * idle-policy task for any normal one. That is what `idle=poll` or the guest haltpoll cpuidle
 * driver would do. Prints one line per round and kind: p50, p90, p99 and max in microseconds, and
 * the steal time of the measurement (time the host ran something else while a vCPU of this VM had
 * work, from /proc/stat) as a share of all CPU time. Needs 2 CPUs.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int fds[2];
static long wakeups;
static double *lat;

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static void pin(int cpu)
{
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    if (sched_setaffinity(0, sizeof s, &s) != 0) {
        perror("sched_setaffinity (2 CPUs needed)");
        exit(2);
    }
}

static void *reader(void *arg)
{
    (void)arg;
    pin(0);
    for (long i = 0; i < wakeups; i++) {
        double sent;
        if (read(fds[0], &sent, sizeof sent) != sizeof sent) {
            perror("read");
            exit(1);
        }
        lat[i] = now_us() - sent;
    }
    return NULL;
}

/* Steal and all ticks of the machine so far (the "cpu" line of /proc/stat). */
static void ticks(long long *steal, long long *all)
{
    long long v[8] = {0};
    FILE *f = fopen("/proc/stat", "r");
    if (!f || fscanf(f, "cpu %lld %lld %lld %lld %lld %lld %lld %lld", &v[0], &v[1], &v[2], &v[3],
                     &v[4], &v[5], &v[6], &v[7]) != 8) {
        fprintf(stderr, "cannot read /proc/stat\n");
        exit(1);
    }
    fclose(f);
    *steal = v[7];
    *all = 0;
    for (int i = 0; i < 8; i++)
        *all += v[i];
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void measure(int round, const char *kind)
{
    pthread_t th;
    long long steal0, all0, steal1, all1;
    ticks(&steal0, &all0);
    pthread_create(&th, NULL, reader, NULL);
    for (long i = 0; i < wakeups; i++) {
        usleep(1000 + rand() % 4000);
        double t = now_us();
        if (write(fds[1], &t, sizeof t) != sizeof t) {
            perror("write");
            exit(1);
        }
    }
    pthread_join(th, NULL);
    ticks(&steal1, &all1);
    qsort(lat, wakeups, sizeof *lat, cmp);
    printf("round %d  %-11s p50 %7.1f  p90 %7.1f  p99 %8.1f  max %9.1f us  steal %4.1f %%\n", round,
           kind, lat[wakeups / 2], lat[wakeups * 9 / 10], lat[wakeups * 99 / 100],
           lat[wakeups - 1], 100.0 * (steal1 - steal0) / (all1 > all0 ? all1 - all0 : 1));
    fflush(stdout);
}

int main(int argc, char **argv)
{
    if (argc != 3 || atoi(argv[1]) < 1 || atol(argv[2]) < 100) {
        fprintf(stderr, "usage: %s ROUNDS WAKEUPS (WAKEUPS >= 100)\n", argv[0]);
        return 2;
    }
    int rounds = atoi(argv[1]);
    wakeups = atol(argv[2]);
    lat = malloc(wakeups * sizeof *lat);
    if (!lat || pipe(fds) != 0) {
        perror("setup");
        return 1;
    }
    pin(1);
    for (int r = 1; r <= rounds; r++) {
        measure(r, "idle");
        pid_t spinner = fork();
        if (spinner == 0) {
            struct sched_param none = {0};
            prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlives the probe */
            pin(0);
            sched_setscheduler(0, SCHED_IDLE, &none);
            for (;;) {
            }
        }
        usleep(100000);
        measure(r, "kept awake");
        kill(spinner, SIGKILL);
        waitpid(spinner, NULL, 0);
    }
    return 0;
}
