/* The experiment configuration read and written: the key table (config_keys.c) drives INI parsing, --set overrides,
 * defaults, error messages, --help, the resolved config written to the run directory and the refusal of keys a run
 * would ignore.  Every value is typed when it is read -- numbers in their ranges, choices into enums, the seed,
 * schedules and number lists into numbers, fl.personal into its layers (config_values.c, schedule.c), data.dataset
 * into its kind and files (config_data.c) -- and stored only when valid; a bad one fails on one line naming the
 * key, the file and line (or --set) and why.  Cross-key checks are config_validate.c. */
#include "config_internal.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define NKEYS ((size_t)FL_CONFIG_NKEYS)
static const fl_keydef *const keys = fl_config_keys;
/* first line of a config written by dpfl_config_to_ini (a run's config.ini) */
#define RESOLVED_MARK "# dpfl resolved config: every key, as the run used it"

/* position of value in "a|b|c", or -1 */
static int choice_index(const char *choices, const char *value)
{
    size_t len = strlen(value);
    int i = 0;
    for (const char *p = choices; *p; i++) {
        const char *bar = strchr(p, '|');
        size_t l = bar ? (size_t)(bar - p) : strlen(p);
        if (l == len && !strncmp(p, value, l)) return i;
        p += l + (bar ? 1 : 0);
    }
    return -1;
}

/* the idx-th name of "a|b|c" into buf */
static const char *choice_name(const char *choices, int idx, char *buf, size_t n)
{
    const char *p = choices;
    for (int i = 0; i < idx && p; i++) {
        p = strchr(p, '|');
        if (p) p++;
    }
    if (!p) return "?";
    const char *bar = strchr(p, '|');
    size_t l = bar ? (size_t)(bar - p) : strlen(p);
    if (l >= n) l = n - 1;
    memcpy(buf, p, l);
    buf[l] = '\0';
    return buf;
}

static const fl_keydef *find_key(const char *section, const char *key)
{
    for (size_t i = 0; i < NKEYS; i++)
        if (!strcmp(keys[i].section, section) && !strcmp(keys[i].key, key)) return &keys[i];
    return NULL;
}

static int section_exists(const char *section)
{
    for (size_t i = 0; i < NKEYS; i++)
        if (!strcmp(keys[i].section, section)) return 1;
    return 0;
}

static void list_keys(const char *section, char *buf, size_t n)
{
    buf[0] = '\0';
    for (size_t i = 0; i < NKEYS; i++)
        if (!strcmp(keys[i].section, section)) {
            if (buf[0]) strncat(buf, ", ", n - strlen(buf) - 1);
            strncat(buf, keys[i].key, n - strlen(buf) - 1);
        }
}

/* ------------------------------------------------------------------------------------------ reading a value */
/* Every set_* reads `value` for key k into a local first and stores it only when it is valid.  `name` is how an
 * error names the key: "section.key (file:line)", "section.key (--set)". */
static dpfl_status set_value(dpfl_config *c, const char *where, const char *section, const char *key,
                             const char *value, dpfl_error *err);

/* Expand a preset: each of its settings unless the user already set that key (keys set later override it). */
static dpfl_status apply_preset(dpfl_config *c, int algo, dpfl_error *err)
{
    DPFL_ASSERT(algo >= 0 && algo < FL_CONFIG_NPRESETS); /* a preset for each of fl.algorithm's choices */
    for (int i = 0; fl_config_presets[algo][i]; i++) {
        char sec[32], key[48];
        const char *a = fl_config_presets[algo][i], *dot = strchr(a, '.'), *eq = strchr(a, '=');
        snprintf(sec, sizeof sec, "%.*s", (int)(dot - a), a);
        snprintf(key, sizeof key, "%.*s", (int)(eq - dot - 1), dot + 1);
        const fl_keydef *k = find_key(sec, key);
        DPFL_ASSERT(k);
        if (c->user_set[k - keys]) continue;
        dpfl_status st = set_value(c, "fl.algorithm", sec, key, eq + 1, err);
        if (st) return st;
        c->user_set[k - keys] = 0; /* set by the preset, not the user */
    }
    return DPFL_OK;
}

