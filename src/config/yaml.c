/*
 * The daemon's YAML file (SPEC section 3), read with libyaml's document
 * API. Every problem is collected with its file:line:column; nothing stops
 * at the first one except a YAML syntax error (libyaml cannot go on).
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <yaml.h>

#include "common/check.h"
#include "common/util.h"
#include "config/daemon_file.h"
#include "config/internal.h"
#include "config/yaml_internal.h"
#include "ejob/error.h"
#include "ejob/log.h"
#include "ejob/metrics.h"
#include "ejob/registry.h"

/* Mapping pairs visited at most: aliases can make a small file describe an
 * enormous tree, and walking it must stay cheap. */
#define MAX_VISITS 2000000

/* Deepest nesting of mappings and sequences, and most aliases, a file may
 * have. Checked on the event stream before the document is built: libyaml's
 * document loader recurses per level and slows down quadratically, so a
 * hostile file must be refused before it gets there. */
#define MAX_DEPTH 64
#define MAX_ALIASES 1000

/* Problems are gathered with their position, then reported in file order. */
#define MAX_GATHERED 1000

static void yerr(struct yctx *c, yaml_mark_t m, const char *path, const char *fmt, ...)
    EJ_PRINTF(4, 5);

static void yerr(struct yctx *c, yaml_mark_t m, const char *path, const char *fmt, ...)
{
    char msg[512];
    if (c->muted)
        return;
    c->nerr++;
    if (c->nmsgs >= MAX_GATHERED || c->too_complex)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (c->msgs == NULL) {
        c->msgs = calloc(MAX_GATHERED, sizeof(*c->msgs));
        if (c->msgs == NULL) {
            c->rc = EJ_ENOMEM;
            return;
        }
    }
    char *text;
    if (path != NULL && path[0] != '\0')
        text = ej__asprintf("%s:%zu:%zu: %s: %s", c->name, m.line + 1, m.column + 1, path, msg);
    else
        text = ej__asprintf("%s:%zu:%zu: %s", c->name, m.line + 1, m.column + 1, msg);
    if (text == NULL) {
        c->rc = EJ_ENOMEM;
        return;
    }
    c->msgs[c->nmsgs] = (struct ymsg){m.line, m.column, c->nmsgs, text};
    c->nmsgs++;
}

static int cmp_ymsg(const void *a, const void *b)
{
    const struct ymsg *x = a, *y = b;
    if (x->line != y->line)
        return x->line < y->line ? -1 : 1;
    if (x->column != y->column)
        return x->column < y->column ? -1 : 1;
    return x->seq < y->seq ? -1 : (x->seq > y->seq);
}

/* Hand the gathered messages to the caller's list, in file order. */
static void flush_messages(struct yctx *c)
{
    if (c->msgs == NULL)
        return;
    qsort(c->msgs, c->nmsgs, sizeof(*c->msgs), cmp_ymsg);
    for (size_t i = 0; i < c->nmsgs; i++) {
        if (ej__config_errors_add(c->errs, "%s", c->msgs[i].text) != 0)
            c->rc = EJ_ENOMEM;
        free(c->msgs[i].text);
    }
    free(c->msgs);
    c->msgs = NULL;
    c->nmsgs = 0;
}

static yaml_node_t *node(struct yctx *c, int id)
{
    return yaml_document_get_node(c->doc, id);
}

static const char *kind_name(yaml_node_t *n)
{
    switch (n->type) {
    case YAML_MAPPING_NODE:
        return "a mapping";
    case YAML_SEQUENCE_NODE:
        return "a sequence";
    default:
        return "a scalar";
    }
}

static const char *sval(yaml_node_t *n)
{
    return (const char *)n->data.scalar.value;
}

