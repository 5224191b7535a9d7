/*
 * bench-getstatus PORT [THREADS] [N]: THREADS threads (8), each N (100)
 * dyno-style getStatus requests on loopback TCP, a fresh connection each,
 * all threads starting together; prints each request's time in us, one a
 * line. The clients of bench/footprint.py --cclient: threads of one C
 * process spend a few us of CPU a request where a Python process spends
 * about 100, so on a small machine their own wait for a CPU hides less of
 * the daemon's tail.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int port, n;
static double *lat;
static pthread_barrier_t start;

static double now_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static void *client(void *arg)
{
	static const char body[] = "{\"fn\":\"getStatus\"}";
	struct sockaddr_in a = { .sin_family = AF_INET };
	size_t id = (size_t)(uintptr_t)arg;
	int32_t len = (int32_t)(sizeof(body) - 1), size;
	char req[4 + sizeof(body)];
	static __thread char buf[65536];

	memcpy(req, &len, 4); /* dyno's framing: a native-order int32 length */
	memcpy(req + 4, body, (size_t)len);
	a.sin_port = htons((uint16_t)port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	pthread_barrier_wait(&start);
	for (int i = 0; i < n; i++) {
		double t0 = now_us();
		int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

		if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof(a)) < 0) {
			perror("bench-getstatus: connect");
			exit(1);
		}
		if (write(s, req, 4 + (size_t)len) != 4 + len ||
		    recv(s, &size, 4, MSG_WAITALL) != 4 || size <= 0 ||
		    (size_t)size >= sizeof(buf) || recv(s, buf, (size_t)size, MSG_WAITALL) != size) {
			fprintf(stderr, "bench-getstatus: no reply\n");
			exit(1);
		}
		close(s);
		buf[size] = 0;
		if (strstr(buf, "\"status\"") == NULL) {
			fprintf(stderr, "bench-getstatus: not a getStatus reply\n");
			exit(1);
		}
		lat[id * (size_t)n + (size_t)i] = now_us() - t0;
	}
	return NULL;
}

int main(int argc, char **argv)
{
	int threads = argc > 2 ? atoi(argv[2]) : 8;
	pthread_t t[256];

	if (argc < 2 || argc > 4) {
		fprintf(stderr, "usage: bench-getstatus PORT [THREADS] [N]\n");
		return 2;
	}
	port = atoi(argv[1]);
	n = argc > 3 ? atoi(argv[3]) : 100;
	if (port <= 0 || threads < 1 || threads > 256 || n < 1) {
		fprintf(stderr, "bench-getstatus: bad arguments\n");
		return 2;
	}
	lat = calloc((size_t)threads * (size_t)n, sizeof(double));
	if (lat == NULL)
		return 1;
	pthread_barrier_init(&start, NULL, (unsigned)threads);
	for (int i = 0; i < threads; i++)
		if (pthread_create(&t[i], NULL, client, (void *)(uintptr_t)i) != 0)
			return 1;
	for (int i = 0; i < threads; i++)
		pthread_join(t[i], NULL);
	for (size_t i = 0; i < (size_t)threads * (size_t)n; i++)
		printf("%.1f\n", lat[i]);
	free(lat);
	return 0;
}
