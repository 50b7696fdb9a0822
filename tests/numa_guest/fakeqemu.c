/* A stand-in for a QEMU process, for the host agent's cgroup v2 test in the NUMA guest
 * (tests/test_host_pools_v2.py): what `real::discover` looks for and nothing more. Installed as
 * /bin/qemu-system-x86_64 (the executable's name marks a QEMU) and started as
 *
 *     qemu-system-x86_64 -name guest=NAME,debug-threads=on -smp N
 *
 * it starts N threads named `CPU <i>/TCG` that spin (vCPUs), while the main thread (QEMU's main
 * loop and I/O) sleeps. Built on the host with `cc -static -pthread` (the initramfs has no libc).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void *vcpu(void *arg) {
    char name[16];
    snprintf(name, sizeof name, "CPU %ld/TCG", (long)arg);
    pthread_setname_np(pthread_self(), name);
    for (volatile unsigned long n = 0;; n++)
        ;
    return NULL;
}

int main(int argc, char **argv) {
    long vcpus = 1;
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], "-smp") == 0)
            vcpus = atol(argv[i + 1]);
    if (vcpus < 1 || vcpus > 64) {
        fprintf(stderr, "usage: qemu-system-x86_64 -name guest=NAME,debug-threads=on -smp N\n");
        return 2;
    }
    for (long i = 0; i < vcpus; i++) {
        pthread_t t;
        if (pthread_create(&t, NULL, vcpu, (void *)i) != 0) {
            perror("pthread_create");
            return 1;
        }
    }
    for (;;)
        pause();
}