/* the range of each value of a schedule or list: "[lo, hi]", "(lo, hi]", "(lo, inf)" (values are finite) */
static const char *range_text(const fl_keydef *k, char *buf, size_t n)
{
    const char open = k->lo_open ? '(' : '[', close = isinf(k->hi) ? ')' : ']';
    if (k->whole) snprintf(buf, n, "%c%.0f, %.0f%c", open, k->lo, k->hi, close);
    else snprintf(buf, n, "%c%g, %g%c", open, k->lo, k->hi, close);
    return buf;
}

/* one value of a schedule or list against the key's range */
static int value_in_range(const fl_keydef *k, double v)
{
    return (k->lo_open ? v > k->lo : v >= k->lo) && v <= k->hi && (!k->whole || v == floor(v));
}

static dpfl_status set_int(const fl_keydef *k, void *field, const char *name, const char *value, dpfl_error *err)
{
    char *end;
    errno = 0;
    long v = strtol(value, &end, 10);
    if (end == value || *end || (errno && errno != ERANGE))
        return dpfl_fail(err, DPFL_EINVAL, "%s: '%s' is not an integer", name, value);
    if (errno == ERANGE)
        return dpfl_fail(err, DPFL_EINVAL, "%s: %s is out of range [%.0f, %.0f]", name, value, k->lo, k->hi);
    if (v < k->lo || v > k->hi)
        return dpfl_fail(err, DPFL_EINVAL, "%s: %ld is out of range [%.0f, %.0f]", name, v, k->lo, k->hi);
    *(int32_t *)field = (int32_t)v;
    return DPFL_OK;
}

static dpfl_status set_double(const fl_keydef *k, void *field, const char *name, const char *value, dpfl_error *err)
{
    char *end;
    errno = 0;
    double v = strtod(value, &end);
    if (end == value || *end || (errno && errno != ERANGE) || isnan(v) ||
        (isinf(v) && !errno && !(v > 0 && isinf(k->hi))))
        return dpfl_fail(err, DPFL_EINVAL, "%s: '%s' is not a number", name, value);
    if (errno == ERANGE && isinf(v)) /* beyond a double (an underflow is checked against the range as it is) */
        return dpfl_fail(err, DPFL_EINVAL, "%s: %s is out of range [%g, %g]", name, value, k->lo, k->hi);
    if (v < k->lo || v > k->hi)
        return dpfl_fail(err, DPFL_EINVAL, "%s: %g is out of range [%g, %g]", name, v, k->lo, k->hi);
    *(double *)field = v;
    return DPFL_OK;
}

/* Text kept as text must read back from the run directory's config.ini as the same value (a resume loads it): no
 * control character (one line), no surrounding blanks (stripped) and no blank before ';' (an inline comment); its
 * length is the field's (lines themselves have no limit). */
static dpfl_status check_text(size_t max, const char *name, const char *value, dpfl_error *err)
{
    for (const char *p = value; *p; p++) {
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            return dpfl_fail(err, DPFL_EINVAL, "%s: value contains a control character (0x%02x at position %d)", name,
                             (unsigned char)*p, (int)(p - value));
        if (*p == ';' && (p == value || p[-1] == ' '))
            return dpfl_fail(err, DPFL_EINVAL, "%s: a ';' %s would start a comment in the config file", name,
                             p == value ? "at the start of the value" : "after a blank");
    }
    if (strlen(value) > max)
        return dpfl_fail(err, DPFL_EINVAL, "%s: value is too long (max %zu characters)", name, max);
    if (value[0] == ' ' || (value[0] && value[strlen(value) - 1] == ' '))
        return dpfl_fail(err, DPFL_EINVAL, "%s: value '%s' starts or ends with a blank", name, value);
    return DPFL_OK;
}

