/* A growing text buffer for the report page; one failed allocation makes it stop growing, and rp_buf_ok says so. */
#include "internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int reserve(rp_buf *b, size_t more)
{
    if (b->oom) return 0;
    if (b->len + more + 1 <= b->cap) return 1;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + more + 1) cap *= 2;
    char *s = realloc(b->s, cap);
    if (!s) {
        b->oom = 1;
        return 0;
    }
    b->s = s;
    b->cap = cap;
    return 1;
}

void rp_buf_add(rp_buf *b, const char *s, size_t n)
{
    if (!reserve(b, n)) return;
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

void rp_buf_puts(rp_buf *b, const char *s)
{
    rp_buf_add(b, s, strlen(s));
}

void rp_buf_printf(rp_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || !reserve(b, (size_t)n)) return;
    va_start(ap, fmt);
    vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void rp_buf_html(rp_buf *b, const char *s)
{
    for (const char *p = s; *p;) {
        size_t n = strcspn(p, "&<>\"'");
        rp_buf_add(b, p, n);
        p += n;
        if (!*p) break;
        switch (*p++) {
        case '&': rp_buf_puts(b, "&amp;"); break;
        case '<': rp_buf_puts(b, "&lt;"); break;
        case '>': rp_buf_puts(b, "&gt;"); break;
        case '"': rp_buf_puts(b, "&quot;"); break;
        default: rp_buf_puts(b, "&#39;"); break;
        }
    }
}

int rp_buf_ok(const rp_buf *b, dpfl_error *err)
{
    if (!b->oom) return 1;
    dpfl_fail(err, DPFL_ENOMEM, "out of memory (report page)");
    return 0;
}

void rp_buf_free(rp_buf *b)
{
    free(b->s);
    b->s = NULL;
    b->len = b->cap = 0;
    b->oom = 0;
}