/* A plain empty, "~" or "null" scalar: the key is treated as absent. */
static bool is_null(yaml_node_t *n)
{
    if (n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return false;
    const char *s = sval(n);
    return s[0] == '\0' || strcmp(s, "~") == 0 || strcmp(s, "null") == 0 ||
           strcmp(s, "Null") == 0 || strcmp(s, "NULL") == 0;
}

static void shown_scalar(yaml_node_t *n, char *out, size_t outlen)
{
    ej__config_quote_short(sval(n), n->data.scalar.length, out, outlen);
}

/* Count one visited pair; false once the budget is spent (reported once). */
static bool visit(struct yctx *c, yaml_mark_t m)
{
    if (c->too_complex)
        return false;
    if (++c->visits > MAX_VISITS) {
        /* Whatever was found so far is mostly the same few problems seen
         * through aliases again and again: say only this. */
        for (size_t i = 0; i < c->nmsgs; i++)
            free(c->msgs[i].text);
        c->nmsgs = 0;
        yerr(c, m, NULL, "document too complex: more than %d mapping entries after aliases",
             MAX_VISITS);
        c->too_complex = true;
        return false;
    }
    return true;
}

/* A scalar value as a string. Returns false (reported) for other nodes and
 * for scalars holding a NUL. */
static bool want_scalar(struct yctx *c, yaml_node_t *v, const char *path, const char *what)
{
    if (v->type != YAML_SCALAR_NODE) {
        yerr(c, v->start_mark, path, "expected %s, got %s", what, kind_name(v));
        return false;
    }
    if (strlen(sval(v)) != v->data.scalar.length) {
        yerr(c, v->start_mark, path, "must not contain NUL characters");
        return false;
    }
    return true;
}

static bool get_str(struct yctx *c, yaml_node_t *v, const char *path, char **dst)
{
    if (is_null(v))
        return true;
    if (!want_scalar(c, v, path, "a string"))
        return false;
    if (ej_job_config_set_str(dst, sval(v)) != 0) {
        c->rc = EJ_ENOMEM;
        return false;
    }
    return true;
}

/* The three strategies Java ElasticJob 2.1.5 also has are stored under their
 * Java class names, so Java instances sharing the job can load them. */
static bool store_java_strategy_name(struct yctx *c, char **field)
{
    static const struct {
        const char *type;
        const char *stored;
    } java_names[] = {
        {"AVERAGE", ""},
        {"AVG_ALLOCATION", ""},
        {"ODEVITY", "com.dangdang.ddframe.job.lite.api.strategy.impl."
                    "OdevitySortByNameJobShardingStrategy"},
        {"ROTATE", "com.dangdang.ddframe.job.lite.api.strategy.impl."
                   "RotateServerByNameJobShardingStrategy"},
        {"ROUND_ROBIN", "com.dangdang.ddframe.job.lite.api.strategy.impl."
                        "RotateServerByNameJobShardingStrategy"},
    };
    if (*field == NULL)
        return true;
    for (size_t i = 0; i < sizeof(java_names) / sizeof(java_names[0]); i++) {
        if (strcasecmp(*field, java_names[i].type) == 0) {
            if (ej_job_config_set_str(field, java_names[i].stored) != 0) {
                c->rc = EJ_ENOMEM;
                return false;
            }
            break;
        }
    }
    return true;
}

static bool parse_ll(const char *s, long long min, long long max, long long *out)
{
    const char *p = s;
    if (*p == '+' || *p == '-')
        p++;
    if (!isdigit((unsigned char)*p))
        return false;
    long long v = 0;
    bool neg = s[0] == '-';
    for (; *p; p++) {
        if (!isdigit((unsigned char)*p))
            return false;
        if (v > (INT64_MAX - 9) / 10)
            return false;
        v = v * 10 + (*p - '0');
    }
    if (neg)
        v = -v;
    if (v < min || v > max)
        return false;
    *out = v;
    return true;
}

static bool get_ll(struct yctx *c, yaml_node_t *v, const char *path, long long min, long long max,
                   long long *dst)
{
    char shown[128];
    if (!want_scalar(c, v, path, "an integer"))
        return false;
    if (!parse_ll(sval(v), min, max, dst)) {
        shown_scalar(v, shown, sizeof(shown));
        yerr(c, v->start_mark, path, "expected an integer, got %s", shown);
        return false;
    }
    return true;
}

static bool get_int(struct yctx *c, yaml_node_t *v, const char *path, int *dst)
{
    long long x;
    if (!get_ll(c, v, path, INT32_MIN, INT32_MAX, &x))
        return false;
    *dst = (int)x;
    return true;
}

static bool get_bool(struct yctx *c, yaml_node_t *v, const char *path, bool *dst)
{
    char shown[128];
    if (!want_scalar(c, v, path, "true or false"))
        return false;
    const char *s = sval(v);
    if (strcmp(s, "true") == 0 || strcmp(s, "True") == 0 || strcmp(s, "TRUE") == 0) {
        *dst = true;
        return true;
    }
    if (strcmp(s, "false") == 0 || strcmp(s, "False") == 0 || strcmp(s, "FALSE") == 0) {
        *dst = false;
        return true;
    }
    shown_scalar(v, shown, sizeof(shown));
    yerr(c, v->start_mark, path, "expected true or false, got %s", shown);
    return false;
}

/* Iterate a mapping's pairs, checking keys are scalars. Returns the key
 * text or NULL to skip the pair (reported). */
static const char *pair_key(struct yctx *c, yaml_node_pair_t *pair, const char *path,
                            yaml_node_t **k_out, yaml_node_t **v_out)
{
    yaml_node_t *k = node(c, pair->key);
    yaml_node_t *v = node(c, pair->value);
    if (k == NULL || v == NULL)
        return NULL;
    if (!visit(c, k->start_mark))
        return NULL;
    if (k->type != YAML_SCALAR_NODE || strlen(sval(k)) != k->data.scalar.length) {
        yerr(c, k->start_mark, path, "keys must be plain strings, got %s", kind_name(k));
        return NULL;
    }
    *k_out = k;
    *v_out = v;
    return sval(k);
}

/* Index of key in names[] (n entries), or -1. */
static int key_index(const char *key, const char *const *names, int n)
{
    for (int i = 0; i < n; i++) {
        if (strcmp(key, names[i]) == 0)
            return i;
    }
    return -1;
}

/* Report a repeated key; true when key index i was seen already. */
static bool seen_before(struct yctx *c, bool *seen, int i, yaml_node_t *k, const char *path)
{
    char shown[128];
    if (seen[i]) {
        shown_scalar(k, shown, sizeof(shown));
        yerr(c, k->start_mark, path, "duplicate key %s", shown);
        return true;
    }
    seen[i] = true;
    return false;
}

static void unknown_key(struct yctx *c, yaml_node_t *k, const char *path)
{
    char shown[128];
    shown_scalar(k, shown, sizeof(shown));
    yerr(c, k->start_mark, path, "unknown key %s", shown);
}

/* The keys of a section's mapping (regCenter, tracing, metrics), in file
 * order: section_next gives the index of the next known key in the
 * section's table (whose entries start with their `const char *` name,
 * stride bytes apart), reporting and skipping unknown and repeated keys;
 * -1 at the end. */
struct section_keys {
    yaml_node_pair_t *pr, *end;
    const char *path;
    const void *table;
    size_t stride;
    int n;
    bool *seen;
};

static struct section_keys section_keys(yaml_node_t *map, const char *path, const void *table,
                                        size_t stride, int n, bool *seen)
{
    return (struct section_keys){
        map->data.mapping.pairs.start, map->data.mapping.pairs.top, path, table, stride, n, seen};
}

static int section_next(struct yctx *c, struct section_keys *it, yaml_node_t **k, yaml_node_t **v)
{
    while (it->pr < it->end) {
        const char *key = pair_key(c, it->pr++, it->path, k, v);
        if (key == NULL)
            continue;
        int i = -1;
        for (int r = 0; r < it->n && i < 0; r++)
            if (strcmp(key, *(const char *const *)(const void *)((const char *)it->table +
                                                                 (size_t)r * it->stride)) == 0)
                i = r;
        if (i < 0) {
            unknown_key(c, *k, it->path);
            continue;
        }
        if (!seen_before(c, it->seen, i, *k, it->path))
            return i;
    }
    return -1;
}

/* ------------------------------------------------------------------------ */
/* regCenter                                                                 */
/* ------------------------------------------------------------------------ */

enum {
    RC_SERVER_LISTS,
    RC_NAMESPACE,
    RC_SESSION,
    RC_CONNECTION,
    RC_BASE_SLEEP,
    RC_MAX_SLEEP,
    RC_MAX_RETRIES,
    RC_DIGEST,
    RC_DIGEST_FILE,
    RC_TAKEOVER_MARGIN,
    RC_COUNT
};
/* regCenter's keys: strings or integers of struct ej_reg_center_config. */
static const struct rc_key {
    const char *key;
    bool integer;
    size_t off;
} rc_keys[RC_COUNT] = {
#define RC_KEY(key, integer, member)                                                               \
    {                                                                                              \
        key, integer, offsetof(struct ej_reg_center_config, member)                                \
    }
    RC_KEY("serverLists", false, server_lists),
    RC_KEY("namespace", false, name_space),
    RC_KEY("sessionTimeoutMilliseconds", true, session_timeout_ms),
    RC_KEY("connectionTimeoutMilliseconds", true, connection_timeout_ms),
    RC_KEY("baseSleepTimeMilliseconds", true, base_sleep_time_ms),
    RC_KEY("maxSleepTimeMilliseconds", true, max_sleep_time_ms),
    RC_KEY("maxRetries", true, max_retries),
    RC_KEY("digest", false, digest),
    RC_KEY("digestFile", false, digest_file),
    RC_KEY("takeoverMarginMilliseconds", true, takeover_margin_ms),
#undef RC_KEY
};

static void check_server_lists(struct yctx *c, yaml_mark_t m, const char *list)
{
    char shown[128];
    const char *p = list;
    if (list[0] == '\0') {
        yerr(c, m, "regCenter.serverLists", "must not be empty (use \"embedded\" or host:port)");
        return;
    }
    for (;;) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        /* ZooKeeper takes an optional chroot after the last server. */
        const char *slash = memchr(p, '/', n);
        size_t hn = slash ? (size_t)(slash - p) : n;
        ej__config_quote_short(p, n, shown, sizeof(shown));
        bool bad_char = false;
        for (size_t i = 0; i < hn; i++)
            bad_char = bad_char || isspace((unsigned char)p[i]) || iscntrl((unsigned char)p[i]);
        if (hn == 0) {
            yerr(c, m, "regCenter.serverLists", "empty server in the list");
        } else if (bad_char) {
            yerr(c, m, "regCenter.serverLists", "server %s must not contain spaces", shown);
        } else {
            /* host, host:port, [v6]:port */
            const char *colon = NULL;
            if (p[0] == '[') {
                const char *rb = memchr(p, ']', hn);
                if (rb == NULL)
                    yerr(c, m, "regCenter.serverLists", "server %s: missing ']'", shown);
                else if ((size_t)(rb - p) + 1 < hn)
                    colon = rb[1] == ':' ? rb + 1 : rb;
            } else {
                colon = memchr(p, ':', hn);
            }
            if (colon != NULL) {
                long long port;
                char digits[16] = "";
                size_t dn = hn - (size_t)(colon + 1 - p);
                if (*colon == ':' && dn > 0 && dn < sizeof(digits)) {
                    memcpy(digits, colon + 1, dn);
                    digits[dn] = '\0';
                }
                if (*colon != ':' || !parse_ll(digits, 1, 65535, &port) || digits[0] == '+' ||
                    digits[0] == '-')
                    yerr(c, m, "regCenter.serverLists", "server %s: port must be 1..65535", shown);
            }
        }
        if (end == NULL)
            break;
        p = end + 1;
    }
}

static void check_namespace(struct yctx *c, yaml_mark_t m, const char *ns)
{
    char shown[128];
    size_t n = strlen(ns);
    ej__config_quote_short(ns, n, shown, sizeof(shown));
    if (n == 0) {
        yerr(c, m, "regCenter.namespace", "is required");
        return;
    }
    if (n > EJ_CONFIG_MAX_SHORT) {
        yerr(c, m, "regCenter.namespace", "is %zu bytes, longer than the limit of %d", n,
             EJ_CONFIG_MAX_SHORT);
        return;
    }
    if (ns[0] == '/' || ns[n - 1] == '/') {
        yerr(c, m, "regCenter.namespace", "must not start or end with \"/\", got %s", shown);
        return;
    }
    for (const char *p = ns; *p; p++) {
        if (isspace((unsigned char)*p) || iscntrl((unsigned char)*p)) {
            yerr(c, m, "regCenter.namespace",
                 "must not contain spaces or control characters, got %s", shown);
            return;
        }
    }
    const char *comp = ns;
    for (;;) {
        const char *end = strchr(comp, '/');
        size_t len = end ? (size_t)(end - comp) : strlen(comp);
        if (len == 0 || (len == 1 && comp[0] == '.') ||
            (len == 2 && comp[0] == '.' && comp[1] == '.')) {
            yerr(c, m, "regCenter.namespace", "must not have empty, \".\" or \"..\" parts, got %s",
                 shown);
            return;
        }
        if (end == NULL)
            break;
        comp = end + 1;
    }
}

