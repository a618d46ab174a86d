/*
 * Load source for `make bench`: plain libmosquitto publishing sequence-numbered, timestamped
 * payloads, either as fast as the in-flight window allows (throughput) or at a fixed rate
 * (latency). Same library usage as Benchmarks/mqtt/c_publisher.c (loop_start + publish,
 * bounded in-flight window counted with on_publish).
 *
 *     c_pub PORT TOPIC COUNT QOS SIZE RATE [IN_FLIGHT=1000] [TOPICS=1] [FIELDS=0]
 *
 * With TOPICS > 1, TOPIC holds one %d and message i goes to TOPIC with i % TOPICS (several
 * sensors: the bridge maps each topic to its own channel).
 *
 * RATE 0 = as fast as possible; otherwise message i is due at start + i/RATE (absolute
 * schedule on CLOCK_MONOTONIC, so a late message does not shift the rest).
 * Each payload is {"seq":i,"sent_at_ns":T,"pad":"xxx…"} padded to SIZE bytes; T is
 * CLOCK_REALTIME in ns taken just before mosquitto_publish, so a subscriber on the same machine
 * (C or Swift, which both read the realtime clock) computes one-way latency.
 * With FIELDS > 0 (at most 100) the payload carries FIELDS more members between sent_at_ns and
 * pad, for the payload-rule benchmark (`make bench-rules`, docs/history/benchmarks.md "Payload rules"):
 * {"seq":i,"sent_at_ns":T,"f00":2.5,"f01":"m2p","f02":true,"f03":45,"f04":2.5,…,"pad":"xxx…"}:
 * member fNN is 2.5, "m2p", true or 42+NN by NN % 4, so /f03 > 10, /f01, /f05, /f17 … are "m2p".
 * "pad" is left out when it would not fit in SIZE (SIZE 0 = the smallest payload with the fields).
 * Prints one JSON line: {"sent":N,"seconds":S,"rate":R,"bytes":B} (B: the last payload's length).
 */
#include <mosquitto.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;
static long acked = 0;
static int connected = 0;

static void on_connect(struct mosquitto *mosq, void *obj, int rc)
{
	(void)mosq; (void)obj;
	pthread_mutex_lock(&lock);
	connected = rc == 0 ? 1 : -1;
	pthread_cond_broadcast(&changed);
	pthread_mutex_unlock(&lock);
}

static void on_publish(struct mosquitto *mosq, void *obj, int mid)
{
	(void)mosq; (void)obj; (void)mid;
	pthread_mutex_lock(&lock);
	acked++;
	pthread_cond_broadcast(&changed);
	pthread_mutex_unlock(&lock);
}

