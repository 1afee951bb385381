/* The deployment server's connection layer: a ZeroMQ ROUTER socket with CURVE (CurveZMQ, ZeroMQ RFC 26; Bernstein's
 * Curve25519, 2006), the allow-list's ZAP handler (ZeroMQ RFC 27, zap.c), every client's current connection, and
 * frames out and in.  A frame that comes in is decoded strictly (wire.c) and checked against the key the ZAP
 * handler admitted: it must be client<K> for a frame that claims to be client K.  A frame that fails a check is
 * logged, answered with an ERROR frame and otherwise ignored.  Nothing here knows the run or its rounds. */
#include "net_internal.h"

#ifdef DPFL_HAVE_ZMQ
#include "server_internal.h"

#include <errno.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

dpfl_status net_srv_link_open(srv_link *l, const char *bind, int32_t K, size_t max_frame, int *nallowed,
                              dpfl_error *err)
{
    l->K = K;
    if (!(l->peers = calloc((size_t)K, sizeof *l->peers))) return dpfl_fail(err, DPFL_ENOMEM, "out of memory");
    l->max_frame = max_frame;
    if (!(l->zctx = zmq_ctx_new()))
        return dpfl_fail(err, DPFL_EIO, "dpfl serve: cannot start ZeroMQ: %s", zmq_strerror(errno));
    dpfl_status st = net_zap_start(&l->zap, l->zctx, nallowed, err);
    if (st) return st;
    /* anything much larger than the largest frame is cut by ZeroMQ before it is read */
    const int one = 1, linger = 2000;
    const int64_t maxmsg = (int64_t)(2 * l->max_frame + 65536);
    if (!(l->sock = zmq_socket(l->zctx, ZMQ_ROUTER)) || zmq_setsockopt(l->sock, ZMQ_CURVE_SERVER, &one, sizeof one) ||
        zmq_setsockopt(l->sock, ZMQ_CURVE_SECRETKEY, l->sk, 32) ||
        zmq_setsockopt(l->sock, ZMQ_ZAP_DOMAIN, "dpfl", 4) ||
        zmq_setsockopt(l->sock, ZMQ_ROUTER_MANDATORY, &one, sizeof one) ||
        zmq_setsockopt(l->sock, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg) ||
        zmq_setsockopt(l->sock, ZMQ_LINGER, &linger, sizeof linger))
        return dpfl_fail(err, DPFL_EIO, "dpfl serve: cannot set up the socket: %s", zmq_strerror(errno));
    if (zmq_bind(l->sock, bind) != 0)
        return dpfl_fail(err, DPFL_EIO, "dpfl serve: cannot listen on %s: %s", bind, zmq_strerror(errno));
    return DPFL_OK;
}

void net_srv_link_close(srv_link *l)
{
    if (l->sock) zmq_close(l->sock); /* lingers up to 2 s for the byes */
    if (l->zctx) zmq_ctx_shutdown(l->zctx); /* the ZAP thread's recv returns ETERM */
    net_zap_stop(&l->zap);
    if (l->zctx) zmq_ctx_term(l->zctx);
    free(l->peers);
    sodium_memzero(l->sk, sizeof l->sk);
}

int32_t net_srv_joined(const srv_link *l)
{
    int32_t n = 0;
    for (int32_t k = 0; k < l->K; k++) n += l->peers[k].hello && l->peers[k].rid_len;
    return n;
}

/* ------------------------------------------------------------------------------------------ frames out */
int net_srv_send_frame(srv_link *l, peer *p, const dpfl_wire_msg *m)
{
    if (!p->rid_len) return -1;
    uint8_t *buf;
    size_t len;
    dpfl_error err;
    if (dpfl_wire_encode(m, &buf, &len, &err)) {
        LOG("cannot encode a %s frame: %s", dpfl_wire_type_name(m->type), err.msg);
        return -1;
    }
    int rc = zmq_send(l->sock, p->rid, p->rid_len, ZMQ_SNDMORE | ZMQ_DONTWAIT);
    if (rc >= 0) rc = zmq_send(l->sock, buf, len, ZMQ_DONTWAIT);
    free(buf);
    if (rc < 0) {
        if (errno == EHOSTUNREACH) p->rid_len = 0; /* that connection is gone: the client reconnects with a hello */
        return -1;
    }
    return 0;
}

