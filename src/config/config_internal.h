/* Internals of the configuration shared by its files: the key table (config_keys.c: each key's type, range or
 * choices, default and ignored-key rule), read and written by config.c; and the typed values that stand for text in
 * the INI file (config_values.c, schedule.c): a value read from a file or --set is parsed once into its type, and
 * written back to a run's config.ini in one canonical text that reads back as the same value. */
#ifndef DPFL_FL_CONFIG_INTERNAL_H
#define DPFL_FL_CONFIG_INTERNAL_H
#include "dpfl/config.h"

#include <stdio.h>

/* ------------------------------------------------------------------------------------------ the key table */
/* FL_KEY_CHOICE: an enum, the position of the value in choices; FL_KEY_NAME: text from choices (or a dataset's
 * files); FL_KEY_SEED: dpfl_seed; FL_KEY_SCHEDULE: dpfl_schedule; FL_KEY_LIST: dpfl_number_list; FL_KEY_LAYERS:
 * dpfl_personal_layers. */
typedef enum {
    FL_KEY_INT, FL_KEY_DOUBLE, FL_KEY_TEXT, FL_KEY_CHOICE, FL_KEY_NAME, FL_KEY_SEED, FL_KEY_SCHEDULE, FL_KEY_LIST,
    FL_KEY_LAYERS
} fl_key_type;

typedef struct {
    const char *section, *key;
    fl_key_type type;
    size_t off, size;    /* the field in dpfl_config */
    double lo, hi;       /* inclusive range of a number, or of each value of a schedule or list */
    int lo_open;         /* lo itself is excluded */
    int whole;           /* schedule or list values must be whole numbers */
    const char *choices; /* "a|b|c" for FL_KEY_CHOICE and FL_KEY_NAME */
    const char *dflt;    /* the default, as the INI file would give it (the one place defaults are written) */
    const char *help;
    /* a key that acts only when applies(c): setting it otherwise is refused, saying why it would be ignored */
    int (*applies)(const dpfl_config *c);
    const char *ignored_because;
} fl_keydef;

#define FL_CONFIG_NKEYS 96
/* dpfl_config.user_set: who set each key (0: no one -- the default, a preset or a run's resolved config.ini) */
enum { FL_SET_FILE = 1, FL_SET_CLI = 2 };
extern const fl_keydef fl_config_keys[FL_CONFIG_NKEYS];

/* Sections switched on and off as a whole (record_dp, client_dp): while off, every key in them but `enabled` is
 * refused (a run the user believes private would not be). */
typedef struct {
    const char *section, *level;
    int (*on)(const dpfl_config *c);
} fl_switched_section;
#define FL_CONFIG_NSWITCHED 2
extern const fl_switched_section fl_config_switched[FL_CONFIG_NSWITCHED];

/* The presets of fl.algorithm, in the order of its choices: ordinary settings "section.key=value", NULL-ended. */
#define FL_CONFIG_NPRESETS 9
extern const char *const fl_config_presets[FL_CONFIG_NPRESETS][9];

/* ------------------------------------------------------------------------------------------ INI syntax */
/* config_ini.c: each "key = value" of the file at path (opened as f), whole (continuation lines joined), with its
 * section and the line it starts on; stops at the first status on_key returns that is not DPFL_OK, or at a line
 * that is not INI (named with its file and line).  Lines have no length limit. */
typedef dpfl_status (*fl_ini_handler)(void *user, const char *section, const char *key, const char *value, int line);
dpfl_status fl_ini_parse(FILE *f, const char *path, fl_ini_handler on_key, void *user, dpfl_error *err);

/* ------------------------------------------------------------------------------------------ typed values */
/* The shortest text of x that reads back as x: a whole number below 2^53 as an integer ("200", not "2e+02"),
 * otherwise the shortest "%.*g".  buf holds at least FL_NUMBER_TEXT bytes. */
#define FL_NUMBER_TEXT 32
const char *fl_number_text(double x, char *buf);

/* "a, b, c" into out (n = 0 for empty text); every value a finite number.  key names the key in errors, e.g.
 * "data.feature_mean (--set)". */
dpfl_status fl_number_list_parse(const char *text, const char *key, dpfl_number_list *out, dpfl_error *err);
/* The canonical texts: "a, b, c" and "ROUND:VALUE, ...".  Like snprintf: the length they need, written as far as
 * cap allows. */
size_t fl_number_list_text(const dpfl_number_list *l, char *out, size_t cap);
size_t fl_schedule_text(const dpfl_schedule *s, char *out, size_t cap);

/* fl.personal: "norm, head, 3" (items separated by commas and blanks; "" none) into out; an item that is not norm,
 * head or a layer position (at most 6 digits) fails naming it.  The text has passed the checks of any text value
 * (at most DPFL_PERSONAL_TEXT_MAX characters).  Its canonical text joins the items with ",": never longer than a
 * text it was read from. */
dpfl_status fl_personal_parse(const char *text, const char *key, dpfl_personal_layers *out, dpfl_error *err);
size_t fl_personal_text(const dpfl_personal_layers *l, char *out, size_t cap);

/* data.dataset's kind and list of files from its text (just stored): named is the position of the text among the
 * key's choices, or -1 for your own files or arrays (csv:, idx:, npy:, memory:). */
void fl_dataset_type(dpfl_data_config *d, int named);
/* 1 if data.dataset's kind and files are what its text gives now; 0 when the text was written into the struct by
 * hand (not through dpfl_config_set / _load), leaving them stale, or is no value the key takes. */
int fl_dataset_is_typed(const dpfl_data_config *d);

/* "" (no seed: OS entropy) or a non-negative decimal integer below 2^64. */
dpfl_status fl_seed_parse(const char *text, const char *key, dpfl_seed *out, dpfl_error *err);
#endif