static dpfl_status set_text(const fl_keydef *k, void *field, const char *name, const char *value, dpfl_error *err)
{
    dpfl_status st = check_text(k->size - 1, name, value, err);
    if (!st) strcpy(field, value);
    return st;
}

int fl_dataset_is_typed(const dpfl_data_config *d)
{
    const fl_keydef *k = find_key("data", "dataset");
    const int named = choice_index(k->choices, d->dataset);
    if (named < 0 && !dpfl_dataset_known(d->dataset)) return 0; /* no value the key takes */
    dpfl_data_config *t = malloc(sizeof *t);
    if (!t) return 1; /* cannot tell: the data module reads the text itself */
    memcpy(t->dataset, d->dataset, sizeof t->dataset);
    fl_dataset_type(t, named);
    const int same = t->kind == d->kind && t->files.n == d->files.n && t->files.patterns == d->files.patterns;
    free(t);
    return same;
}

static dpfl_status set_choice(dpfl_config *c, const fl_keydef *k, void *field, const char *name, const char *value,
                              dpfl_error *err)
{
    int idx = choice_index(k->choices, value);
    const int named = idx;
    if (idx < 0 && field == c->data.dataset && dpfl_dataset_known(value)) idx = 0; /* csv:, idx:, npy: ... */
    if (idx < 0 && field == (void *)&c->record_dp.two_stage_bound && !strcmp(value, "zhu-wang"))
        return dpfl_fail(err, DPFL_EINVAL, "%s: 'zhu-wang' was removed: Zhu-Wang 2019 assumes a client that sits a "
                                           "round out is indistinguishable from one that took part, and in dpfl it is "
                                           "not (under-reported up to 6x); use published or pld", name);
    if (idx < 0 && field == c->data.dataset) /* a name, or files */
        return dpfl_fail(err, DPFL_EINVAL, "%s: '%s' is not one of %s, nor csv:FILES, idx:FILES or npy:FILES "
                                           "(X.npy,Y.npy or FILE.npz)", name, value, k->choices);
    if (idx < 0) return dpfl_fail(err, DPFL_EINVAL, "%s: '%s' is not one of %s", name, value, k->choices);
    if (k->type == FL_KEY_NAME) {
        dpfl_status st = set_text(k, field, name, value, err);
        if (!st && field == c->data.dataset) fl_dataset_type(&c->data, named);
        return st;
    }
    DPFL_ASSERT(k->size == sizeof(int)); /* an enum */
    *(int *)field = idx;
    if (field == (void *)&c->fl.algorithm) return apply_preset(c, idx, err);
    return DPFL_OK;
}

/* the canonical text of a seed, schedule or list (what config.ini holds); the length it needs */
static size_t typed_text(const fl_keydef *k, const void *field, char *out, size_t cap)
{
    switch (k->type) {
    case FL_KEY_SEED: { /* "" when none is given */
        const dpfl_seed *s = field;
        if (!s->given) return (size_t)snprintf(out, cap, "%s", "");
        return (size_t)snprintf(out, cap, "%llu", (unsigned long long)s->value);
    }
    case FL_KEY_SCHEDULE: return fl_schedule_text(field, out, cap);
    case FL_KEY_LIST: return fl_number_list_text(field, out, cap);
    case FL_KEY_LAYERS: return fl_personal_text(field, out, cap);
    default: DPFL_ASSERT(0); return 0;
    }
}