void net_srv_send_error_to(srv_link *l, int32_t round, const uint8_t *rid, size_t rid_len, uint32_t code,
                           const char *fmt, ...)
{
    dpfl_wire_msg m;
    memset(&m, 0, sizeof m);
    m.type = DPFL_WIRE_ERROR;
    m.sender = DPFL_WIRE_SERVER;
    m.code = code;
    m.round = (uint32_t)round;
    va_list ap;
    va_start(ap, fmt);
    char text[DPFL_WIRE_MAX_TEXT + 1];
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    dpfl_wire_set_text(&m, "%s", text);
    peer tmp;
    memcpy(tmp.rid, rid, rid_len);
    tmp.rid_len = rid_len;
    net_srv_send_frame(l, &tmp, &m);
}

/* ------------------------------------------------------------------------------------------ frames in */
/* The rest of a multipart message, dropped: a frame is one message part. */
static void drain_multipart(void *sock)
{
    int more = 1;
    while (more) {
        zmq_msg_t extra;
        zmq_msg_init(&extra);
        more = zmq_msg_recv(&extra, sock, 0) >= 0 && zmq_msg_more(&extra);
        zmq_msg_close(&extra);
    }
}

/* f's sender may act as client m.sender: the key the ZAP handler admitted is client<sender>, one of the run's */
static int sender_admitted(srv_link *l, int32_t round, const srv_frame *f, const char *user)
{
    char expect[32];
    snprintf(expect, sizeof expect, "client%u", f->m.sender);
    if (f->m.sender < (uint32_t)l->K && user && !strcmp(user, expect)) return 1;
    LOG("dropped a %s frame claiming to be client %u (%s): %s", dpfl_wire_type_name(f->m.type), f->m.sender, f->who,
        f->m.sender >= (uint32_t)l->K ? "no such client in this run" : "that key may not act as that client");
    if (f->rid_len)
        net_srv_send_error_to(l, round, f->rid, f->rid_len, 3, "refused: key %s may not act as client %u",
                              user ? user : "?", f->m.sender);
    return 0;
}

int32_t net_srv_receive(srv_link *l, int32_t round, srv_frame *f)
{
    zmq_msg_init(&f->id);
    zmq_msg_init(&f->body);
    if (zmq_msg_recv(&f->id, l->sock, 0) < 0 || !zmq_msg_more(&f->id)) return -1;
    if (zmq_msg_recv(&f->body, l->sock, 0) < 0) return -1;
    f->rid_len = zmq_msg_size(&f->id) <= RID_MAX ? zmq_msg_size(&f->id) : 0;
    if (f->rid_len) memcpy(f->rid, zmq_msg_data(&f->id), f->rid_len);
    const char *user = zmq_msg_gets(&f->body, "User-Id");
    const char *addr = zmq_msg_gets(&f->body, "Peer-Address");
    snprintf(f->who, sizeof f->who, "key %s, %s", user && user[0] ? user : "?", addr ? addr : "?");
    if (zmq_msg_more(&f->body)) { /* a frame is one message part */
        drain_multipart(l->sock);
        LOG("dropped a multipart message (%s): a frame is one message", f->who);
        if (f->rid_len) net_srv_send_error_to(l, round, f->rid, f->rid_len, 1, "multipart message: one frame per message");
        return -1;
    }
    dpfl_error err;
    if (dpfl_wire_decode(zmq_msg_data(&f->body), zmq_msg_size(&f->body), &f->m, &err)) {
        LOG("dropped a frame (%s): %s", f->who, err.msg);
        if (f->rid_len) net_srv_send_error_to(l, round, f->rid, f->rid_len, 1, "%s", err.msg);
        return -1;
    }
    if (!sender_admitted(l, round, f, user)) return -1;
    const int32_t k = (int32_t)f->m.sender;
    peer *p = &l->peers[k];
    if (f->rid_len && (p->rid_len != f->rid_len || memcmp(p->rid, f->rid, f->rid_len))) { /* a new connection */
        memcpy(p->rid, f->rid, f->rid_len);
        p->rid_len = f->rid_len;
        p->hello = p->reported = 0;
    }
    return k;
}

void net_srv_frame_close(srv_frame *f)
{
    zmq_msg_close(&f->id);
    zmq_msg_close(&f->body);
}
#endif