static void add_warning(struct yctx *c, const char *msg)
{
    if (c->warnings != NULL && ej__config_errors_add(c->warnings, "%s", msg) != 0)
        c->rc = EJ_ENOMEM;
}

/* regCenter.digest in the file itself: the file is then a secret. */
static void check_inline_digest(struct yctx *c, yaml_mark_t m, const char *digest)
{
    char warn[600], err[600];
    /* Never echo the value: it is a password. */
    if (strchr(digest, ':') == NULL || digest[0] == ':') {
        yerr(c, m, "regCenter.digest", "must be \"user:password\"");
        return;
    }
    if (c->mode == 0)
        return;
    if (ej_config_check_secret_mode(c->name, c->mode, warn, sizeof(warn), err, sizeof(err)) != 0)
        yerr(c, m, "regCenter.digest", "%s", err);
    else if (warn[0] != '\0')
        add_warning(c, warn);
}

/* regCenter.digestFile: read the digest now, so a bad file stops the
 * daemon's start (or a reload) with its position. */
static void load_digest_file(struct yctx *c, yaml_mark_t m, struct ej_reg_center_config *rc)
{
    char warn[600], err[600];
    char *path = rc->digest_file[0] == '/' || c->dir == NULL
                     ? strdup(rc->digest_file)
                     : ej__asprintf("%s/%s", c->dir, rc->digest_file);
    if (path == NULL) {
        c->rc = EJ_ENOMEM;
        return;
    }
    free(rc->digest);
    rc->digest = NULL;
    int e = ej_config_read_secret_file(path, &rc->digest, warn, sizeof(warn), err, sizeof(err));
    if (e == EJ_ENOMEM)
        c->rc = e;
    else if (e != 0)
        yerr(c, m, "regCenter.digestFile", "%s", err);
    else if (warn[0] != '\0')
        add_warning(c, warn);
    free(path);
}

static void load_reg_center(struct yctx *c, yaml_node_t *k0, yaml_node_t *map,
                            struct ej_reg_center_config *rc)
{
    const char *path = "regCenter";
    yaml_mark_t marks[RC_COUNT];
    bool seen[RC_COUNT] = {false};
    bool bad[RC_COUNT] = {false};
    bool set[RC_COUNT] = {false};
    char full[64];

    if (is_null(map)) {
        yerr(c, k0->start_mark, "regCenter.namespace", "is required");
        return;
    }
    if (map->type != YAML_MAPPING_NODE) {
        yerr(c, map->start_mark, path, "expected a mapping, got %s", kind_name(map));
        return;
    }
    struct section_keys it = section_keys(map, path, rc_keys, sizeof rc_keys[0], RC_COUNT, seen);
    yaml_node_t *k, *v;
    for (int i; (i = section_next(c, &it, &k, &v)) >= 0;) {
        marks[i] = v->start_mark;
        if (is_null(v))
            continue;
        snprintf(full, sizeof(full), "regCenter.%s", rc_keys[i].key);
        char *at = (char *)rc + rc_keys[i].off;
        bool ok = rc_keys[i].integer ? get_int(c, v, full, (int *)(void *)at)
                                     : get_str(c, v, full, (char **)(void *)at);
        bad[i] = !ok;
        set[i] = ok;
    }

    if (set[RC_SERVER_LISTS]) {
        if (strcmp(rc->server_lists, "embedded") == 0) {
            rc->embedded = true;
            rc->server_lists[0] = '\0';
        } else {
            rc->embedded = false;
            check_server_lists(c, marks[RC_SERVER_LISTS], rc->server_lists);
        }
    }
    if (!bad[RC_NAMESPACE])
        check_namespace(c, set[RC_NAMESPACE] ? marks[RC_NAMESPACE] : k0->start_mark,
                        ej__config_str(rc->name_space));
    /* Below ZooKeeper's own floor (2 ticks) the client only spins. */
    if (set[RC_SESSION] && (rc->session_timeout_ms < EJ_CONFIG_MIN_SESSION_TIMEOUT_MS ||
                            rc->session_timeout_ms > EJ_CONFIG_MAX_SESSION_TIMEOUT_MS))
        yerr(c, marks[RC_SESSION], "regCenter.sessionTimeoutMilliseconds", "must be %d..%d, got %d",
             EJ_CONFIG_MIN_SESSION_TIMEOUT_MS, EJ_CONFIG_MAX_SESSION_TIMEOUT_MS,
             rc->session_timeout_ms);
    if (set[RC_CONNECTION] && rc->connection_timeout_ms < 1)
        yerr(c, marks[RC_CONNECTION], "regCenter.connectionTimeoutMilliseconds",
             "must be >= 1, got %d", rc->connection_timeout_ms);
    if (set[RC_BASE_SLEEP] && rc->base_sleep_time_ms < 1)
        yerr(c, marks[RC_BASE_SLEEP], "regCenter.baseSleepTimeMilliseconds", "must be >= 1, got %d",
             rc->base_sleep_time_ms);
    if (set[RC_MAX_SLEEP] && rc->max_sleep_time_ms < rc->base_sleep_time_ms &&
        rc->base_sleep_time_ms >= 1)
        yerr(c, marks[RC_MAX_SLEEP], "regCenter.maxSleepTimeMilliseconds",
             "must be >= baseSleepTimeMilliseconds %d, got %d", rc->base_sleep_time_ms,
             rc->max_sleep_time_ms);
    /* Curator caps exponential back-off retries at 29. */
    if (set[RC_MAX_RETRIES] && (rc->max_retries < 0 || rc->max_retries > 29))
        yerr(c, marks[RC_MAX_RETRIES], "regCenter.maxRetries", "must be 0..29, got %d",
             rc->max_retries);
    if (set[RC_TAKEOVER_MARGIN] &&
        (rc->takeover_margin_ms < 0 || rc->takeover_margin_ms > EJ_REG_TAKEOVER_MARGIN_MAX_MS))
        yerr(c, marks[RC_TAKEOVER_MARGIN], "regCenter.takeoverMarginMilliseconds",
             "must be 0 (none)..%d, got %d", EJ_REG_TAKEOVER_MARGIN_MAX_MS,
             rc->takeover_margin_ms);
    if (set[RC_DIGEST] && set[RC_DIGEST_FILE])
        yerr(c, marks[RC_DIGEST_FILE], "regCenter.digestFile",
             "give digest or digestFile, not both");
    else if (set[RC_DIGEST_FILE])
        load_digest_file(c, marks[RC_DIGEST_FILE], rc);
    else if (set[RC_DIGEST])
        check_inline_digest(c, marks[RC_DIGEST], rc->digest);
}

/* ------------------------------------------------------------------------ */
/* tracing                                                                   */
/* ------------------------------------------------------------------------ */

/* The numeric keys of tracing, checked against their ranges. */
static void tracing_number(struct yctx *c, yaml_node_t *v, int i, struct ej_tracing_config *tr)
{
    if (i == 3) {
        if (get_int(c, v, "tracing.retentionDays", &tr->retention_days) && tr->retention_days < 0)
            yerr(c, v->start_mark, "tracing.retentionDays",
                 "must be >= 0 (0 keeps forever), got %d", tr->retention_days);
    } else if (get_int(c, v, "tracing.outputMaxBytes", &tr->output_max_bytes) &&
               (tr->output_max_bytes < 1 || tr->output_max_bytes > 64 * 1024 * 1024)) {
        yerr(c, v->start_mark, "tracing.outputMaxBytes", "must be 1..67108864, got %d",
             tr->output_max_bytes);
    }
}

