/* guestd: the traffic end inside a host_guest guest (see __init__.py). Built with `gcc -static`.
 *
 * One poll() loop, no threads, so the sinks' work is the guest's own CPU time, as an application's is:
 *   TCP 5001  sink: reads each connection to EOF, then writes back the byte count it read and closes;
 *   UDP 5002  sink: counts datagrams and bytes;
 *   TCP 5000  control, one command per connection, one reply line of key=value pairs:
 *             "hog 1" starts a busy loop pinned to each online CPU, "hog 0" stops them,
 *             "stats" only replies. hog_work counts the hogs' loop iterations since boot (the
 *             work they did: one counter per CPU in memory shared with the forked hogs).
 * Prints "HG READY cpus=N" on stdout (the serial console) once every socket listens.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

enum { CTL_PORT = 5000, TCP_PORT = 5001, UDP_PORT = 5002, MAXCONN = 16, MAXHOGS = 64 };
enum { CTL, DATA };

struct conn {
	int fd, kind, len;
	unsigned long long bytes;
	char line[128];
};

static struct conn conns[MAXCONN];
static int nconns;
static pid_t hogs[MAXHOGS];
static int nhogs;
static long ncpus;
/* One counter per hog, each on a cache line of its own, in memory the forked hogs share. */
static struct {
	volatile unsigned long long n;
	char pad[56];
} *hog_work;
static unsigned long long udp_bytes, udp_packets, tcp_bytes, tcp_streams;
static char buf[1 << 16];

static int listen_on(int type, int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
	int one = 1, fd = socket(AF_INET, type, 0);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) ||
	    bind(fd, (struct sockaddr *)&a, sizeof a) || (type == SOCK_STREAM && listen(fd, 16))) {
		perror("guestd: socket");
		exit(1);
	}
	fcntl(fd, F_SETFL, O_NONBLOCK);
	return fd;
}

static void hog(int on)
{
	for (long k = nhogs; on && k < ncpus && k < MAXHOGS; k++) {
		pid_t pid = fork();
		if (pid == 0) {
			/* The child must not hold the sockets: a connection closed by the parent would
			 * stay open (no FIN) while a hog holds it, and the host would wait for its end. */
			for (int fd = 3; fd < 1024; fd++)
				close(fd);
			cpu_set_t set;
			CPU_ZERO(&set);
			CPU_SET(k, &set);
			sched_setaffinity(0, sizeof set, &set);
			struct sched_param idle = {0};
			sched_setscheduler(0, SCHED_IDLE, &idle);
			for (;;)
				hog_work[k].n++;
		}
		if (pid > 0)
			hogs[nhogs++] = pid;
	}
	for (; !on && nhogs > 0; nhogs--) {
		kill(hogs[nhogs - 1], SIGKILL);
		waitpid(hogs[nhogs - 1], NULL, 0);
	}
}

/* The guest kernel's count of datagrams dropped because a UDP socket was full (/proc/net/snmp's
 * Udp RcvbufErrors): a loss inside the guest, which the host's tap counters cannot see. */
static long long udp_rcvbuf_errors(void)
{
	char head[512], vals[512];
	long long v = -1;
	FILE *f = fopen("/proc/net/snmp", "r");
	while (f && fgets(head, sizeof head, f))
		if (strncmp(head, "Udp:", 4) == 0 && fgets(vals, sizeof vals, f)) {
			char *hs, *vs, *h = strtok_r(head, " \n", &hs), *x = strtok_r(vals, " \n", &vs);
			for (; h && x; h = strtok_r(NULL, " \n", &hs), x = strtok_r(NULL, " \n", &vs))
				if (strcmp(h, "RcvbufErrors") == 0)
					v = atoll(x);
			break;
		}
	if (f)
		fclose(f);
	return v;
}