static long long clock_ns(clockid_t clock)
{
	struct timespec ts;
	clock_gettime(clock, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv)
{
	if (argc < 7) {
		fprintf(stderr, "usage: c_pub PORT TOPIC COUNT QOS SIZE RATE [IN_FLIGHT] [TOPICS] [FIELDS]\n");
		return 64;
	}
	int port = atoi(argv[1]);
	const char *topic = argv[2];
	long count = atol(argv[3]);
	int qos = atoi(argv[4]);
	int size = atoi(argv[5]);
	double rate = atof(argv[6]);
	long window = argc > 7 ? atol(argv[7]) : 1000;
	long topics = argc > 8 ? atol(argv[8]) : 1;
	int fields = argc > 9 ? atoi(argv[9]) : 0;
	if (port <= 0 || count <= 0 || qos < 0 || qos > 2 || size < 0 || rate < 0 || window <= 0 || topics <= 0
	    || fields < 0 || fields > 100
	    || (topics > 1 && strstr(topic, "%d") == NULL)) {
		fprintf(stderr, "c_pub: bad arguments\n");
		return 64;
	}

	mosquitto_lib_init();
	char id[64];
	snprintf(id, sizeof id, "bench-pub-%d", (int)getpid());
	struct mosquitto *mosq = mosquitto_new(id, true, NULL);
	if (!mosq) { fprintf(stderr, "c_pub: mosquitto_new failed\n"); return 1; }
	mosquitto_int_option(mosq, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V5);
	mosquitto_int_option(mosq, MOSQ_OPT_TCP_NODELAY, 1);
	mosquitto_int_option(mosq, MOSQ_OPT_SEND_MAXIMUM, (int)(window > 65535 ? 65535 : window));
	mosquitto_connect_callback_set(mosq, on_connect);
	mosquitto_publish_callback_set(mosq, on_publish);
	mosquitto_loop_start(mosq);
	if (mosquitto_connect_async(mosq, "127.0.0.1", port, 30) != MOSQ_ERR_SUCCESS) {
		fprintf(stderr, "c_pub: connect failed\n");
		return 1;
	}
	pthread_mutex_lock(&lock);
	while (connected == 0) pthread_cond_wait(&changed, &lock);
	pthread_mutex_unlock(&lock);
	if (connected < 0) { fprintf(stderr, "c_pub: connection refused\n"); return 1; }

	/* The members between sent_at_ns and pad, the same in every message. */
	char members[2048] = "";
	int members_length = 0;
	for (int i = 0; i < fields; i++) {
		static const char *fixed[] = { "2.5", "\"m2p\"", "true" };
		char value[16];
		if (i % 4 == 3) snprintf(value, sizeof value, "%d", 42 + i);
		else snprintf(value, sizeof value, "%s", fixed[i % 4]);
		members_length += snprintf(members + members_length, sizeof members - (size_t)members_length, ",\"f%02d\":%s", i, value);
	}

	size_t capacity = (size_t)size + (size_t)members_length + 96;
	char *payload = malloc(capacity);
	char *pad = malloc((size_t)size + 1);
	if (!payload || !pad) { fprintf(stderr, "c_pub: out of memory\n"); return 1; }
	memset(pad, 'x', (size_t)size);
	pad[size] = 0;

	int last_length = 0;
	long long start = clock_ns(CLOCK_MONOTONIC);
	for (long seq = 0; seq < count; seq++) {
		if (rate > 0) {
			long long due = start + (long long)((double)seq / rate * 1e9);
			struct timespec ts = { .tv_sec = due / 1000000000LL, .tv_nsec = due % 1000000000LL };
			while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) != 0) {}
		}
		pthread_mutex_lock(&lock);
		while (seq - acked >= window) pthread_cond_wait(&changed, &lock);
		pthread_mutex_unlock(&lock);
		int length;
		if (fields == 0) {
			int head = snprintf(payload, capacity, "{\"seq\":%ld,\"sent_at_ns\":%lld,\"pad\":\"", seq, clock_ns(CLOCK_REALTIME));
			int padding = size - head - 2;
			if (padding < 0) padding = 0;
			memcpy(payload + head, pad, (size_t)padding);
			memcpy(payload + head + padding, "\"}", 2);
			length = head + padding + 2;
		} else {
			int head = snprintf(payload, capacity, "{\"seq\":%ld,\"sent_at_ns\":%lld%s", seq, clock_ns(CLOCK_REALTIME), members);
			int padding = size - head - 10; /* ,"pad":"…"} */
			if (padding >= 0) {
				memcpy(payload + head, ",\"pad\":\"", 8);
				memcpy(payload + head + 8, pad, (size_t)padding);
				memcpy(payload + head + 8 + padding, "\"}", 2);
				length = head + padding + 10;
			} else {
				payload[head] = '}';
				length = head + 1;
			}
		}
		last_length = length;
		char topic_buffer[256];
		const char *target = topic;
		if (topics > 1) {
			snprintf(topic_buffer, sizeof topic_buffer, topic, (int)(seq % topics));
			target = topic_buffer;
		}
		int rc = mosquitto_publish(mosq, NULL, target, length, payload, qos, false);
		if (rc != MOSQ_ERR_SUCCESS) { fprintf(stderr, "c_pub: publish failed: %s\n", mosquitto_strerror(rc)); return 1; }
	}
	pthread_mutex_lock(&lock);
	while (acked < count) pthread_cond_wait(&changed, &lock);
	pthread_mutex_unlock(&lock);
	double elapsed = (double)(clock_ns(CLOCK_MONOTONIC) - start) / 1e9;
	printf("{\"sent\":%ld,\"seconds\":%.6f,\"rate\":%.1f,\"bytes\":%d}\n", count, elapsed, elapsed > 0 ? (double)count / elapsed : 0.0,
	       last_length);
	fflush(stdout);

	mosquitto_disconnect(mosq);
	mosquitto_loop_stop(mosq, false);
	mosquitto_destroy(mosq);
	mosquitto_lib_cleanup();
	free(payload);
	free(pad);
	return 0;
}
