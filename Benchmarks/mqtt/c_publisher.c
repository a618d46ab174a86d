/*
 * The C baseline for scripts/bench-mqtt.sh: plain libmosquitto, the way its documentation
 * shows it (loop_start + publish), with the same bounded in-flight window and the same
 * completion events as mqtt-bench (on_publish: QoS 1 = PUBACK, QoS 0 = written).
 *
 *     c_publisher PORT COUNT QOS [PAYLOAD_BYTES=100] [IN_FLIGHT=1000] [PROTOCOL=5]
 *
 * Prints: c qos=1 count=100000 seconds=2.345 rate=42643
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

static double now_seconds(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: c_publisher PORT COUNT QOS [PAYLOAD_BYTES] [IN_FLIGHT] [PROTOCOL]\n");
		return 64;
	}
	int port = atoi(argv[1]);
	long count = atol(argv[2]);
	int qos = atoi(argv[3]);
	int size = argc > 4 ? atoi(argv[4]) : 100;
	long window = argc > 5 ? atol(argv[5]) : 1000;
	int protocol = argc > 6 ? atoi(argv[6]) : 5;

	mosquitto_lib_init();
	char id[64];
	snprintf(id, sizeof id, "c-bench-%d", (int)getpid());
	struct mosquitto *mosq = mosquitto_new(id, true, NULL);
	if (!mosq) { fprintf(stderr, "mosquitto_new failed\n"); return 1; }
	mosquitto_int_option(mosq, MOSQ_OPT_PROTOCOL_VERSION, protocol == 4 ? MQTT_PROTOCOL_V311 : MQTT_PROTOCOL_V5);
	mosquitto_int_option(mosq, MOSQ_OPT_TCP_NODELAY, 1);
	mosquitto_int_option(mosq, MOSQ_OPT_SEND_MAXIMUM, (int)(window > 65535 ? 65535 : window));
	mosquitto_connect_callback_set(mosq, on_connect);
	mosquitto_publish_callback_set(mosq, on_publish);
	mosquitto_loop_start(mosq); /* before connecting: docs/mqtt-notes.md §5 */
	if (mosquitto_connect_async(mosq, "127.0.0.1", port, 30) != MOSQ_ERR_SUCCESS) {
		fprintf(stderr, "connect failed\n");
		return 1;
	}
	pthread_mutex_lock(&lock);
	while (connected == 0) pthread_cond_wait(&changed, &lock);
	pthread_mutex_unlock(&lock);
	if (connected < 0) { fprintf(stderr, "connection refused\n"); return 1; }

	char *payload = malloc((size_t)size);
	memset(payload, 'x', (size_t)size);
	double start = now_seconds();
	for (long sent = 0; sent < count; sent++) {
		pthread_mutex_lock(&lock);
		while (sent - acked >= window) pthread_cond_wait(&changed, &lock);
		pthread_mutex_unlock(&lock);
		int rc = mosquitto_publish(mosq, NULL, "bench/c", size, payload, qos, false);
		if (rc != MOSQ_ERR_SUCCESS) { fprintf(stderr, "publish failed: %s\n", mosquitto_strerror(rc)); return 1; }
	}
	pthread_mutex_lock(&lock);
	while (acked < count) pthread_cond_wait(&changed, &lock);
	pthread_mutex_unlock(&lock);
	double elapsed = now_seconds() - start;
	printf("c qos=%d count=%ld seconds=%.3f rate=%ld\n", qos, count, elapsed, (long)((double)count / elapsed));

	mosquitto_disconnect(mosq);
	mosquitto_loop_stop(mosq, false);
	mosquitto_destroy(mosq);
	mosquitto_lib_cleanup();
	free(payload);
	return 0;
}
