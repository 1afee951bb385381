/* The allow-list's authentication thread of `dpfl serve` (zap.c). */
#ifndef DPFL_NET_ZAP_H
#define DPFL_NET_ZAP_H
#include "dpfl/core.h"

#include <pthread.h>

typedef struct {
    char name[65];
    uint8_t key[32];
} net_allowed_key;

typedef struct {
    char dir[1024]; /* the allow-list folder: one NAME.pub per admitted client key */
    void *sock;     /* the ZAP REP socket (inproc://zeromq.zap.01) */
    pthread_t thread;
    int started;
    /* the thread's own once started: the list as last read (re-read at most once a second for an unknown key) */
    net_allowed_key *keys;
    int nkeys;
    double read_at;
} net_zap;

/* Read the folder, bind the ZAP socket in the ZeroMQ context zctx and start the thread; *nkeys: the keys read. */
dpfl_status net_zap_start(net_zap *z, void *zctx, int *nkeys, dpfl_error *err);
/* After zmq_ctx_shutdown (the thread's recv returns ETERM): join it, close its socket, free the list. */
void net_zap_stop(net_zap *z);
#endif