static dpfl_status set_typed(const fl_keydef *k, void *field, const char *name, const char *value, dpfl_error *err)
{
    union {
        dpfl_seed seed;
        dpfl_schedule schedule;
        dpfl_number_list list;
        dpfl_personal_layers layers;
    } v;
    memset(&v, 0, sizeof v);
    /* fl.personal is read as text first: its length, blanks and characters as for any text value */
    dpfl_status st = k->type == FL_KEY_LAYERS ? check_text(DPFL_PERSONAL_TEXT_MAX, name, value, err) : DPFL_OK;
    if (!st)
        st = k->type == FL_KEY_SEED       ? fl_seed_parse(value, name, &v.seed, err)
             : k->type == FL_KEY_SCHEDULE ? dpfl_schedule_parse(value, name, &v.schedule, err)
             : k->type == FL_KEY_LAYERS   ? fl_personal_parse(value, name, &v.layers, err)
                                          : fl_number_list_parse(value, name, &v.list, err);
    if (st) return st;
    char range[64];
    for (int i = 0; k->type == FL_KEY_SCHEDULE && i < v.schedule.n; i++)
        if (!value_in_range(k, v.schedule.value[i]))
            return dpfl_fail(err, DPFL_EINVAL, "%s: the value of round %d (%g) is not %s in %s", name,
                             (int)v.schedule.round[i], v.schedule.value[i], k->whole ? "an integer" : "a number",
                             range_text(k, range, sizeof range));
    for (int32_t i = 0; k->type == FL_KEY_LIST && i < v.list.n; i++)
        if (!value_in_range(k, v.list.v[i]))
            return dpfl_fail(err, DPFL_EINVAL, "%s: value %d (%g) is not %s in %s", name, (int)i + 1, v.list.v[i],
                             k->whole ? "an integer" : "a number", range_text(k, range, sizeof range));
    DPFL_ASSERT(k->size <= sizeof v);
    memcpy(field, &v, k->size);
    return DPFL_OK;
}

static dpfl_status set_key(dpfl_config *c, const fl_keydef *k, const char *where, const char *value, dpfl_error *err)
{
    char name[320];
    snprintf(name, sizeof name, "%s.%s (%s)", k->section, k->key, where);
    void *field = (char *)c + k->off;
    DPFL_ASSERT((size_t)(k - keys) < sizeof c->user_set);
    c->user_set[k - keys] = FL_SET_FILE;
    switch (k->type) {
    case FL_KEY_INT: return set_int(k, field, name, value, err);
    case FL_KEY_DOUBLE: return set_double(k, field, name, value, err);
    case FL_KEY_TEXT: return set_text(k, field, name, value, err);
    case FL_KEY_CHOICE:
    case FL_KEY_NAME: return set_choice(c, k, field, name, value, err);
    case FL_KEY_SEED:
    case FL_KEY_SCHEDULE:
    case FL_KEY_LIST:
    case FL_KEY_LAYERS: return set_typed(k, field, name, value, err);
    }
    return DPFL_OK;
}

static dpfl_status set_value(dpfl_config *c, const char *where, const char *section, const char *key,
                             const char *value, dpfl_error *err)
{
    if (!section_exists(section)) {
        char valid[128] = "";
        for (size_t i = 0; i < NKEYS; i++) /* each section once, in table order */
            if (i == 0 || strcmp(keys[i].section, keys[i - 1].section)) {
                if (valid[0]) strncat(valid, ", ", sizeof valid - strlen(valid) - 1);
                strncat(valid, keys[i].section, sizeof valid - strlen(valid) - 1);
            }
        return dpfl_fail(err, DPFL_EINVAL, "unknown section [%s] (%s): valid sections are %s", section, where, valid);
    }
    const fl_keydef *k = find_key(section, key);
    if (!k) {
        char valid[512];
        list_keys(section, valid, sizeof valid);
        return dpfl_fail(err, DPFL_EINVAL, "unknown key %s.%s (%s): valid keys in [%s] are %s", section, key, where,
                         section, valid);
    }
    return set_key(c, k, where, value, err);
}

void dpfl_config_defaults(dpfl_config *c)
{
    memset(c, 0, sizeof *c);
    for (size_t i = 0; i < NKEYS; i++) {
        dpfl_error err;
        const dpfl_status st = set_key(c, &keys[i], "default", keys[i].dflt, &err);
        DPFL_ASSERT(st == DPFL_OK); /* tests/test_fl.c reads every default back */
    }
    memset(c->user_set, 0, sizeof c->user_set);
}

