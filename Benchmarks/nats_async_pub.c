// The ceiling of Benchmarks/nats_sink.sh: asynchronous JetStream publishing from C (libnats'
// js_PublishMsgAsync, at most MAX_PENDING unacknowledged, as the sink's max_pending), each line
// of a file one message with its Nats-Msg-Id, until every PubAck has come.
//
//   nats_async_pub SERVERS SUBJECT LINES_FILE ID_PREFIX MAX_PENDING    prints "<messages> <seconds>"
//
// SERVERS is a comma-separated list of nats:// URLs. Message ids are ID_PREFIX-<line number>: a
// prefix of its own per run, or the stream's duplicate window would drop a second run.
#include <nats/nats.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static volatile int64_t failures;

static void on_error(jsCtx *js, jsPubAckErr *pae, void *closure) {
    (void)js; (void)closure;
    if (failures++ == 0) fprintf(stderr, "nats_async_pub: %s\n", pae->ErrText ? pae->ErrText : natsStatus_GetText(pae->Err));
}

static void check(natsStatus s, const char *what) {
    if (s != NATS_OK) {
        fprintf(stderr, "nats_async_pub: %s: %s\n", what, natsStatus_GetText(s));
        nats_PrintLastErrorStack(stderr);
        exit(1);
    }
}

int main(int argc, char **argv) {
    if (argc != 6) { fprintf(stderr, "usage: nats_async_pub SERVERS SUBJECT LINES_FILE ID_PREFIX MAX_PENDING\n"); return 2; }
    FILE *in = fopen(argv[3], "r");
    if (!in) { perror(argv[3]); return 1; }
    // Read every line first: only the publishing is measured.
    size_t cap = 1 << 16, n = 0;
    char **lines = malloc(cap * sizeof *lines);
    char *line = NULL;
    size_t len = 0;
    ssize_t got;
    while ((got = getline(&line, &len, in)) > 0) {
        if (line[got - 1] == '\n') line[--got] = 0;
        if (n == cap) lines = realloc(lines, (cap *= 2) * sizeof *lines);
        lines[n++] = strdup(line);
    }
    fclose(in);

    // Up to 8 servers, comma-separated.
    const char *servers[8];
    int count = 0;
    for (char *s = strtok(argv[1], ","); s && count < 8; s = strtok(NULL, ",")) servers[count++] = s;
    natsOptions *opts;
    natsConnection *nc;
    jsCtx *js;
    jsOptions jo;
    check(natsOptions_Create(&opts), "options");
    check(natsOptions_SetServers(opts, servers, count), "servers");
    check(natsConnection_Connect(&nc, opts), "connect");
    check(jsOptions_Init(&jo), "js options");
    jo.PublishAsync.MaxPending = atoll(argv[5]);
    jo.PublishAsync.ErrHandler = on_error;
    check(natsConnection_JetStream(&js, nc, &jo), "jetstream");

    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    char id[128];
    for (size_t i = 0; i < n; i++) {
        natsMsg *m;
        check(natsMsg_Create(&m, argv[2], NULL, lines[i], (int)strlen(lines[i])), "message");
        snprintf(id, sizeof id, "%s-%zu", argv[4], i);
        check(natsMsgHeader_Set(m, "Nats-Msg-Id", id), "header");
        // Takes the message over (destroyed by the library once acknowledged).
        check(js_PublishMsgAsync(js, &m, NULL), "publish");
    }
    jsPubOptions po;
    jsPubOptions_Init(&po);
    po.MaxWait = 60000;
    check(js_PublishAsyncComplete(js, &po), "waiting for the PubAcks");
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (failures) { fprintf(stderr, "nats_async_pub: %lld messages failed\n", (long long)failures); return 1; }
    printf("%zu %.6f\n", n, (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9);

    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
    natsOptions_Destroy(opts);
    return 0;
}
