/*
 * Receiving end for `make bench` on the MQTT side: plain libmosquitto (loop_start), one
 * subscription, counting messages whose payload is {"seq":N,"sent_at_ns":T,...} (written by
 * c_pub or, through the bridge, by pusher-local's generated stream).
 *
 *     c_sub PORT TOPIC QOS EXPECT IDLE_SECONDS TOTAL_SECONDS LATENCY_FILE
 *
 * Prints "ready" on stdout once the broker acknowledged the subscription (the driver starts
 * the load only then). Stops when EXPECT distinct sequence numbers arrived, when nothing arrived
 * for IDLE_SECONDS after the first message, or after TOTAL_SECONDS. Then writes one latency per
 * received message (CLOCK_REALTIME at arrival - sent_at_ns, int64 ns, native byte order) to
 * LATENCY_FILE and prints one JSON line:
 *   {"received":N,"unique":U,"duplicates":D,"reordered":R,"missing":M,"unparsed":X,
 *    "out_of_range":O,"seconds":S,"rate":R}
 * `seconds` is first to last arrival (CLOCK_MONOTONIC); `rate` = (received - 1) / seconds.
 * `reordered` counts messages whose seq is below the highest seq seen before them.
 */
#include <mosquitto.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;
static int subscribed = 0;
static int connected = 0;
static const char *topic;
static int qos;
static long expect;
static unsigned char *seen;
static long received, unique_count, duplicates, reordered, unparsed, out_of_range;
static long highest = -1;
static long long first_ns, last_ns;
static int64_t *latencies;
static long latency_count, latency_capacity;