/* ------------------------------------------------------------------------------------------ INI files, --set */
typedef struct {
    dpfl_config *c;
    const char *path;
    dpfl_error *err;
    int line_of[FL_CONFIG_NKEYS]; /* the line that set each key, 0 none */
} ini_ctx;

static dpfl_status on_key(void *user, const char *section, const char *name, const char *value, int line)
{
    ini_ctx *x = user;
    char where[1100];
    snprintf(where, sizeof where, "%s:%d", x->path, line);
    const fl_keydef *k = find_key(section, name);
    if (k && x->line_of[k - keys])
        return dpfl_fail(x->err, DPFL_EINVAL, "%s.%s (%s): set twice, first at line %d; keep one of them (on the "
                                              "command line, --set replaces a value of the file)", section, name,
                         where, x->line_of[k - keys]);
    dpfl_status st = set_value(x->c, where, section, name, value, x->err);
    if (!st) {
        x->line_of[k - keys] = line;
        x->c->user_set[k - keys] = FL_SET_FILE;
    }
    return st;
}

dpfl_status dpfl_config_load(dpfl_config *c, const char *path, dpfl_error *err)
{
    struct stat sb;
    if (stat(path, &sb) != 0) return dpfl_fail(err, DPFL_EIO, "cannot open config (%s): %s", path, strerror(errno));
    if (!S_ISREG(sb.st_mode))
        return dpfl_fail(err, DPFL_EINVAL, "config (%s): not a regular file%s", path,
                         S_ISDIR(sb.st_mode) ? " but a directory (give the .ini file)" : "");
    FILE *f = fopen(path, "r");
    if (!f) return dpfl_fail(err, DPFL_EIO, "cannot open config (%s): %s", path, strerror(errno));
    char first[128] = "";
    int resolved = fgets(first, sizeof first, f) && !strncmp(first, RESOLVED_MARK, strlen(RESOLVED_MARK));
    rewind(f);
    ini_ctx x;
    memset(&x, 0, sizeof x);
    x.c = c;
    x.path = path;
    x.err = err;
    dpfl_status st = fl_ini_parse(f, path, on_key, &x, err);
    fclose(f);
    if (st) return st;
    /* a run's own config.ini lists every key: none of them is a user's choice to be checked for being ignored */
    if (resolved) memset(c->user_set, 0, sizeof c->user_set);
    return DPFL_OK;
}

/* 1 if key i acts in c: its section is switched on (or it is that section's `enabled`) and its rule applies */
static int key_active(const dpfl_config *c, size_t i)
{
    for (size_t s = 0; s < FL_CONFIG_NSWITCHED; s++)
        if (!strcmp(keys[i].section, fl_config_switched[s].section) && strcmp(keys[i].key, "enabled") &&
            !fl_config_switched[s].on(c))
            return 0;
    return !keys[i].applies || keys[i].applies(c);
}

/* key i back to its default, set by no one */
static void reset_key(dpfl_config *c, size_t i)
{
    dpfl_error e;
    const dpfl_status st = set_key(c, &keys[i], "default", keys[i].dflt, &e);
    DPFL_ASSERT(st == DPFL_OK);
    c->user_set[i] = 0;
}

/* "section.key" of a --set or --unset into its parts; key "" when name has no '.' and may be a section */
static dpfl_status split_name(const char *opt, const char *a, size_t len, int section_ok, char *section, char *key,
                              dpfl_error *err)
{
    const char *dot = memchr(a, '.', len);
    if (!dot && !section_ok) return dpfl_fail(err, DPFL_EINVAL, "%s '%s': expected section.key=value", opt, a);
    size_t ls = dot ? (size_t)(dot - a) : len, lk = dot ? len - ls - 1 : 0;
    if (ls >= 64 || lk >= 64) return dpfl_fail(err, DPFL_EINVAL, "%s '%.80s': name too long", opt, a);
    memcpy(section, a, ls);
    section[ls] = '\0';
    memcpy(key, dot ? dot + 1 : "", lk);
    key[lk] = '\0';
    return DPFL_OK;
}

