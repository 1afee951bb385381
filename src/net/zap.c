/* The allow-list of `dpfl serve`: ZeroMQ's authentication protocol (ZAP, ZMTP RFC 27) run on a thread of its own,
 * admitting a CURVE handshake only for a client key found as NAME.pub in the allow-list folder; the key's name
 * becomes the connection's User-Id, which the server (server.c) checks against the client a frame claims to be. */
#include "net_internal.h"

#ifdef DPFL_HAVE_ZMQ
#include "zap.h"

#include <dirent.h>
#include <errno.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#define LOG(...) net_log("serve", __VA_ARGS__)

/* Read every NAME.pub of the allow-list folder (NAME a valid key name); files that do not hold a key are logged
 * and skipped. */
static void allow_list_read(net_zap *sv)
{
    free(sv->keys);
    sv->keys = NULL;
    sv->nkeys = 0;
    sv->read_at = dpfl_now();
    DIR *d = opendir(sv->dir);
    if (!d) {
        LOG("cannot read the allow-list folder %s: %s (no client can connect)", sv->dir, strerror(errno));
        return;
    }
    int cap = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t l = strlen(e->d_name);
        if (l < 5 || strcmp(e->d_name + l - 4, ".pub") || l - 4 > 64) continue;
        char name[65], path[1400];
        memcpy(name, e->d_name, l - 4);
        name[l - 4] = '\0';
        if (!dpfl_net_key_name_ok(name)) continue;
        snprintf(path, sizeof path, "%s/%s", sv->dir, e->d_name);
        uint8_t key[32];
        dpfl_error err;
        if (dpfl_net_key_read(path, key, &err)) {
            LOG("allow-list: skipped %s", err.msg);
            continue;
        }
        if (sv->nkeys == cap) {
            cap = cap ? 2 * cap : 16;
            net_allowed_key *more = realloc(sv->keys, (size_t)cap * sizeof *more);
            if (!more) break;
            sv->keys = more;
        }
        memcpy(sv->keys[sv->nkeys].name, name, l - 3);
        memcpy(sv->keys[sv->nkeys].key, key, 32);
        sv->nkeys++;
    }
    closedir(d);
}

static const char *allow_list_find(net_zap *sv, const uint8_t *key)
{
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < sv->nkeys; i++)
            if (sodium_memcmp(sv->keys[i].key, key, 32) == 0) return sv->keys[i].name;
        /* a key added to the folder while the server runs is admitted without a restart (re-read at most once a
         * second, so that a flood of strangers cannot keep the folder busy) */
        if (pass == 0 && dpfl_now() - sv->read_at > 1.0) allow_list_read(sv);
        else break;
    }
    return NULL;
}

static int send_str(void *s, const char *str, int more)
{
    return zmq_send(s, str, strlen(str), more ? ZMQ_SNDMORE : 0) < 0 ? -1 : 0;
}

/* ZeroMQ's authentication protocol (ZMTP RFC 27): libzmq asks, for every CURVE handshake, whether the client's
 * long-term public key may connect; the reply's user id (the key's name) is attached to every message that
 * connection delivers ("User-Id"). */
static void *zap_main(void *arg)
{
    net_zap *sv = arg;
    for (;;) {
        zmq_msg_t part[8];
        int n = 0, more = 1, fail = 0;
        while (more) {
            zmq_msg_t m;
            zmq_msg_init(&m);
            if (zmq_msg_recv(&m, sv->sock, 0) < 0) {
                zmq_msg_close(&m);
                for (int i = 0; i < n; i++) zmq_msg_close(&part[i]);
                if (errno == EINTR) {
                    fail = 1;
                    break;
                }
                return NULL; /* ETERM: the server is closing */
            }
            more = zmq_msg_more(&m);
            if (n < 8) part[n++] = m;
            else zmq_msg_close(&m);
        }
        if (fail) continue;
        const char *status = "400", *text = "key not in the allow-list", *user = "";
        char who[64] = "?";
        if (n >= 7 && zmq_msg_size(&part[5]) == 5 && !memcmp(zmq_msg_data(&part[5]), "CURVE", 5) &&
            zmq_msg_size(&part[6]) == 32) {
            const char *name = allow_list_find(sv, zmq_msg_data(&part[6]));
            if (name) {
                status = "200", text = "OK", user = name;
            } else {
                char z[41];
                size_t al = zmq_msg_size(&part[3]) < sizeof who - 1 ? zmq_msg_size(&part[3]) : sizeof who - 1;
                memcpy(who, zmq_msg_data(&part[3]), al);
                who[al] = '\0';
                dpfl_z85_encode(zmq_msg_data(&part[6]), 32, z, NULL);
                LOG("rejected a connection from %s: its key %s is not in the allow-list (%s)", who, z, sv->dir);
            }
        } else {
            text = "CURVE only";
            LOG("rejected a connection: not a CURVE handshake");
        }
        /* version, request id, status code, status text, user id, metadata */
        if (n >= 2) {
            zmq_send(sv->sock, "1.0", 3, ZMQ_SNDMORE);
            zmq_send(sv->sock, zmq_msg_data(&part[1]), zmq_msg_size(&part[1]), ZMQ_SNDMORE);
            send_str(sv->sock, status, 1);
            send_str(sv->sock, text, 1);
            send_str(sv->sock, user, 1);
            zmq_send(sv->sock, "", 0, 0);
        }
        for (int i = 0; i < n; i++) zmq_msg_close(&part[i]);
    }
}

dpfl_status net_zap_start(net_zap *z, void *zctx, int *nkeys, dpfl_error *err)
{
    allow_list_read(z);
    *nkeys = z->nkeys; /* the ZAP thread owns the list from now on */
    if (!(z->sock = zmq_socket(zctx, ZMQ_REP)) || zmq_bind(z->sock, "inproc://zeromq.zap.01") != 0)
        return dpfl_fail(err, DPFL_EIO, "dpfl serve: cannot start the authentication handler: %s", zmq_strerror(errno));
    if (pthread_create(&z->thread, NULL, zap_main, z) != 0)
        return dpfl_fail(err, DPFL_EIO, "dpfl serve: cannot start the authentication thread");
    z->started = 1;
    return DPFL_OK;
}

void net_zap_stop(net_zap *z)
{
    if (z->started) pthread_join(z->thread, NULL);
    if (z->sock) zmq_close(z->sock);
    free(z->keys);
    z->started = 0, z->sock = NULL, z->keys = NULL, z->nkeys = 0;
}
#endif