static void load_tracing(struct yctx *c, yaml_node_t *k0, yaml_node_t *map,
                         struct ej_tracing_config *tr)
{
    static const char *const keys[] = {"type", "url", "passwordFile", "retentionDays",
                                       "outputMaxBytes"};
    enum { NKEYS = sizeof keys / sizeof keys[0] };
    const char *path = "tracing";
    bool seen[NKEYS] = {false};
    yaml_node_t *type_node = NULL;
    yaml_mark_t url_mark = k0->start_mark;
    bool type_bad = false;
    char shown[128];

    if (is_null(map))
        return; /* "tracing:" alone: the default */
    if (map->type != YAML_MAPPING_NODE) {
        yerr(c, map->start_mark, path, "expected a mapping, got %s", kind_name(map));
        return;
    }
    struct section_keys it = section_keys(map, path, keys, sizeof keys[0], NKEYS, seen);
    yaml_node_t *k, *v;
    for (int i; (i = section_next(c, &it, &k, &v)) >= 0;) {
        if (i == 0) {
            if (!is_null(v)) {
                if (want_scalar(c, v, "tracing.type", "a string"))
                    type_node = v;
                else
                    type_bad = true;
            }
        } else if (i == 1) {
            url_mark = v->start_mark;
            get_str(c, v, "tracing.url", &tr->url);
        } else if (i == 2) {
            get_str(c, v, "tracing.passwordFile", &tr->password_file);
        } else if (!is_null(v)) {
            tracing_number(c, v, i, tr);
        }
    }
    if (type_node == NULL) {
        if (!type_bad)
            yerr(c, k0->start_mark, "tracing.type", "is required (SQLITE, POSTGRESQL or NONE)");
        return;
    }
    if (strcasecmp(sval(type_node), "SQLITE") == 0) {
        tr->type = EJ_TRACING_SQLITE;
        if (tr->url == NULL || tr->url[0] == '\0') {
            if (ej_job_config_set_str(&tr->url, "ejob-trace.db") != 0)
                c->rc = EJ_ENOMEM;
        }
    } else if (strcasecmp(sval(type_node), "POSTGRESQL") == 0) {
        tr->type = EJ_TRACING_POSTGRESQL;
        if (tr->url == NULL || tr->url[0] == '\0')
            yerr(c, url_mark, "tracing.url", "is required for POSTGRESQL");
    } else if (strcasecmp(sval(type_node), "NONE") == 0) {
        tr->type = EJ_TRACING_NONE;
        tr->off = true;
    } else {
        shown_scalar(type_node, shown, sizeof(shown));
        yerr(c, type_node->start_mark, "tracing.type", "must be SQLITE, POSTGRESQL or NONE, got %s",
             shown);
    }
}

/* ------------------------------------------------------------------------ */
/* metrics                                                                   */
/* ------------------------------------------------------------------------ */

/* metrics: {listen: ADDR:PORT}. The address goes through the parser of
 * `ejob run --metrics-listen`, so both refuse it with the same words. */
static void load_metrics(struct yctx *c, yaml_node_t *map, struct ej_metrics_config *mc)
{
    static const char *const keys[] = {"listen"};
    enum { NKEYS = sizeof keys / sizeof keys[0] };
    const char *path = "metrics";
    bool seen[NKEYS] = {false};

    if (is_null(map))
        return; /* "metrics:" alone: no endpoint */
    if (map->type != YAML_MAPPING_NODE) {
        yerr(c, map->start_mark, path, "expected a mapping, got %s", kind_name(map));
        return;
    }
    struct section_keys it = section_keys(map, path, keys, sizeof keys[0], NKEYS, seen);
    yaml_node_t *k, *v;
    while (section_next(c, &it, &k, &v) >= 0) {
        if (!get_str(c, v, "metrics.listen", &mc->listen) || mc->listen == NULL)
            continue;
        struct sockaddr_storage addr;
        size_t addrlen = sizeof addr;
        char why[256];
        if (ej_metrics_parse_listen(mc->listen, &addr, &addrlen, why, sizeof why) != 0)
            yerr(c, v->start_mark, "metrics.listen", "%s", why);
    }
}

/* ------------------------------------------------------------------------ */
/* log                                                                       */
/* ------------------------------------------------------------------------ */

/* One value of log: the words of --log-level and --log-format. "off" is
 * not offered: a daemon that logs nothing cannot say why it stopped. */
static int log_word(struct yctx *c, yaml_node_t *v, const char *path, bool level)
{
    if (!want_scalar(c, v, path, "a string"))
        return -1;
    const char *s = sval(v);
    int r = -1;
    if (level)
        r = ej_log_level_parse(s) == EJ_LOG_OFF ? -1 : ej_log_level_parse(s);
    else if (strcmp(s, "text") == 0 || strcmp(s, "json") == 0)
        r = strcmp(s, "json") == 0 ? EJ_LOG_JSON : EJ_LOG_TEXT;
    if (r < 0) {
        char shown[128];
        shown_scalar(v, shown, sizeof(shown));
        yerr(c, v->start_mark, path, "must be %s, got %s",
             level ? "debug, info, warn or error" : "text or json", shown);
    }
    return r;
}

/* log: {level: info, format: text}; either may be left out. */
static void load_log(struct yctx *c, yaml_node_t *map, struct ej_log_config *lc)
{
    static const char *const keys[] = {"level", "format"};
    enum { NKEYS = sizeof keys / sizeof keys[0] };
    bool seen[NKEYS] = {false};

    if (is_null(map))
        return;
    if (map->type != YAML_MAPPING_NODE) {
        yerr(c, map->start_mark, "log", "expected a mapping, got %s", kind_name(map));
        return;
    }
    struct section_keys it = section_keys(map, "log", keys, sizeof keys[0], NKEYS, seen);
    yaml_node_t *k, *v;
    int i;
    while ((i = section_next(c, &it, &k, &v)) >= 0) {
        if (is_null(v))
            continue;
        if (i == 0)
            lc->level = log_word(c, v, "log.level", true);
        else
            lc->format = log_word(c, v, "log.format", false);
    }
}

/* ------------------------------------------------------------------------ */
/* jobs                                                                      */
/* ------------------------------------------------------------------------ */

/* A job's keys are the yaml column of the field table (fields.h): a plain
 * key is set in the job's mapping, "props.KEY" as KEY under its props
 * mapping. The props key itself is the loader's own: JK_PROPS, after the
 * fields, so one seen[] array covers a job's mapping. */
#define PROPS_PREFIX "props."
#define PROPS_PREFIX_LEN (sizeof(PROPS_PREFIX) - 1)
/* `retry:` and `tracing:` are mappings of their own too
 * ("retry.maxAttempts", "tracing.retentionDays"). */
#define RETRY_PREFIX "retry."
#define TRACING_PREFIX "tracing."
enum { JK_PROPS = EJ_CFG_F_COUNT_, JK_RETRY, JK_TRACING, JK_ALERTS, JK_COUNT };

/* The sub-mapping a yaml key is under ("props.", "retry." or "tracing."),
 * or NULL. */
static const char *yaml_prefix(const char *y)
{
    if (strncmp(y, PROPS_PREFIX, PROPS_PREFIX_LEN) == 0)
        return PROPS_PREFIX;
    if (strncmp(y, RETRY_PREFIX, sizeof(RETRY_PREFIX) - 1) == 0)
        return RETRY_PREFIX;
    if (strncmp(y, TRACING_PREFIX, sizeof(TRACING_PREFIX) - 1) == 0)
        return TRACING_PREFIX;
    return NULL;
}

/* The field whose YAML key is key, in a job's mapping (prefix NULL) or
 * under the sub-mapping prefix names; -1 when no row has it. */
static int yaml_field_under(const char *key, const char *prefix)
{
    for (int i = 0; i < EJ_CFG_F_COUNT_; i++) {
        const char *y = ej__cfg_fields[i].yaml;
        if (y == NULL)
            continue;
        const char *under = yaml_prefix(y);
        bool same = under == NULL ? prefix == NULL : prefix != NULL && strcmp(under, prefix) == 0;
        if (same && strcmp(key, under ? y + strlen(under) : y) == 0)
            return i;
    }
    return -1;
}

