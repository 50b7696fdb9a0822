/*
 * be_task.c — cheap stand-in processes for bench/agent_perf.py (compiled by it into bench/.work/).
 *
 *   be_task spawn N THREADS PIDFILE   fork N best-effort processes of THREADS threads each (the main
 *                                     thread + THREADS-1 pthreads), all blocked in pause(); write
 *                                     their pids to PIDFILE (one per line, renamed into place so a
 *                                     reader never sees half a file); print "ready N" on stdout;
 *                                     on SIGTERM/SIGINT/SIGHUP kill and reap every child, exit 0.
 *   be_task hog CPU                   a latency-critical stand-in: pin to CPU, stop itself (SIGSTOP),
 *                                     and once continued spin forever.
 *
 * Why C and not Python: 1,000 Python interpreters would cost ~10 GB and seconds of start-up; the
 * benchmark wants ~3,000 cheap, idle threads whose only job is to have an affinity to change.
 * Sleeping (not spinning) BE tasks keep the LC hog the only load the agent's busy sensor sees.
 *
 * Every process asks for SIGKILL when its parent dies (PR_SET_PDEATHSIG), so an interrupted or
 * killed benchmark never leaves 1,000 orphans behind.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile sig_atomic_t stop_requested;

static void on_stop(int sig) {
    (void)sig;
    stop_requested = 1;
}

static void die_with_parent(pid_t parent) {
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) _exit(1);
    if (getppid() != parent) _exit(1); /* the parent died before prctl took effect */
}

static void *sleeper(void *arg) {
    (void)arg;
    for (;;) pause();
    return NULL;
}

static void be_child(int threads, int ready_fd, pid_t parent) {
    die_with_parent(parent);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 64 * 1024); /* idle threads need no 8 MiB stacks */
    for (int t = 1; t < threads; t++) {
        pthread_t th;
        if (pthread_create(&th, &attr, sleeper, NULL) != 0) _exit(1);
    }
    /* Tell the spawner this process has all its threads, so the pid file is complete. */
    char ok = 'k';
    if (write(ready_fd, &ok, 1) != 1) _exit(1);
    close(ready_fd);
    for (;;) pause();
}

static int spawn(int n, int threads, const char *pidfile) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    prctl(PR_SET_PDEATHSIG, SIGTERM); /* the benchmark died: clean up through on_stop */

    pid_t *pids = calloc((size_t)n, sizeof *pids);
    int fds[2];
    if (!pids || pipe(fds) != 0) return 1;
    pid_t self = getpid();
    int started = 0;
    for (int i = 0; i < n && !stop_requested; i++) {
        pid_t pid = fork();
        if (pid < 0) {
            perror("be_task: fork");
            break;
        }
        if (pid == 0) {
            close(fds[0]);
            be_child(threads, fds[1], self);
        }
        pids[started++] = pid;
    }
    close(fds[1]);
    int ready = 0;
    char buf[256];
    while (ready < started && !stop_requested) {
        ssize_t r = read(fds[0], buf, sizeof buf);
        if (r > 0) ready += (int)r;
        else if (r == 0 || errno != EINTR) break;
    }
    close(fds[0]);

    int rc = 0;
    if (ready == n && !stop_requested) {
        char tmp[4096];
        snprintf(tmp, sizeof tmp, "%s.tmp", pidfile);
        FILE *f = fopen(tmp, "w");
        if (!f) {
            perror("be_task: pid file");
            rc = 1;
        } else {
            for (int i = 0; i < started; i++) fprintf(f, "%d\n", (int)pids[i]);
            if (fclose(f) != 0 || rename(tmp, pidfile) != 0) rc = 1;
        }
        if (rc == 0) {
            printf("ready %d\n", started);
            fflush(stdout);
            sigset_t none;
            sigemptyset(&none);
            while (!stop_requested) sigsuspend(&none);
        }
    } else {
        fprintf(stderr, "be_task: only %d of %d processes came up\n", ready, n);
        rc = 1;
    }
    for (int i = 0; i < started; i++) kill(pids[i], SIGKILL);
    for (int i = 0; i < started; i++) waitpid(pids[i], NULL, 0);
    free(pids);
    return rc;
}

static int hog(int cpu) {
    pid_t parent = getppid();
    die_with_parent(parent);
    prctl(PR_SET_NAME, "lc_hog");
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0) {
        perror("be_task: sched_setaffinity");
        return 1;
    }
    /* Stop until the benchmark's SIGCONT: the load step starts exactly then, and the benchmark
     * can re-pin us meanwhile without racing our own sched_setaffinity above. */
    raise(SIGSTOP);
    volatile unsigned long x = 0;
    for (;;) x++;
}

int main(int argc, char **argv) {
    if (argc == 5 && strcmp(argv[1], "spawn") == 0) {
        int n = atoi(argv[2]), threads = atoi(argv[3]);
        if (n < 1 || threads < 1) return 2;
        return spawn(n, threads, argv[4]);
    }
    if (argc == 3 && strcmp(argv[1], "hog") == 0) return hog(atoi(argv[2]));
    fprintf(stderr, "usage: be_task spawn N THREADS PIDFILE | be_task hog CPU\n");
    return 2;
}
