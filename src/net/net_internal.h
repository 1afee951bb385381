/* Shared by the server (server.c) and the client (client.c) of a deployment: what both sides must agree on. */
#ifndef DPFL_NET_INTERNAL_H
#define DPFL_NET_INTERNAL_H
#include "dpfl/net.h"
#include "dpfl/transport.h"

/* ERROR codes a client sends about a round: REFUSED, it was not trained (the client counts as a dropout of it);
 * ROLLED_BACK, this client answered that round, or a later one, of this run already from another model: the server
 * was resumed from an older checkpoint than the rounds it released, and stops the run. */
enum { NET_ERROR_REFUSED = 5, NET_ERROR_ROLLED_BACK = 7 };

/* The config's digest as both sides compare it: the resolved config with the keys each process may choose for
 * itself (run.threads, run.eval_every, fl.rounds, data.data_dir) at their defaults.  What fl.rounds changes (a
 * calibrated noise, rPDP-FL rates) is checked round by round (the noise and the rates digest in ROUND). */
void net_config_digest(const dpfl_config *cfg, uint8_t out[32]);
/* Settings the network transport does not run yet: an error naming the key and what to do instead. */
dpfl_status net_check_config(const dpfl_config *cfg, dpfl_error *err);
/* "dpfl serve: ..." / "dpfl join: ..." on stderr, one line. */
void net_log(const char *who, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* digest as 16 hex digits (its first 8 bytes), for log lines */
const char *net_short_hex(const uint8_t *d, char buf[17]);
#endif