static int yaml_field(const char *key, bool in_props)
{
    return yaml_field_under(key, in_props ? PROPS_PREFIX : NULL);
}

/* A key of a job's mapping: its field, JK_PROPS, or -1 when unknown. */
static int job_key_index(const char *key)
{
    if (strcmp(key, "alerts") == 0)
        return JK_ALERTS;
    if (strcmp(key, "retry") == 0)
        return JK_RETRY;
    if (strcmp(key, "tracing") == 0)
        return JK_TRACING;
    return strcmp(key, "props") == 0 ? JK_PROPS : yaml_field(key, false);
}

/* Where each validated field came from in the file. */
struct job_marks {
    yaml_mark_t job_key;
    bool have[EJ_CFG_F_COUNT_];
    bool bad[EJ_CFG_F_COUNT_];
    yaml_mark_t at[EJ_CFG_F_COUNT_];
};

/* The YAML key path of a validated field ("props.http.uri"), else its
 * JSON name. */
static const char *field_yaml_name(enum ej__cfg_field f)
{
    return ej__cfg_fields[f].yaml != NULL ? ej__cfg_fields[f].yaml : ej__config_field_json_name(f);
}

static void mark_field(struct job_marks *jm, enum ej__cfg_field f, yaml_node_t *v, bool ok)
{
    jm->have[f] = true;
    jm->at[f] = v->start_mark;
    jm->bad[f] = !ok;
}

/* elasticJobType: the daemon runs SCRIPT and HTTP jobs. */
static bool get_job_type(struct yctx *c, yaml_node_t *v, const char *full, ej_job_type *dst)
{
    char shown[128];
    if (!want_scalar(c, v, full, "SCRIPT or HTTP"))
        return false;
    if (strcasecmp(sval(v), "SCRIPT") == 0 || strcasecmp(sval(v), "HTTP") == 0) {
        *dst = strcasecmp(sval(v), "SCRIPT") == 0 ? EJ_JOB_TYPE_SCRIPT : EJ_JOB_TYPE_HTTP;
        return true;
    }
    shown_scalar(v, shown, sizeof(shown));
    yerr(c, v->start_mark, full, "must be SCRIPT or HTTP in the daemon, got %s", shown);
    return false;
}

/* Read v into field f of cfg by the field's type, then the daemon file's
 * own readings of two fields; note where it came from. Returns whether v
 * was read. */
static bool apply_value(struct yctx *c, enum ej__cfg_field f, yaml_node_t *v, const char *full,
                        struct ej_job_config *cfg, struct job_marks *jm)
{
    const struct ej__cfg_field_desc *d = &ej__cfg_fields[f];
    void *at = (char *)cfg + d->off;
    long long ll = 0;
    bool ok = false;
    switch (d->type) {
    case EJ_CFG_T_STR:
        ok = get_str(c, v, full, at);
        break;
    case EJ_CFG_T_INT:
        ok = get_int(c, v, full, at);
        break;
    case EJ_CFG_T_INT64:
        ok = get_ll(c, v, full, INT64_MIN, INT64_MAX, &ll);
        if (ok)
            *(int64_t *)at = ll;
        break;
    case EJ_CFG_T_BOOL:
        ok = get_bool(c, v, full, at);
        break;
    case EJ_CFG_T_TYPE:
        ok = get_job_type(c, v, full, at);
        break;
    case EJ_CFG_T_CLASS:
    case EJ_CFG_T_OBJ:
        EJ_ASSERT(!"a CLASS or OBJ field has no YAML key");
        break;
    }
    /* A strategy type is stored under its Java name when it has one; an
     * HTTP method is upper-cased. */
    if (ok && f == EJ_CFG_F_JOB_SHARDING_STRATEGY_CLASS)
        ok = store_java_strategy_name(c, at);
    if (ok && f == EJ_CFG_F_HTTP_METHOD) {
        for (char *p = *(char **)at; *p; p++)
            *p = (char)toupper((unsigned char)*p);
    }
    mark_field(jm, f, v, ok);
    return ok;
}

/* The retry: or tracing: mapping of a job (prefix RETRY_PREFIX or
 * TRACING_PREFIX: its keys are fields "retry.KEY", "tracing.KEY"); seen as
 * for props (shared seen_props: the keys differ). */
static void load_sub(struct yctx *c, yaml_node_t *map, const char *jpath, const char *prefix,
                     struct ej_job_config *cfg, struct job_marks *jm, bool *seen_props,
                     const bool *skip)
{
    char path[512], full[640];
    bool seen[EJ_CFG_F_COUNT_] = {false};
    snprintf(path, sizeof(path), "%s.%.*s", jpath, (int)strlen(prefix) - 1, prefix);
    if (is_null(map))
        return;
    if (map->type != YAML_MAPPING_NODE) {
        yerr(c, map->start_mark, path, "expected a mapping, got %s", kind_name(map));
        return;
    }
    for (yaml_node_pair_t *pr = map->data.mapping.pairs.start; pr < map->data.mapping.pairs.top;
         pr++) {
        yaml_node_t *k, *v;
        const char *key = pair_key(c, pr, path, &k, &v);
        if (key == NULL)
            continue;
        int i = yaml_field_under(key, prefix);
        if (i < 0) {
            unknown_key(c, k, path);
            continue;
        }
        if (seen_before(c, seen, i, k, path) || (skip != NULL && skip[i]) || is_null(v))
            continue;
        seen_props[i] = true;
        snprintf(full, sizeof(full), "%s.%s", path, key);
        apply_value(c, (enum ej__cfg_field)i, v, full, cfg, jm);
    }
}

static void load_props(struct yctx *c, yaml_node_t *map, const char *jpath,
                       struct ej_job_config *cfg, struct job_marks *jm, bool *seen_props,
                       const bool *skip)
{
    char path[512], full[640];
    bool seen[EJ_CFG_F_COUNT_] = {false};
    snprintf(path, sizeof(path), "%s.props", jpath);
    if (is_null(map))
        return;
    if (map->type != YAML_MAPPING_NODE) {
        yerr(c, map->start_mark, path, "expected a mapping, got %s", kind_name(map));
        /* The required props are somewhere in there: do not also say they
         * are missing. */
        jm->bad[EJ_CFG_F_SCRIPT_COMMAND_LINE] = true;
        jm->bad[EJ_CFG_F_HTTP_URI] = true;
        return;
    }
    for (yaml_node_pair_t *pr = map->data.mapping.pairs.start; pr < map->data.mapping.pairs.top;
         pr++) {
        yaml_node_t *k, *v;
        const char *key = pair_key(c, pr, path, &k, &v);
        if (key == NULL)
            continue;
        int i = yaml_field(key, true);
        if (i < 0) {
            unknown_key(c, k, path);
            continue;
        }
        if (seen_before(c, seen, i, k, path) || (skip != NULL && skip[i]))
            continue;
        if (is_null(v))
            continue;
        seen_props[i] = true;
        snprintf(full, sizeof(full), "%s.%s", path, key);
        apply_value(c, (enum ej__cfg_field)i, v, full, cfg, jm);
    }
}

struct job_verr {
    struct yctx *c;
    const char *jpath;
    struct job_marks *jm;
    bool count_bad; /* shardingTotalCount missing or unreadable */
};

/* Validation problem of one job, placed at the key it concerns. */
static int job_verr(void *ctx, enum ej__cfg_field f, const char *msg)
{
    struct job_verr *jv = ctx;
    char path[600];
    /* A field that already failed to parse has been reported. */
    if (jv->jm->bad[f])
        return 0;
    /* Range checks against a count that was not given would mislead. */
    if (jv->count_bad && f == EJ_CFG_F_SHARDING_ITEM_PARAMETERS && strncmp(msg, "item ", 5) == 0)
        return 0;
    yaml_mark_t m = jv->jm->have[f] ? jv->jm->at[f] : jv->jm->job_key;
    if (f == EJ_CFG_F_JOB_NAME) {
        yerr(jv->c, m, jv->jpath, "job name %s", msg);
        return 0;
    }
    snprintf(path, sizeof(path), "%s.%s", jv->jpath, field_yaml_name(f));
    yerr(jv->c, m, path, "%s", msg);
    return 0;
}

