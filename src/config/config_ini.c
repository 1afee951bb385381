/* The INI syntax of a config file, read line by line with no limit on a line's length (getline): "[section]",
 * "key = value", comments (a line starting with ';' or '#', and ';' after a blank ends a value), and a value that
 * continues on the following lines that start with a blank (joined to it with one space) -- a list of 100 sites'
 * files need not be one line.  Each key is handed over whole with the line it starts on; what is not one of those
 * forms fails naming the file and the line.  The INI dialect is the common one (e.g. Python's configparser reads
 * the same files); this reader replaces inih, whose lines stop at 200 characters. */
#include "config_internal.h"

#include <stdlib.h>
#include <string.h>

static int blank(char ch) { return ch == ' ' || ch == '\t'; }

/* s without its leading and trailing blanks, in place */
static char *trim(char *s)
{
    while (blank(*s)) s++;
    size_t n = strlen(s);
    while (n && blank(s[n - 1])) s[--n] = '\0';
    return s;
}

/* cut an inline comment: ';' at the start or after a blank */
static void cut_comment(char *s)
{
    for (char *p = s; *p; p++)
        if (*p == ';' && (p == s || blank(p[-1]))) {
            *p = '\0';
            return;
        }
}

typedef struct {
    char *section, *key, *value; /* the key being read (value grows with continuation lines) */
    size_t value_len;
    int line;
} pending;

static dpfl_status flush(pending *p, fl_ini_handler on_key, void *user)
{
    if (!p->key) return DPFL_OK;
    dpfl_status st = on_key(user, p->section, p->key, p->value, p->line);
    free(p->key);
    free(p->value);
    p->key = p->value = NULL;
    return st;
}

static dpfl_status append(pending *p, const char *more, const char *path, int line, dpfl_error *err)
{
    size_t m = strlen(more);
    char *v = realloc(p->value, p->value_len + m + 2);
    if (!v) return dpfl_fail(err, DPFL_ENOMEM, "out of memory reading config (%s:%d)", path, line);
    p->value = v;
    if (p->value_len && m) p->value[p->value_len++] = ' ';
    memcpy(p->value + p->value_len, more, m + 1);
    p->value_len += m;
    return DPFL_OK;
}

dpfl_status fl_ini_parse(FILE *f, const char *path, fl_ini_handler on_key, void *user, dpfl_error *err)
{
    char *buf = NULL;
    size_t cap = 0;
    ssize_t got;
    int line = 0;
    pending p = {NULL, NULL, NULL, 0, 0};
    dpfl_status st = DPFL_OK;
    while (!st && (got = getline(&buf, &cap, f)) >= 0) {
        line++;
        char *s = buf;
        if (line == 1 && !strncmp(s, "\xEF\xBB\xBF", 3)) s += 3; /* a UTF-8 byte order mark */
        while (got > 0 && (buf[got - 1] == '\n' || buf[got - 1] == '\r')) buf[--got] = '\0';
        if (memchr(buf, '\0', (size_t)got))
            st = dpfl_fail(err, DPFL_EFORMAT, "config (%s:%d): a NUL byte in the line (not a text file?)", path, line);
        if (st) break;
        const int indented = blank(s[0]);
        char *t = trim(s);
        if (!t[0]) { /* a blank line ends a value */
            st = flush(&p, on_key, user);
            continue;
        }
        if (t[0] == ';' || t[0] == '#') continue; /* a comment line, also between continuation lines */
        cut_comment(t);
        t = trim(t);
        if (indented && p.key) { /* the value goes on */
            st = append(&p, t, path, line, err);
            continue;
        }
        if ((st = flush(&p, on_key, user))) break;
        if (t[0] == '[') {
            char *close = strchr(t, ']');
            if (!close)
                st = dpfl_fail(err, DPFL_EFORMAT, "config (%s:%d): '%.60s' has no closing ']' (a section is "
                                                  "[name])", path, line, t);
            else if (close[1])
                st = dpfl_fail(err, DPFL_EFORMAT, "config (%s:%d): '%.60s' after the section's ']'", path, line,
                               trim(close + 1));
            else {
                *close = '\0';
                free(p.section);
                if (!(p.section = strdup(trim(t + 1))))
                    st = dpfl_fail(err, DPFL_ENOMEM, "out of memory reading config (%s:%d)", path, line);
            }
            continue;
        }
        char *eq = strchr(t, '=');
        if (!eq) {
            st = dpfl_fail(err, DPFL_EFORMAT, "config (%s:%d): '%.60s' is not 'key = value', '[section]' or a comment "
                                              "(a value continues on lines that start with a blank)", path, line, t);
            continue;
        }
        *eq = '\0';
        char *key = trim(t);
        if (!key[0]) {
            st = dpfl_fail(err, DPFL_EFORMAT, "config (%s:%d): no key before '='", path, line);
            continue;
        }
        if (!p.section) {
            st = dpfl_fail(err, DPFL_EFORMAT, "config (%s:%d): key '%s' before any [section]", path, line, key);
            continue;
        }
        p.line = line;
        p.value_len = 0;
        if (!(p.key = strdup(key))) {
            st = dpfl_fail(err, DPFL_ENOMEM, "out of memory reading config (%s:%d)", path, line);
            continue;
        }
        st = append(&p, trim(eq + 1), path, line, err);
    }
    if (!st && ferror(f)) st = dpfl_fail(err, DPFL_EIO, "cannot read config (%s): read error after line %d", path, line);
    if (!st) st = flush(&p, on_key, user);
    free(p.key);
    free(p.value);
    free(p.section);
    free(buf);
    return st;
}