dpfl_status dpfl_config_set_noted(dpfl_config *c, const char *a, char *note, size_t note_cap, dpfl_error *err)
{
    if (note_cap) note[0] = '\0';
    const char *eq = strchr(a, '=');
    if (!eq) return dpfl_fail(err, DPFL_EINVAL, "--set '%s': expected section.key=value", a);
    char section[64], key[64];
    dpfl_status st = split_name("--set", a, (size_t)(eq - a), 0, section, key, err);
    if (st) return st;
    const fl_keydef *k = find_key(section, key);
    const char *value = eq + 1;
    if (k && !value[0] && k->dflt[0] && (k->type == FL_KEY_INT || k->type == FL_KEY_DOUBLE || k->type == FL_KEY_CHOICE))
        return dpfl_fail(err, DPFL_EINVAL, "%s.%s (--set): an empty value; to drop the config's %s.%s (back to its "
                                           "default, %s) use --unset %s.%s", section, key, section, key, k->dflt,
                         section, key);
    /* the keys of the file that act now: those this --set switches off are dropped, with a note */
    unsigned char acted[FL_CONFIG_NKEYS];
    for (size_t i = 0; i < NKEYS; i++) acted[i] = c->user_set[i] == FL_SET_FILE && key_active(c, i);
    if ((st = set_value(c, "--set", section, key, value, err))) return st;
    c->user_set[k - keys] = FL_SET_CLI;
    size_t n = 0;
    for (size_t i = 0; i < NKEYS; i++) {
        if (!acted[i] || key_active(c, i) || c->user_set[i] != FL_SET_FILE) continue;
        reset_key(c, i);
        if (note_cap)
            n += (size_t)snprintf(note + (n < note_cap ? n : note_cap), n < note_cap ? note_cap - n : 0, "%s%s.%s",
                                  n ? ", " : "", keys[i].section, keys[i].key);
    }
    if (n && note_cap) {
        char *list = strdup(note);
        if (list)
            snprintf(note, note_cap, "--set %s.%s=%s: the config's %s no longer appl%s and %s dropped (back to the "
                                     "default)", section, key, value, list, strchr(list, ',') ? "y" : "ies",
                     strchr(list, ',') ? "are" : "is");
        free(list);
    }
    return DPFL_OK;
}

dpfl_status dpfl_config_set(dpfl_config *c, const char *a, dpfl_error *err)
{
    return dpfl_config_set_noted(c, a, NULL, 0, err);
}

dpfl_status dpfl_config_unset(dpfl_config *c, const char *name, dpfl_error *err)
{
    char section[64], key[64];
    dpfl_status st = split_name("--unset", name, strlen(name), 1, section, key, err);
    if (st) return st;
    if (!section_exists(section) || (key[0] && !find_key(section, key)))
        return set_value(c, "--unset", section, key[0] ? key : "?", "", err); /* its unknown-name error */
    if (!strcmp(section, "fl") && !strcmp(key, "algorithm"))
        return dpfl_fail(err, DPFL_EINVAL, "--unset fl.algorithm: a preset is expanded into its settings when it is "
                                           "read; --set fl.algorithm=custom does not expand one, and --unset or --set "
                                           "the keys it set");
    for (size_t i = 0; i < NKEYS; i++)
        if (!strcmp(keys[i].section, section) && (key[0] ? !strcmp(keys[i].key, key) : strcmp(keys[i].key, "algorithm")))
            reset_key(c, i);
    return DPFL_OK;
}