static long long clock_ns(clockid_t clock)
{
	struct timespec ts;
	clock_gettime(clock, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* The integer after `"key":` in a payload of `length` bytes (not NUL-terminated), or -1. */
static long long field(const char *payload, int length, const char *key)
{
	size_t key_length = strlen(key);
	for (int i = 0; i + (int)key_length < length; i++) {
		if (memcmp(payload + i, key, key_length) != 0) continue;
		long long value = 0;
		int j = i + (int)key_length, digits = 0;
		while (j < length && payload[j] >= '0' && payload[j] <= '9') {
			value = value * 10 + (payload[j] - '0');
			j++; digits++;
		}
		return digits > 0 ? value : -1;
	}
	return -1;
}

static void on_connect(struct mosquitto *mosq, void *obj, int rc)
{
	(void)obj;
	pthread_mutex_lock(&lock);
	connected = rc == 0 ? 1 : -1;
	pthread_cond_broadcast(&changed);
	pthread_mutex_unlock(&lock);
	if (rc == 0) mosquitto_subscribe(mosq, NULL, topic, qos);
}

static void on_subscribe(struct mosquitto *mosq, void *obj, int mid, int count, const int *granted)
{
	(void)mosq; (void)obj; (void)mid; (void)count; (void)granted;
	pthread_mutex_lock(&lock);
	subscribed = 1;
	pthread_cond_broadcast(&changed);
	pthread_mutex_unlock(&lock);
}

static void on_message(struct mosquitto *mosq, void *obj, const struct mosquitto_message *message)
{
	(void)mosq; (void)obj;
	long long now_real = clock_ns(CLOCK_REALTIME);
	long long now = clock_ns(CLOCK_MONOTONIC);
	long long seq = field(message->payload, message->payloadlen, "\"seq\":");
	long long sent = field(message->payload, message->payloadlen, "\"sent_at_ns\":");
	pthread_mutex_lock(&lock);
	received++;
	if (received == 1) first_ns = now;
	last_ns = now;
	if (seq < 0 || sent < 0) {
		unparsed++;
	} else {
		if (seq >= expect) {
			out_of_range++;
		} else if (seen[seq]) {
			duplicates++;
		} else {
			seen[seq] = 1;
			unique_count++;
		}
		if (seq < highest) reordered++; else highest = (long)seq;
		if (latency_count == latency_capacity) {
			latency_capacity = latency_capacity ? latency_capacity * 2 : 65536;
			latencies = realloc(latencies, (size_t)latency_capacity * sizeof *latencies);
			if (!latencies) { fprintf(stderr, "c_sub: out of memory\n"); exit(1); }
		}
		latencies[latency_count++] = now_real - sent;
	}
	if (unique_count >= expect) pthread_cond_broadcast(&changed);
	pthread_mutex_unlock(&lock);
}

int main(int argc, char **argv)
{
	if (argc < 8) {
		fprintf(stderr, "usage: c_sub PORT TOPIC QOS EXPECT IDLE_SECONDS TOTAL_SECONDS LATENCY_FILE\n");
		return 64;
	}
	int port = atoi(argv[1]);
	topic = argv[2];
	qos = atoi(argv[3]);
	expect = atol(argv[4]);
	double idle = atof(argv[5]);
	double total = atof(argv[6]);
	const char *latency_path = argv[7];
	if (port <= 0 || qos < 0 || qos > 2 || expect <= 0 || idle <= 0 || total <= 0) {
		fprintf(stderr, "c_sub: bad arguments\n");
		return 64;
	}
	seen = calloc((size_t)expect, 1);
	if (!seen) { fprintf(stderr, "c_sub: out of memory\n"); return 1; }

	mosquitto_lib_init();
	char id[64];
	snprintf(id, sizeof id, "bench-sub-%d", (int)getpid());
	struct mosquitto *mosq = mosquitto_new(id, true, NULL);
	if (!mosq) { fprintf(stderr, "c_sub: mosquitto_new failed\n"); return 1; }
	mosquitto_int_option(mosq, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V5);
	mosquitto_int_option(mosq, MOSQ_OPT_TCP_NODELAY, 1);
	/* Let the broker send as many QoS 1 messages at once as it wants (its own limit applies). */
	mosquitto_int_option(mosq, MOSQ_OPT_RECEIVE_MAXIMUM, 65535);
	mosquitto_connect_callback_set(mosq, on_connect);
	mosquitto_subscribe_callback_set(mosq, on_subscribe);
	mosquitto_message_callback_set(mosq, on_message);
	mosquitto_loop_start(mosq);
	if (mosquitto_connect_async(mosq, "127.0.0.1", port, 30) != MOSQ_ERR_SUCCESS) {
		fprintf(stderr, "c_sub: connect failed\n");
		return 1;
	}
	long long start = clock_ns(CLOCK_MONOTONIC);
	pthread_mutex_lock(&lock);
	while (!subscribed && connected >= 0 && clock_ns(CLOCK_MONOTONIC) - start < 10000000000LL) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 50000000; if (ts.tv_nsec >= 1000000000) { ts.tv_sec++; ts.tv_nsec -= 1000000000; }
		pthread_cond_timedwait(&changed, &lock, &ts);
	}
	int ok = subscribed;
	pthread_mutex_unlock(&lock);
	if (!ok) { fprintf(stderr, "c_sub: not subscribed after 10 s (connected=%d)\n", connected); return 1; }
	printf("ready\n");
	fflush(stdout);

	start = clock_ns(CLOCK_MONOTONIC);
	pthread_mutex_lock(&lock);
	for (;;) {
		long long now = clock_ns(CLOCK_MONOTONIC);
		if (unique_count >= expect) break;
		if (now - start > (long long)(total * 1e9)) break;
		if (received > 0 && now - last_ns > (long long)(idle * 1e9)) break;
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 50000000; if (ts.tv_nsec >= 1000000000) { ts.tv_sec++; ts.tv_nsec -= 1000000000; }
		pthread_cond_timedwait(&changed, &lock, &ts);
	}
	double seconds = received > 1 ? (double)(last_ns - first_ns) / 1e9 : 0;
	long missing = expect - unique_count;
	FILE *out = fopen(latency_path, "wb");
	if (!out || fwrite(latencies, sizeof *latencies, (size_t)latency_count, out) != (size_t)latency_count) {
		fprintf(stderr, "c_sub: cannot write %s\n", latency_path);
		return 1;
	}
	fclose(out);
	printf("{\"received\":%ld,\"unique\":%ld,\"duplicates\":%ld,\"reordered\":%ld,\"missing\":%ld,"
	       "\"unparsed\":%ld,\"out_of_range\":%ld,\"seconds\":%.6f,\"rate\":%.1f}\n",
	       received, unique_count, duplicates, reordered, missing, unparsed, out_of_range, seconds,
	       seconds > 0 ? (double)(received - 1) / seconds : 0.0);
	fflush(stdout);
	pthread_mutex_unlock(&lock);
	/* The network thread may still deliver; exit without joining it (the process ends here). */
	_exit(0);
}
