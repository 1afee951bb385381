/* The settings a resumed run must share with the run it continues (docs/privacy.md, "Resume"): the checkpoint keeps
 * a SHA-256 of every key that is not at its default, except those a resume may change (FL_RESUMABLE_KEYS: the
 * rounds, and settings that change no result -- threads, evaluation cadence, the client-state memory cap, where the
 * data folder is; the partition has its own digest).  The ledger stores what was charged as steps and
 * participations; the rate and sampler they are re-accounted at come from the config, so a resume under another
 * batch, sampler or noise would report a number that is not a bound.  Keys at their default are left out, so a
 * key added to dpfl later does not break the resume of a run started before it. */
#include "run_internal.h"

#include <sodium.h>
#include <stdlib.h>
#include <string.h>

/* The next line of *p (without its newline; *p moves past it), its length in *len; NULL at the end. */
static const char *next_line(const char **p, size_t *len)
{
    if (!**p) return NULL;
    const char *s = *p, *e = strchr(s, '\n');
    *len = e ? (size_t)(e - s) : strlen(s);
    *p = e ? e + 1 : s + *len;
    return s;
}

static const char *const RESUMABLE[] = {"[fl] rounds", "[run] threads", "[run] eval_every",
                                        "[fl] client_state_max_mb", "[data] data_dir"};

/* Whether the line (key = value) under the section header is a key a resume may change. */
static int resumable(const char *section, size_t nsec, const char *line, size_t n)
{
    const char *eq = memchr(line, '=', n);
    size_t nkey = eq ? (size_t)(eq - line) : n;
    while (nkey && line[nkey - 1] == ' ') nkey--;
    for (size_t i = 0; i < sizeof RESUMABLE / sizeof *RESUMABLE; i++) {
        const char *r = RESUMABLE[i];
        if (strlen(r) == nsec + 1 + nkey && !memcmp(r, section, nsec) && r[nsec] == ' ' &&
            !memcmp(r + nsec + 1, line, nkey))
            return 1;
    }
    return 0;
}

void fl_config_digest(const dpfl_config *cfg, uint8_t out[32])
{
    dpfl_config d;
    dpfl_config_defaults(&d);
    char *tc = dpfl_config_to_ini(cfg), *td = dpfl_config_to_ini(&d);
    DPFL_ASSERT(tc && td);
    crypto_hash_sha256_state h;
    crypto_hash_sha256_init(&h);
    const char *pc = tc, *pd = td, *lc, *ld, *section = "", *sec_hashed = NULL;
    size_t nc, nd, nsec = 0;
    while ((lc = next_line(&pc, &nc)) && (ld = next_line(&pd, &nd))) { /* the same keys in the same order */
        if (nc && lc[0] == '[') section = lc, nsec = nc;
        if ((nc == nd && !memcmp(lc, ld, nc)) || resumable(section, nsec, lc, nc)) continue;
        if (sec_hashed != section) { /* a changed key under its section's name */
            crypto_hash_sha256_update(&h, (const unsigned char *)section, nsec);
            crypto_hash_sha256_update(&h, (const unsigned char *)"\n", 1);
            sec_hashed = section;
        }
        crypto_hash_sha256_update(&h, (const unsigned char *)lc, nc);
        crypto_hash_sha256_update(&h, (const unsigned char *)"\n", 1);
    }
    crypto_hash_sha256_final(&h, out);
    free(tc);
    free(td);
}