/* ------------------------------------------------------------------------------------------ writing */
/* The value of key k in c as config.ini holds it (reads back as the same value). */
static const char *value_text(const dpfl_config *c, const fl_keydef *k, char *buf, size_t cap)
{
    const void *field = (const char *)c + k->off;
    switch (k->type) {
    case FL_KEY_INT: snprintf(buf, cap, "%d", (int)*(const int32_t *)field); break;
    case FL_KEY_DOUBLE: { /* the shortest text that reads back as the same double: "0.1", not 0.10000000000000001 */
        char num[FL_NUMBER_TEXT];
        snprintf(buf, cap, "%s", fl_number_text(*(const double *)field, num));
        break;
    }
    case FL_KEY_CHOICE: {
        char name[32];
        snprintf(buf, cap, "%s", choice_name(k->choices, *(const int *)field, name, sizeof name));
        break;
    }
    case FL_KEY_TEXT:
    case FL_KEY_NAME: snprintf(buf, cap, "%s", (const char *)field); break;
    case FL_KEY_SEED:
    case FL_KEY_SCHEDULE:
    case FL_KEY_LIST:
    case FL_KEY_LAYERS: typed_text(k, field, buf, cap); break;
    }
    return buf;
}

char *dpfl_config_to_ini(const dpfl_config *c)
{
    /* the longest value: a text field, or a list of numbers each FL_NUMBER_TEXT with ", " */
    const size_t vcap = sizeof c->data.dataset + (size_t)DPFL_NUMBER_LIST_MAX * (FL_NUMBER_TEXT + 2);
    size_t cap = 16384, n = 0;
    char *s = malloc(cap), *value = malloc(vcap);
    if (!s || !value) goto fail;
    n += (size_t)snprintf(s, cap, "%s\n", RESOLVED_MARK);
    const char *cur = "";
    for (size_t i = 0; i < NKEYS; i++) {
        const fl_keydef *k = &keys[i];
        value_text(c, k, value, vcap);
        while (n + strlen(k->section) + strlen(k->key) + strlen(value) + 16 > cap) {
            char *t = realloc(s, cap *= 2);
            if (!t) goto fail;
            s = t;
        }
        if (strcmp(cur, k->section)) {
            n += (size_t)snprintf(s + n, cap - n, "\n[%s]\n", k->section);
            cur = k->section;
        }
        n += (size_t)snprintf(s + n, cap - n, "%s = %s\n", k->key, value);
    }
    free(value);
    return s;
fail:
    free(s);
    free(value);
    return NULL;
}

/* the type of key k as --help and docs/config.md show it */
static const char *type_text(const fl_keydef *k, char *buf, size_t n)
{
    char range[64];
    const int unbounded = isinf(k->lo) && isinf(k->hi);
    switch (k->type) {
    case FL_KEY_INT: snprintf(buf, n, "integer in [%.0f, %.0f]", k->lo, k->hi); break;
    case FL_KEY_DOUBLE: snprintf(buf, n, "number in [%g, %g]", k->lo, k->hi); break;
    case FL_KEY_TEXT: snprintf(buf, n, "text"); break;
    case FL_KEY_CHOICE:
    case FL_KEY_NAME: snprintf(buf, n, "%s", k->choices); break;
    case FL_KEY_SEED: snprintf(buf, n, "empty or an integer in [0, 2^64)"); break;
    case FL_KEY_SCHEDULE:
        snprintf(buf, n, "ROUND:VALUE list, %s in %s", k->whole ? "integers" : "values", range_text(k, range, sizeof range));
        break;
    case FL_KEY_LIST:
        if (unbounded) snprintf(buf, n, "list of numbers");
        else snprintf(buf, n, "list of %s in %s", k->whole ? "integers" : "numbers", range_text(k, range, sizeof range));
        break;
    case FL_KEY_LAYERS: snprintf(buf, n, "list of norm, head or layer positions"); break;
    }
    return buf;
}

void dpfl_config_print_keys(FILE *f)
{
    const char *cur = "";
    for (size_t i = 0; i < NKEYS; i++) {
        const fl_keydef *k = &keys[i];
        if (strcmp(cur, k->section)) {
            fprintf(f, "  [%s]\n", k->section);
            cur = k->section;
        }
        char type[160];
        fprintf(f, "    %-20s %s — %s; default %s\n", k->key, k->help, type_text(k, type, sizeof type),
                k->dflt[0] ? k->dflt : "\"\"");
    }
}