/* One job being loaded: its config and where each field came from. */
struct job_load {
    struct yctx *c;
    struct ej_job_config *cfg;
    const char *jpath; /* "jobs.NAME" (or "defaults") */
    struct job_marks jm;
    bool seen[JK_COUNT];              /* by field (and JK_PROPS) */
    bool seen_props[EJ_CFG_F_COUNT_]; /* by field */
    bool have_type;
    yaml_node_t *alerts; /* its alerts: mapping (own, else the defaults'), read with the section */
};

/* One key of a job (its field f, a non-null value v) into its config. */
static void apply_job_key(struct job_load *jl, enum ej__cfg_field f, yaml_node_t *v)
{
    char full[400];
    snprintf(full, sizeof(full), "%s.%s", jl->jpath, ej__cfg_fields[f].yaml);
    if (apply_value(jl->c, f, v, full, jl->cfg, &jl->jm) && ej__cfg_fields[f].type == EJ_CFG_T_TYPE)
        jl->have_type = true;
}

/* The pairs of one mapping into the job. For `defaults:` (as_defaults),
 * keys the job set itself are skipped and problems are not reported again
 * (check_defaults reported them once, at their place). */
static void apply_job_map(struct job_load *jl, yaml_node_t *map, bool as_defaults)
{
    struct yctx *c = jl->c;
    bool seen[JK_COUNT] = {false};
    bool muted = c->muted;
    c->muted = muted || as_defaults;
    for (yaml_node_pair_t *pr = map->data.mapping.pairs.start; pr < map->data.mapping.pairs.top;
         pr++) {
        yaml_node_t *k, *v;
        const char *key = pair_key(c, pr, jl->jpath, &k, &v);
        int i = key == NULL ? -1 : job_key_index(key);
        if (key != NULL && i < 0)
            unknown_key(c, k, jl->jpath);
        if (i < 0 || seen_before(c, seen, i, k, jl->jpath))
            continue;
        if (i == JK_ALERTS) {
            if (!as_defaults || jl->alerts == NULL)
                jl->alerts = v;
            continue;
        }
        if (i == JK_PROPS) {
            load_props(c, v, jl->jpath, jl->cfg, &jl->jm, jl->seen_props,
                       as_defaults ? jl->seen_props : NULL);
            continue;
        }
        if (i == JK_RETRY || i == JK_TRACING) {
            load_sub(c, v, jl->jpath, i == JK_RETRY ? RETRY_PREFIX : TRACING_PREFIX, jl->cfg,
                     &jl->jm, jl->seen_props, as_defaults ? jl->seen_props : NULL);
            continue;
        }
        /* An empty value counts as absent; the job's own value wins. */
        if (is_null(v) || (as_defaults && jl->seen[i]))
            continue;
        jl->seen[i] = true;
        apply_job_key(jl, (enum ej__cfg_field)i, v);
    }
    c->muted = muted;
}

/* After the keys: the type, its props, the required count, validation. */
static void finish_job(struct job_load *jl)
{
    struct yctx *c = jl->c;
    struct ej_job_config *cfg = jl->cfg;
    const char *jpath = jl->jpath;
    bool *seen_props = jl->seen_props;
    bool have_type = jl->have_type;
    char full[400];
    /* Without elasticJobType an http.uri alone makes an HTTP job. */
    if (!have_type && !jl->jm.bad[EJ_CFG_F_JOB_TYPE])
        cfg->job_type = seen_props[EJ_CFG_F_HTTP_URI] && !seen_props[EJ_CFG_F_SCRIPT_COMMAND_LINE]
                            ? EJ_JOB_TYPE_HTTP
                            : EJ_JOB_TYPE_SCRIPT;
    if (cfg->job_type == EJ_JOB_TYPE_SCRIPT) {
        if (ej_job_config_set_str(&cfg->job_class, EJ_CONFIG_SCRIPT_JOB_CLASS) != 0)
            c->rc = EJ_ENOMEM;
    }
    /* A type's props that the other type would use are a mistake (a
     * props field's scope is the type it belongs to). */
    for (int i = 0; i < EJ_CFG_F_COUNT_; i++) {
        const struct ej__cfg_field_desc *f = &ej__cfg_fields[i];
        if (seen_props[i] && !jl->jm.bad[EJ_CFG_F_JOB_TYPE] &&
            !ej__config_field_applies(f, cfg->job_type)) {
            snprintf(full, sizeof(full), "%s.props", jpath);
            yerr(c, jl->jm.job_key, full, "%s does not apply to %s jobs",
                 f->yaml + PROPS_PREFIX_LEN, ej_job_type_name(cfg->job_type));
        }
    }
    bool count_bad = jl->jm.bad[EJ_CFG_F_SHARDING_TOTAL_COUNT];
    if (!jl->jm.have[EJ_CFG_F_SHARDING_TOTAL_COUNT]) {
        snprintf(full, sizeof(full), "%s.shardingTotalCount", jpath);
        yerr(c, jl->jm.job_key, full, "is required");
        count_bad = true;
        jl->jm.bad[EJ_CFG_F_SHARDING_TOTAL_COUNT] = true;
    }
    if (jl->jm.bad[EJ_CFG_F_JOB_TYPE]) {
        /* The type is unknown: its required props cannot be judged. */
        jl->jm.bad[EJ_CFG_F_SCRIPT_COMMAND_LINE] = true;
        jl->jm.bad[EJ_CFG_F_HTTP_URI] = true;
    }
    struct job_verr jv = {c, jpath, &jl->jm, count_bad};
    int rc = ej__config_validate(cfg, job_verr, &jv);
    if (rc < 0)
        c->rc = rc;
}

static void load_job(struct yctx *c, yaml_node_t *k0, yaml_node_t *map, yaml_node_t *defaults,
                     struct ej_job_config *cfg, yaml_node_t **alerts)
{
    char jpath[300];
    struct job_load jl;
    memset(&jl, 0, sizeof(jl));
    jl.c = c;
    jl.cfg = cfg;
    jl.jpath = jpath;
    jl.jm.job_key = k0->start_mark;
    /* The key names the job in every message; cap what is echoed. */
    snprintf(jpath, sizeof(jpath), "jobs.%.200s", sval(k0));
    if (ej_job_config_set_str(&cfg->job_name, sval(k0)) != 0) {
        c->rc = EJ_ENOMEM;
        return;
    }
    if (map->type != YAML_MAPPING_NODE) {
        if (is_null(map))
            yerr(c, k0->start_mark, jpath, "expected a mapping, got nothing");
        else
            yerr(c, map->start_mark, jpath, "expected a mapping, got %s", kind_name(map));
        return;
    }
    apply_job_map(&jl, map, false);
    if (defaults != NULL)
        apply_job_map(&jl, defaults, true);
    finish_job(&jl);
    *alerts = jl.alerts;
}

/* `defaults:` on its own: its keys are job keys, reported once here. */
static void check_defaults(struct yctx *c, yaml_node_t *map)
{
    struct ej_job_config scratch;
    struct job_load jl;
    if (is_null(map))
        return;
    if (map->type != YAML_MAPPING_NODE) {
        yerr(c, map->start_mark, "defaults", "expected a mapping, got %s", kind_name(map));
        return;
    }
    if (ej_job_config_init(&scratch) != 0) {
        c->rc = EJ_ENOMEM;
        return;
    }
    memset(&jl, 0, sizeof(jl));
    jl.c = c;
    jl.cfg = &scratch;
    jl.jpath = "defaults";
    apply_job_map(&jl, map, false);
    ej_job_config_fini(&scratch);
}

struct key_ref {
    const char *key;
    size_t len;
    size_t index;
};

static int cmp_key_ref(const void *a, const void *b)
{
    const struct key_ref *x = a, *y = b;
    size_t n = x->len < y->len ? x->len : y->len;
    int r = memcmp(x->key, y->key, n);
    if (r != 0)
        return r;
    if (x->len != y->len)
        return x->len < y->len ? -1 : 1;
    return x->index < y->index ? -1 : (x->index > y->index);
}

