/*
 * A second receiving end for `make bench` on the Pusher side, in plain C: one WebSocket
 * connection (RFC 6455, no TLS, no extensions) speaking just enough Pusher protocol 7 to
 * subscribe to one public channel (docs/pusher-protocol.md §1: connection_established, pusher:subscribe,
 * pusher_internal:subscription_succeeded; pusher:ping answered with pusher:pong, WebSocket
 * pings with pongs). It exists to show that the Swift receiver (pusher-bench-subscriber) is not
 * the bottleneck: `bench.py --pusher-receiver c` swaps it in, same contract:
 *
 *     ws_sub PORT KEY CHANNEL EVENT EXPECT IDLE_SECONDS TOTAL_SECONDS LATENCY_FILE
 *
 * Prints "ready" after the subscription succeeded; counts events named EVENT whose data holds
 * \"seq\":N and \"sent_at_ns\":T (the data is a JSON string, so its quotes arrive escaped);
 * stops and reports like c_sub.c.
 */
#define _GNU_SOURCE /* memmem */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int sock = -1;

static long long clock_ns(clockid_t clock)
{
	struct timespec ts;
	clock_gettime(clock, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void send_all(const void *data, size_t length)
{
	const char *p = data;
	while (length > 0) {
		ssize_t n = send(sock, p, length, MSG_NOSIGNAL);
		if (n <= 0) { perror("ws_sub: send"); exit(1); }
		p += n; length -= (size_t)n;
	}
}

/* One client frame (clients must mask, RFC 6455 §5.3; a zero mask is a valid mask). */
static void send_frame(int opcode, const char *payload, size_t length)
{
	unsigned char header[14];
	size_t h = 0;
	header[h++] = (unsigned char)(0x80 | opcode);
	if (length < 126) {
		header[h++] = (unsigned char)(0x80 | length);
	} else {
		header[h++] = 0x80 | 126;
		header[h++] = (unsigned char)(length >> 8);
		header[h++] = (unsigned char)length;
	}
	memset(header + h, 0, 4);
	h += 4;
	send_all(header, h);
	if (length) send_all(payload, length);
}

/* The integer after `key` in [text, text+length), or -1. */
static long long field(const char *text, size_t length, const char *key)
{
	size_t key_length = strlen(key);
	const char *at = memmem(text, length, key, key_length);
	if (!at) return -1;
	const char *p = at + key_length, *end = text + length;
	long long value = 0;
	int digits = 0;
	while (p < end && *p >= '0' && *p <= '9' && digits < 19) { value = value * 10 + (*p - '0'); p++; digits++; }
	return digits ? value : -1;
}

int main(int argc, char **argv)
{
	if (argc < 9) {
		fprintf(stderr, "usage: ws_sub PORT KEY CHANNEL EVENT EXPECT IDLE_SECONDS TOTAL_SECONDS LATENCY_FILE\n");
		return 64;
	}
	int port = atoi(argv[1]);
	const char *key = argv[2], *channel = argv[3], *event = argv[4], *latency_path = argv[8];
	long expect = atol(argv[5]);
	double idle = atof(argv[6]), total = atof(argv[7]);
	if (port <= 0 || expect <= 0 || idle <= 0 || total <= 0) { fprintf(stderr, "ws_sub: bad arguments\n"); return 64; }
	unsigned char *seen = calloc((size_t)expect, 1);
	size_t latency_capacity = 65536, latency_count = 0;
	int64_t *latencies = malloc(latency_capacity * sizeof *latencies);
	if (!seen || !latencies) { fprintf(stderr, "ws_sub: out of memory\n"); return 1; }
	char event_marker[256];
	snprintf(event_marker, sizeof event_marker, "\"event\":\"%s\"", event);

	sock = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in address = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	inet_pton(AF_INET, "127.0.0.1", &address.sin_addr);
	if (connect(sock, (struct sockaddr *)&address, sizeof address) != 0) { perror("ws_sub: connect"); return 1; }
	int one = 1;
	setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	char request[512];
	int n = snprintf(request, sizeof request,
	                 "GET /app/%s?protocol=7&client=bench-ws-sub&version=1.0 HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
	                 "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
	                 "Sec-WebSocket-Version: 13\r\n\r\n", key, port);
	send_all(request, (size_t)n);

	size_t capacity = 1 << 22, used = 0;
	char *buffer = malloc(capacity);
	if (!buffer) { fprintf(stderr, "ws_sub: out of memory\n"); return 1; }
	int upgraded = 0, subscribed = 0;
	long received = 0, unique_count = 0, duplicates = 0, reordered = 0, unparsed = 0, out_of_range = 0, highest = -1;
	long long first_ns = 0, last_ns = 0, start = clock_ns(CLOCK_MONOTONIC);

	for (;;) {
		long long now = clock_ns(CLOCK_MONOTONIC);
		if (!subscribed && now - start > 10000000000LL) { fprintf(stderr, "ws_sub: not subscribed after 10 s\n"); return 1; }
		if (subscribed) {
			if (unique_count >= expect) break;
			if (now - start > (long long)(total * 1e9)) break;
			if (received > 0 && now - last_ns > (long long)(idle * 1e9)) break;
		}
		struct pollfd pfd = { .fd = sock, .events = POLLIN };
		if (poll(&pfd, 1, 50) <= 0) continue;
		if (used == capacity) { fprintf(stderr, "ws_sub: frame larger than %zu bytes\n", capacity); return 1; }
		ssize_t got = recv(sock, buffer + used, capacity - used, 0);
		if (got <= 0) { fprintf(stderr, "ws_sub: connection closed\n"); break; }
		used += (size_t)got;
		size_t offset = 0;
		if (!upgraded) {
			char *end = memmem(buffer, used, "\r\n\r\n", 4);
			if (!end) continue;
			if (used < 12 || memcmp(buffer + 9, "101", 3) != 0) { fprintf(stderr, "ws_sub: upgrade refused: %.*s\n", (int)used, buffer); return 1; }
			upgraded = 1;
			offset = (size_t)(end - buffer) + 4;
		}
		for (;;) { /* every complete frame in the buffer */
			if (used - offset < 2) break;
			unsigned char *f = (unsigned char *)buffer + offset;
			int opcode = f[0] & 0x0f;
			uint64_t length = f[1] & 0x7f;
			size_t header = 2;
			if (length == 126) {
				if (used - offset < 4) break;
				length = ((uint64_t)f[2] << 8) | f[3];
				header = 4;
			} else if (length == 127) {
				if (used - offset < 10) break;
				length = 0;
				for (int i = 0; i < 8; i++) length = (length << 8) | f[2 + i];
				header = 10;
			}
			if (f[1] & 0x80) header += 4; /* servers do not mask; tolerate it anyway */
			if (used - offset < header + length) break;
			const char *payload = (const char *)f + header;
			if (opcode == 9) {
				send_frame(10, payload, (size_t)length);
			} else if (opcode == 8) {
				fprintf(stderr, "ws_sub: server closed the connection\n");
				goto done;
			} else if (opcode == 1) {
				if (memmem(payload, length, event_marker, strlen(event_marker))) {
					long long now_real = clock_ns(CLOCK_REALTIME);
					long long arrived = clock_ns(CLOCK_MONOTONIC);
					received++;
					if (received == 1) first_ns = arrived;
					last_ns = arrived;
					long long seq = field(payload, (size_t)length, "seq\\\":");
					long long sent = field(payload, (size_t)length, "sent_at_ns\\\":");
					if (seq < 0 || sent < 0) {
						unparsed++;
					} else {
						if (seq >= expect) out_of_range++;
						else if (seen[seq]) duplicates++;
						else { seen[seq] = 1; unique_count++; }
						if (seq < highest) reordered++; else highest = (long)seq;
						if (latency_count == latency_capacity) {
							latency_capacity *= 2;
							latencies = realloc(latencies, latency_capacity * sizeof *latencies);
							if (!latencies) { fprintf(stderr, "ws_sub: out of memory\n"); return 1; }
						}
						latencies[latency_count++] = now_real - sent;
					}
				} else if (memmem(payload, length, "pusher:connection_established", 29)) {
					char subscribe[512];
					int s = snprintf(subscribe, sizeof subscribe,
					                 "{\"event\":\"pusher:subscribe\",\"data\":{\"channel\":\"%s\"}}", channel);
					send_frame(1, subscribe, (size_t)s);
				} else if (memmem(payload, length, "pusher_internal:subscription_succeeded", 38)) {
					subscribed = 1;
					start = clock_ns(CLOCK_MONOTONIC);
					printf("ready\n");
					fflush(stdout);
				} else if (memmem(payload, length, "pusher:ping", 11)) {
					const char *pong = "{\"event\":\"pusher:pong\",\"data\":{}}";
					send_frame(1, pong, strlen(pong));
				} else if (memmem(payload, length, "pusher:error", 12)) {
					fprintf(stderr, "ws_sub: %.*s\n", (int)length, payload);
				}
			}
			offset += header + (size_t)length;
		}
		memmove(buffer, buffer + offset, used - offset);
		used -= offset;
	}
done:;
	double seconds = received > 1 ? (double)(last_ns - first_ns) / 1e9 : 0;
	FILE *out = fopen(latency_path, "wb");
	if (!out || fwrite(latencies, sizeof *latencies, latency_count, out) != latency_count) {
		fprintf(stderr, "ws_sub: cannot write %s\n", latency_path);
		return 1;
	}
	fclose(out);
	printf("{\"received\":%ld,\"unique\":%ld,\"duplicates\":%ld,\"reordered\":%ld,\"missing\":%ld,"
	       "\"unparsed\":%ld,\"out_of_range\":%ld,\"seconds\":%.6f,\"rate\":%.1f}\n",
	       received, unique_count, duplicates, reordered, expect - unique_count, unparsed, out_of_range, seconds,
	       seconds > 0 ? (double)(received - 1) / seconds : 0.0);
	fflush(stdout);
	close(sock);
	return 0;
}