static void reply(int fd, const char *cmd)
{
	char out[384];
	unsigned long long work = 0;
	for (int k = 0; k < MAXHOGS; k++)
		work += hog_work[k].n;
	if (strncmp(cmd, "hog ", 4) == 0)
		hog(atoi(cmd + 4));
	else if (strcmp(cmd, "stats") != 0) {
		dprintf(fd, "error=unknown-command\n");
		return;
	}
	snprintf(out, sizeof out,
		 "udp_bytes=%llu udp_packets=%llu udp_rcvbuf_errors=%lld tcp_bytes=%llu tcp_streams=%llu "
		 "hogs=%d cpus=%ld hog_work=%llu\n",
		 udp_bytes, udp_packets, udp_rcvbuf_errors(), tcp_bytes, tcp_streams, nhogs, ncpus, work);
	write(fd, out, strlen(out));
}

static void drop(int i)
{
	close(conns[i].fd);
	conns[i] = conns[--nconns];
}

/* Reads what connection i has; returns 1 when it is done (and closed). */
static int serve(int i)
{
	struct conn *c = &conns[i];
	ssize_t n = read(c->fd, buf, sizeof buf);
	if (n < 0 && errno == EINTR)
		return 0;
	if (c->kind == DATA) {
		if (n > 0) {
			c->bytes += n;
			tcp_bytes += n;
			return 0;
		}
		dprintf(c->fd, "%llu\n", c->bytes);
		tcp_streams++;
		drop(i);
		return 1;
	}
	if (n > 0 && c->len + n < (ssize_t)sizeof c->line) {
		memcpy(c->line + c->len, buf, n);
		c->len += n;
		if (!memchr(c->line, '\n', c->len))
			return 0;
	}
	c->line[c->len] = 0;
	c->line[strcspn(c->line, "\r\n")] = 0;
	reply(c->fd, c->line);
	drop(i);
	return 1;
}

int main(void)
{
	int ctl = listen_on(SOCK_STREAM, CTL_PORT), tcp = listen_on(SOCK_STREAM, TCP_PORT);
	int udp = listen_on(SOCK_DGRAM, UDP_PORT), rcvbuf = 8 << 20;
	/* A big socket buffer, so that a burst the vCPU delivers at once after a wait on the host is
	 * kept: a flood's losses then happen at the tap (what the host sees), not in the guest. */
	setsockopt(udp, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof rcvbuf);
	ncpus = sysconf(_SC_NPROCESSORS_ONLN);
	hog_work = mmap(NULL, MAXHOGS * sizeof *hog_work, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (hog_work == MAP_FAILED) {
		perror("guestd: mmap");
		exit(1);
	}
	signal(SIGPIPE, SIG_IGN);
	printf("HG READY cpus=%ld\n", ncpus);
	fflush(stdout);
	for (;;) {
		struct pollfd p[3 + MAXCONN] = {{ctl, POLLIN, 0}, {tcp, POLLIN, 0}, {udp, POLLIN, 0}};
		int n = nconns;
		for (int i = 0; i < n; i++)
			p[3 + i] = (struct pollfd){conns[i].fd, POLLIN, 0};
		if (poll(p, 3 + n, -1) < 0)
			continue;
		/* Connections first, from the last, so that drop() (which moves the last one into the
		 * freed place) never moves one not yet looked at. */
		for (int i = n - 1; i >= 0; i--)
			if (p[3 + i].revents)
				serve(i);
		/* A bounded batch per wake-up: a flood must not starve the control port. */
		for (int k = 0; k < 256 && (p[2].revents & POLLIN); k++) {
			ssize_t got = recv(udp, buf, sizeof buf, MSG_DONTWAIT);
			if (got < 0)
				break;
			udp_bytes += got;
			udp_packets++;
		}
		for (int k = 0; k < 2; k++) {
			if (!(p[k].revents & POLLIN) || nconns == MAXCONN)
				continue;
			int fd = accept(k == 0 ? ctl : tcp, NULL, NULL);
			if (fd >= 0)
				conns[nconns++] = (struct conn){.fd = fd, .kind = k == 0 ? CTL : DATA};
		}
	}
}