static void load_jobs(struct yctx *c, yaml_node_t *map, yaml_node_t *defaults,
                      struct ej_daemon_config *out)
{
    const char *path = "jobs";
    if (is_null(map))
        return;
    if (map->type != YAML_MAPPING_NODE) {
        yerr(c, map->start_mark, path, "expected a mapping of job name to job, got %s",
             kind_name(map));
        return;
    }
    size_t n = (size_t)(map->data.mapping.pairs.top - map->data.mapping.pairs.start);
    if (n == 0)
        return;
    if (n > EJ_CONFIG_MAX_DAEMON_JOBS) {
        yerr(c, map->start_mark, path, "defines %zu jobs, more than the limit of %d", n,
             EJ_CONFIG_MAX_DAEMON_JOBS);
        return;
    }

    /* Duplicate job names: sort the keys, compare neighbours. */
    struct key_ref *refs = calloc(n, sizeof(*refs));
    bool *dup = calloc(n, sizeof(*dup));
    out->jobs = calloc(n, sizeof(*out->jobs));
    out->job_lines = calloc(n, sizeof(*out->job_lines));
    c->job_alerts = calloc(n, sizeof(*c->job_alerts));
    if (refs == NULL || dup == NULL || out->jobs == NULL || out->job_lines == NULL ||
        c->job_alerts == NULL) {
        c->rc = EJ_ENOMEM;
        goto out_free;
    }
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *k = node(c, map->data.mapping.pairs.start[i].key);
        refs[i].index = i;
        if (k != NULL && k->type == YAML_SCALAR_NODE) {
            refs[i].key = sval(k);
            refs[i].len = k->data.scalar.length;
        } else {
            refs[i].key = "";
            refs[i].len = 0;
            refs[i].index = i;
        }
    }
    qsort(refs, n, sizeof(*refs), cmp_key_ref);
    for (size_t i = 1; i < n; i++) {
        if (refs[i].len == refs[i - 1].len && refs[i].len > 0 &&
            memcmp(refs[i].key, refs[i - 1].key, refs[i].len) == 0)
            dup[refs[i].index] = true;
    }

    for (size_t i = 0; i < n && c->rc == 0 && !c->too_complex; i++) {
        yaml_node_t *k, *v;
        const char *key = pair_key(c, &map->data.mapping.pairs.start[i], path, &k, &v);
        if (key == NULL)
            continue;
        if (dup[i]) {
            char shown[128];
            shown_scalar(k, shown, sizeof(shown));
            yerr(c, k->start_mark, path, "duplicate job %s", shown);
            continue;
        }
        struct ej_job_config *cfg = &out->jobs[out->job_count];
        if (ej_job_config_init(cfg) != 0) {
            c->rc = EJ_ENOMEM;
            break;
        }
        out->job_lines[out->job_count] = (int)k->start_mark.line + 1;
        out->job_count++;
        load_job(c, k, v, defaults, cfg, &c->job_alerts[out->job_count - 1]);
    }

out_free:
    free(refs);
    free(dup);
}

/* ------------------------------------------------------------------------ */
/* The document                                                              */
/* ------------------------------------------------------------------------ */

/* The value of a top-level key, or NULL (a first look, before the keys
 * are gone through in order). */
static yaml_node_t *top_value(struct yctx *c, yaml_node_t *root, const char *name)
{
    for (yaml_node_pair_t *pr = root->data.mapping.pairs.start; pr < root->data.mapping.pairs.top;
         pr++) {
        yaml_node_t *k = node(c, pr->key);
        if (k != NULL && k->type == YAML_SCALAR_NODE && strcmp(sval(k), name) == 0)
            return node(c, pr->value);
    }
    return NULL;
}

static void load_root(struct yctx *c, struct ej_daemon_config *out)
{
    static const char *const keys[] = {"regCenter", "tracing", "defaults", "jobs",
                                       "metrics",   "log",     "alerts"};
    enum { N_KEYS = sizeof(keys) / sizeof(keys[0]) };
    bool seen[N_KEYS] = {false};
    yaml_mark_t start = {0, 0, 0};
    yaml_node_t *root = yaml_document_get_root_node(c->doc);

    if (root == NULL || is_null(root)) {
        yerr(c, start, "regCenter.namespace", "is required");
        return;
    }
    if (root->type != YAML_MAPPING_NODE) {
        yerr(c, root->start_mark, NULL, "expected a mapping at the top level, got %s",
             kind_name(root));
        return;
    }
    /* Job keys every job of the file gets unless it sets them itself. */
    yaml_node_t *defaults = top_value(c, root, "defaults");
    if (defaults != NULL && (is_null(defaults) || defaults->type != YAML_MAPPING_NODE))
        defaults = NULL;
    for (yaml_node_pair_t *pr = root->data.mapping.pairs.start; pr < root->data.mapping.pairs.top;
         pr++) {
        yaml_node_t *k, *v;
        const char *key = pair_key(c, pr, NULL, &k, &v);
        if (key == NULL)
            continue;
        int i = key_index(key, keys, N_KEYS);
        if (i < 0) {
            char shown[128];
            shown_scalar(k, shown, sizeof(shown));
            yerr(c, k->start_mark, NULL, "unknown top-level key %s", shown);
            continue;
        }
        if (seen_before(c, seen, i, k, NULL))
            continue;
        if (i == 0)
            load_reg_center(c, k, v, &out->reg_center);
        else if (i == 1)
            load_tracing(c, k, v, &out->tracing);
        else if (i == 2)
            check_defaults(c, v);
        else if (i == 3)
            load_jobs(c, v, defaults, out);
        else if (i == 4)
            load_metrics(c, v, &out->metrics);
        else if (i == 5)
            load_log(c, v, &out->log);
        else
            c->alerts = v;
        if (c->rc != 0)
            return;
    }
    /* After the jobs, wherever the section is: rules name channels and
     * apply to jobs. */
    ej__yaml_load_alerts(c, out);
    if (!seen[0])
        yerr(c, start, "regCenter.namespace", "is required");
}

/* 1-based line and column of a byte offset, for reader errors. */
static yaml_mark_t mark_at(const char *text, size_t len, size_t offset)
{
    yaml_mark_t m = {0, 0, 0};
    for (size_t i = 0; i < offset && i < len; i++) {
        if (text[i] == '\n') {
            m.line++;
            m.column = 0;
        } else {
            m.column++;
        }
    }
    m.index = offset;
    return m;
}

static void syntax_error(struct yctx *c, yaml_parser_t *p, const char *text, size_t len)
{
    yaml_mark_t m = p->problem_mark;
    if (p->error == YAML_READER_ERROR)
        m = mark_at(text, len, p->problem_offset);
    if (p->error == YAML_MEMORY_ERROR) {
        c->rc = EJ_ENOMEM;
        return;
    }
    const char *problem = p->problem ? p->problem : "malformed YAML";
    if (p->context != NULL)
        yerr(c, m, NULL, "YAML syntax error: %s (%s at line %zu, column %zu)", problem, p->context,
             p->context_mark.line + 1, p->context_mark.column + 1);
    else
        yerr(c, m, NULL, "YAML syntax error: %s", problem);
}

/* Walk the event stream once: nesting depth and alias count within their
 * limits, and no syntax error. Returns true when the document may be
 * loaded; otherwise the problem is reported. */
static bool prescan(struct yctx *c, const char *text, size_t len)
{
    yaml_parser_t p;
    if (!yaml_parser_initialize(&p)) {
        c->rc = EJ_ENOMEM;
        return false;
    }
    yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
    int depth = 0, aliases = 0;
    bool ok = true, done = false;
    while (ok && !done) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&p, &ev)) {
            syntax_error(c, &p, text, len);
            ok = false;
            break;
        }
        switch (ev.type) {
        case YAML_SEQUENCE_START_EVENT:
        case YAML_MAPPING_START_EVENT:
            if (++depth > MAX_DEPTH) {
                yerr(c, ev.start_mark, NULL, "nested deeper than %d levels", MAX_DEPTH);
                ok = false;
            }
            break;
        case YAML_SEQUENCE_END_EVENT:
        case YAML_MAPPING_END_EVENT:
            depth--;
            break;
        case YAML_ALIAS_EVENT:
            if (++aliases > MAX_ALIASES) {
                yerr(c, ev.start_mark, NULL, "more than %d aliases", MAX_ALIASES);
                ok = false;
            }
            break;
        case YAML_STREAM_END_EVENT:
            done = true;
            break;
        default:
            break;
        }
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&p);
    return ok;
}