/* Every choice key's names, split once: dpfl_config_choice returns pointers into this table, so several calls may
 * share one printf. */
enum { MAX_CHOICES = 8, CHOICE_LEN = 24 };
static char choice_names[FL_CONFIG_NKEYS][MAX_CHOICES][CHOICE_LEN];
static pthread_once_t choice_once = PTHREAD_ONCE_INIT;
static void split_choices(void)
{
    for (size_t i = 0; i < NKEYS; i++)
        if (keys[i].type == FL_KEY_CHOICE)
            for (int j = 0; j < MAX_CHOICES; j++) choice_name(keys[i].choices, j, choice_names[i][j], CHOICE_LEN);
}

const char *dpfl_config_choice(const dpfl_config *c, const char *section_key)
{
    const char *dot = strchr(section_key, '.');
    if (!dot) return "?";
    pthread_once(&choice_once, split_choices);
    for (size_t i = 0; i < NKEYS; i++)
        if (keys[i].type == FL_KEY_CHOICE && !strncmp(keys[i].section, section_key, (size_t)(dot - section_key)) &&
            keys[i].section[dot - section_key] == '\0' && !strcmp(keys[i].key, dot + 1)) {
            int v = *(const int *)((const char *)c + keys[i].off);
            return v >= 0 && v < MAX_CHOICES ? choice_names[i][v] : "?";
        }
    return "?";
}

/* ------------------------------------------------------------------------------------------ ignored keys */
dpfl_status dpfl_config_check_ignored(const dpfl_config *c, dpfl_error *err)
{
    /* first the sections switched off: their keys would leave a run the user believes private not private */
    for (size_t s = 0; s < FL_CONFIG_NSWITCHED; s++) {
        const fl_switched_section *sw = &fl_config_switched[s];
        if (sw->on(c)) continue;
        for (size_t i = 0; i < NKEYS; i++)
            if (c->user_set[i] && !strcmp(keys[i].section, sw->section) && strcmp(keys[i].key, "enabled"))
                return dpfl_fail(err, DPFL_EINVAL, "%s.%s is set but %s.enabled = no: this run would NOT be "
                                                   "differentially private at %s level; set %s.enabled = yes, or "
                                                   "remove %s.%s (on the command line: --unset %s.%s)",
                                 keys[i].section, keys[i].key, keys[i].section, sw->level, keys[i].section,
                                 keys[i].section, keys[i].key, keys[i].section, keys[i].key);
    }
    for (size_t i = 0; i < NKEYS; i++)
        if (c->user_set[i] == FL_SET_CLI && keys[i].applies && !keys[i].applies(c))
            return dpfl_fail(err, DPFL_EINVAL, "%s.%s (--set) would be ignored: %s; change that setting on the "
                                               "command line too", keys[i].section, keys[i].key,
                             keys[i].ignored_because);
    for (size_t i = 0; i < NKEYS; i++)
        if (c->user_set[i] && keys[i].applies && !keys[i].applies(c))
            return dpfl_fail(err, DPFL_EINVAL, "%s.%s is set but would be ignored: %s; remove it (on the command "
                                               "line: --unset %s.%s) or change that setting",
                             keys[i].section, keys[i].key, keys[i].ignored_because, keys[i].section, keys[i].key);
    return DPFL_OK;
}

void dpfl_config_model_spec(const dpfl_config *c, char *out, size_t cap)
{
    static const char *const fn[] = {"", "", "-sigmoid", "-tanh", "-relu"};
    if (c->model.transform != DPFL_TRANSFORM_NONE)
        snprintf(out, cap, "transform-%s%s:%s", c->model.transform_shape, fn[c->model.transform], c->model.arch);
    else snprintf(out, cap, "%s", c->model.arch);
}
