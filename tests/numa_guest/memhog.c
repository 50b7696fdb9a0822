/* A child that allocates, for memwatch's guest test (tests/test_memwatch_guest.py): maps MIB MiB of
 * anonymous memory, touches every page (so each is charged to the caller's memory cgroup), prints
 * "memhog allocated MIB", holds it HOLD_MS milliseconds and exits (which frees it all).
 * Built on the host with `cc -static` (the guest's initramfs has no libc).
 *
 *     memhog MIB [HOLD_MS]
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

int main(int argc, char **argv) {
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: memhog MIB [HOLD_MS]\n");
        return 2;
    }
    long mib = atol(argv[1]);
    long hold_ms = argc == 3 ? atol(argv[2]) : 0;
    if (mib <= 0 || hold_ms < 0) {
        fprintf(stderr, "memhog: MIB must be above 0 and HOLD_MS at least 0\n");
        return 2;
    }
    size_t len = (size_t)mib << 20;
    char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("memhog: mmap");
        return 1;
    }
    for (size_t i = 0; i < len; i += 4096)
        p[i] = 1;
    printf("memhog allocated %ld\n", mib);
    fflush(stdout);
    struct timespec ts = {hold_ms / 1000, (hold_ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    return 0;
}