int ej_daemon_config_init(struct ej_daemon_config *cfg)
{
    if (cfg == NULL)
        return EJ_EINVAL;
    memset(cfg, 0, sizeof(*cfg));
    struct ej_reg_center_config *rc = &cfg->reg_center;
    rc->embedded = true;
    rc->server_lists = strdup("");
    rc->name_space = strdup("");
    rc->session_timeout_ms = 60000;
    rc->connection_timeout_ms = 15000;
    rc->base_sleep_time_ms = 1000;
    rc->max_sleep_time_ms = 3000;
    rc->max_retries = 3;
    rc->takeover_margin_ms = -1; /* unset: the registry's default */
    rc->digest = NULL;
    cfg->tracing.type = EJ_TRACING_NONE;
    cfg->tracing.url = NULL;
    cfg->tracing.retention_days = EJ_TRACING_RETENTION_DAYS_DEFAULT;
    cfg->tracing.output_max_bytes = EJ_TRACING_OUTPUT_MAX_DEFAULT;
    cfg->log.level = -1;
    cfg->log.format = -1;
    if (rc->server_lists == NULL || rc->name_space == NULL) {
        ej_daemon_config_fini(cfg);
        return EJ_ENOMEM;
    }
    return 0;
}

void ej_daemon_config_fini(struct ej_daemon_config *cfg)
{
    if (cfg == NULL)
        return;
    free(cfg->reg_center.server_lists);
    free(cfg->reg_center.name_space);
    if (cfg->reg_center.digest != NULL)
        memset(cfg->reg_center.digest, 0, strlen(cfg->reg_center.digest));
    free(cfg->reg_center.digest);
    free(cfg->reg_center.digest_file);
    ej_config_errors_fini(&cfg->warnings);
    free(cfg->tracing.url);
    free(cfg->tracing.password_file);
    free(cfg->metrics.listen);
    ej_alert_config_fini(&cfg->alerts);
    for (size_t i = 0; i < cfg->job_count; i++)
        ej_job_config_fini(&cfg->jobs[i]);
    free(cfg->jobs);
    free(cfg->job_lines);
    memset(cfg, 0, sizeof(*cfg));
}

static int load_text(const char *text, size_t len, const char *name, const char *dir, unsigned mode,
                     struct ej_daemon_config *out, struct ej_config_errors *errs)
{
    yaml_parser_t parser;
    yaml_document_t doc, next;
    struct yctx c = {.doc = &doc, .name = name ? name : "<string>", .errs = errs, .dir = dir};
    yaml_mark_t start = {0, 0, 0};

    int rc = ej_daemon_config_init(out);
    if (rc != 0)
        return rc;
    c.mode = mode;
    c.warnings = &out->warnings;
    if (len > EJ_CONFIG_MAX_YAML) {
        yerr(&c, start, NULL, "file is %zu bytes, larger than the limit of %d", len,
             EJ_CONFIG_MAX_YAML);
        goto out_flush;
    }
    if (!yaml_parser_initialize(&parser)) {
        rc = EJ_ENOMEM;
        goto out_fini;
    }
    if (!prescan(&c, text, len))
        goto out_parser;
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &doc)) {
        syntax_error(&c, &parser, text, len);
        goto out_parser;
    }
    load_root(&c, out);
    yaml_document_delete(&doc);
    if (c.rc == 0) {
        /* One document only: a second one is almost surely a mistake. */
        if (!yaml_parser_load(&parser, &next)) {
            syntax_error(&c, &parser, text, len);
        } else {
            yaml_node_t *r2 = yaml_document_get_root_node(&next);
            if (r2 != NULL)
                yerr(&c, r2->start_mark, NULL, "only one YAML document is allowed");
            yaml_document_delete(&next);
        }
    }

out_parser:
    yaml_parser_delete(&parser);
    free(c.job_alerts);
out_flush:
    flush_messages(&c);
    if (c.rc != 0)
        rc = c.rc;
    else if (c.nerr > 0)
        rc = EJ_ECONFIG;
out_fini:
    if (rc != 0)
        ej_daemon_config_fini(out);
    return rc;
}

int ej_daemon_config_load_string(const char *text, const char *name, struct ej_daemon_config *out,
                                 struct ej_config_errors *errs)
{
    if (out == NULL)
        return EJ_EINVAL;
    if (text == NULL) {
        memset(out, 0, sizeof(*out));
        return EJ_EINVAL;
    }
    return load_text(text, strlen(text), name, NULL, 0, out, errs);
}

int ej_daemon_config_load_file(const char *path, struct ej_daemon_config *out,
                               struct ej_config_errors *errs)
{
    if (out == NULL)
        return EJ_EINVAL;
    memset(out, 0, sizeof(*out));
    if (path == NULL)
        return EJ_EINVAL;
    int rc = 0;
    char *text = NULL;
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        rc = -errno;
        ej__config_errors_add(errs, "%s: cannot open: %s", path, strerror(errno));
        return rc;
    }
    struct stat st;
    if (fstat(fileno(f), &st) != 0) {
        rc = -errno;
        ej__config_errors_add(errs, "%s: cannot stat: %s", path, strerror(errno));
        goto out_close;
    }
    if (!S_ISREG(st.st_mode)) {
        rc = EJ_ECONFIG;
        ej__config_errors_add(errs, "%s: not a regular file", path);
        goto out_close;
    }
    if (st.st_size > EJ_CONFIG_MAX_YAML) {
        rc = EJ_ECONFIG;
        ej__config_errors_add(errs, "%s: file is %lld bytes, larger than the limit of %d", path,
                              (long long)st.st_size, EJ_CONFIG_MAX_YAML);
        goto out_close;
    }
    text = malloc((size_t)st.st_size + 1);
    if (text == NULL) {
        rc = EJ_ENOMEM;
        goto out_close;
    }
    size_t n = fread(text, 1, (size_t)st.st_size, f);
    if (ferror(f)) {
        rc = -EIO;
        ej__config_errors_add(errs, "%s: read error", path);
        goto out_free;
    }
    text[n] = '\0';
    const char *slash = strrchr(path, '/');
    char *dir = slash == NULL ? NULL : strndup(path, slash == path ? 1 : (size_t)(slash - path));
    if (slash != NULL && dir == NULL) {
        rc = EJ_ENOMEM;
        goto out_free;
    }
    rc = load_text(text, n, path, dir, (unsigned)st.st_mode, out, errs);
    free(dir);

out_free:
    free(text);
out_close:
    fclose(f);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* The helpers above, for the loader's other files (yaml_internal.h)         */
/* ------------------------------------------------------------------------ */

void ej__yaml_err(struct yctx *c, yaml_mark_t m, const char *path, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    yerr(c, m, path, "%s", msg);
}

yaml_node_t *ej__yaml_node(struct yctx *c, int id)
{
    return node(c, id);
}

const char *ej__yaml_kind_name(yaml_node_t *n)
{
    return kind_name(n);
}

bool ej__yaml_is_null(yaml_node_t *n)
{
    return is_null(n);
}

void ej__yaml_shown(yaml_node_t *n, char *out, size_t outlen)
{
    shown_scalar(n, out, outlen);
}

bool ej__yaml_want_scalar(struct yctx *c, yaml_node_t *v, const char *path, const char *what)
{
    return want_scalar(c, v, path, what);
}

bool ej__yaml_get_str(struct yctx *c, yaml_node_t *v, const char *path, char **dst)
{
    return get_str(c, v, path, dst);
}

bool ej__yaml_get_int(struct yctx *c, yaml_node_t *v, const char *path, int *dst)
{
    return get_int(c, v, path, dst);
}

const char *ej__yaml_pair_key(struct yctx *c, yaml_node_pair_t *pair, const char *path,
                              yaml_node_t **k, yaml_node_t **v)
{
    return pair_key(c, pair, path, k, v);
}

bool ej__yaml_seen_before(struct yctx *c, bool *seen, int i, yaml_node_t *k, const char *path)
{
    return seen_before(c, seen, i, k, path);
}

void ej__yaml_unknown_key(struct yctx *c, yaml_node_t *k, const char *path)
{
    unknown_key(c, k, path);
}

void ej__yaml_warn(struct yctx *c, const char *msg)
{
    add_warning(c, msg);
}
