/*
 * The daemon file's alerts: section (channels, rules, throttleSeconds) and
 * each job's alerts (jobs.X.alerts, inherited from defaults.alerts), read
 * after the jobs because rules name channels and apply to jobs
 * (docs/alerts.md). Each channel's secret is read here, so a missing or
 * loose secret file stops the start (and `ejob run --check`) at its line.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/check.h"
#include "common/util.h"
#include "config/daemon_file.h"
#include "config/internal.h"
#include "config/yaml_internal.h"
#include "ejob/error.h"

static const char *const kind_names[EJ_ALERT_KINDS] = {
    [EJ_ALERT_FAILED] = "failed",       [EJ_ALERT_TIMEOUT] = "timeout",
    [EJ_ALERT_NOT_RUN] = "not-run",     [EJ_ALERT_MISSED] = "missed",
    [EJ_ALERT_RECOVERED] = "recovered", [EJ_ALERT_TEST] = "test",
};

static const char *const type_names[EJ_ALERT_CH_TYPES] = {
    [EJ_ALERT_CH_WEBHOOK] = "webhook", [EJ_ALERT_CH_EMAIL] = "email",
    [EJ_ALERT_CH_SLACK] = "slack",     [EJ_ALERT_CH_DINGTALK] = "dingtalk",
    [EJ_ALERT_CH_WECOM] = "wecom",     [EJ_ALERT_CH_FEISHU] = "feishu",
};

int ej_alert_kind_parse(const char *word)
{
    for (int i = 0; i < EJ_ALERT_KINDS; i++)
        if (i != EJ_ALERT_TEST && strcmp(word, kind_names[i]) == 0)
            return i;
    return -1;
}

const char *ej_alert_kind_name(ej_alert_kind kind)
{
    return (unsigned)kind < EJ_ALERT_KINDS ? kind_names[kind] : "unknown";
}

const char *ej_alert_channel_type_name(ej_alert_channel_type type)
{
    return (unsigned)type < EJ_ALERT_CH_TYPES ? type_names[type] : "unknown";
}

static void rules_fini(struct ej_alert_rule_config *rules, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(rules[i].channels);
    free(rules);
}

void ej_alert_config_fini(struct ej_alert_config *cfg)
{
    if (cfg == NULL)
        return;
    for (size_t i = 0; i < cfg->channel_count; i++) {
        struct ej_alert_channel_config *ch = &cfg->channels[i];
        free(ch->name);
        free(ch->url);
        if (ch->secret != NULL)
            memset(ch->secret, 0, strlen(ch->secret));
        free(ch->secret);
        free(ch->from);
        free(ch->user);
        for (size_t t = 0; t < ch->to_count; t++)
            free(ch->to[t]);
        free(ch->to);
    }
    free(cfg->channels);
    for (size_t i = 0; i < cfg->job_count; i++) {
        free(cfg->job_rules[i].job);
        rules_fini(cfg->job_rules[i].rules, cfg->job_rules[i].rule_count);
    }
    free(cfg->job_rules);
    memset(cfg, 0, sizeof *cfg);
}

/* --------------------------------------------------------------- channels */

enum {
    CK_TYPE,
    CK_URL,
    CK_SECRET_FILE,
    CK_SECRET_ENV,
    CK_SMTP,
    CK_FROM,
    CK_TO,
    CK_USER,
    CK_PASSWORD_FILE,
    CK_PASSWORD_ENV,
    CK_COUNT
};
static const char *const ch_keys[] = {"type", "url", "secretFile", "secretEnv",    "smtp",
                                      "from", "to",  "user",       "passwordFile", "passwordEnv"};
_Static_assert(sizeof ch_keys / sizeof ch_keys[0] == CK_COUNT, "one name per CK_* key");
/* Which keys each type takes (bit per CK_*). */
#define BIT(k) (1u << (k))
#define CHAT_KEYS (BIT(CK_TYPE) | BIT(CK_URL))
static const unsigned type_keys[EJ_ALERT_CH_TYPES] = {
    [EJ_ALERT_CH_WEBHOOK] = CHAT_KEYS | BIT(CK_SECRET_FILE) | BIT(CK_SECRET_ENV),
    [EJ_ALERT_CH_EMAIL] = BIT(CK_TYPE) | BIT(CK_SMTP) | BIT(CK_FROM) | BIT(CK_TO) | BIT(CK_USER) |
                          BIT(CK_PASSWORD_FILE) | BIT(CK_PASSWORD_ENV),
    [EJ_ALERT_CH_SLACK] = CHAT_KEYS,
    [EJ_ALERT_CH_DINGTALK] = CHAT_KEYS,
    [EJ_ALERT_CH_WECOM] = CHAT_KEYS,
    [EJ_ALERT_CH_FEISHU] = CHAT_KEYS,
};

static bool is_name_char(char ch)
{
    return isalnum((unsigned char)ch) || ch == '-' || ch == '_' || ch == '.';
}

/* The values of map's keys names[0..n) into at[] (their key nodes into
 * key_at when not NULL); unknown and repeated keys are reported, empty
 * values left out. map is a mapping. */
#define MAX_SECTION_KEYS 16
static void mapping_values(struct yctx *c, yaml_node_t *map, const char *path,
                           const char *const *names, int n, yaml_node_t **at, yaml_node_t **key_at)
{
    bool seen[MAX_SECTION_KEYS] = {false};
    EJ_ASSERT(n <= MAX_SECTION_KEYS);
    for (yaml_node_pair_t *pr = map->data.mapping.pairs.start; pr < map->data.mapping.pairs.top;
         pr++) {
        yaml_node_t *k, *v;
        const char *key = ej__yaml_pair_key(c, pr, path, &k, &v);
        if (key == NULL)
            continue;
        int i = -1;
        for (int x = 0; x < n && i < 0; x++)
            if (strcmp(key, names[x]) == 0)
                i = x;
        if (i < 0) {
            ej__yaml_unknown_key(c, k, path);
        } else if (!ej__yaml_seen_before(c, seen, i, k, path) && !ej__yaml_is_null(v)) {
            at[i] = v;
            if (key_at != NULL)
                key_at[i] = k;
        }
    }
}

/* The secret of a channel from a file (relative to the YAML file's
 * directory) or an environment variable; never from the YAML itself. */
static void read_secret(struct yctx *c, yaml_node_t *file, yaml_node_t *env, const char *path,
                        char **out)
{
    char warn[600], err[600], full[400];
    if (file != NULL && env != NULL) {
        ej__yaml_err(c, env->start_mark, path, "give %s or %s, not both",
                     strstr(path, "password") ? "passwordFile" : "secretFile",
                     strstr(path, "password") ? "passwordEnv" : "secretEnv");
        return;
    }
    char *name = NULL;
    yaml_node_t *at = file != NULL ? file : env;
    snprintf(full, sizeof full, "%s%s", path, file != NULL ? "File" : "Env");
    if (at == NULL || !ej__yaml_get_str(c, at, full, &name) || name == NULL)
        return;
    if (c->muted) {
        free(name);
        return;
    }
    if (env != NULL) {
        const char *val = getenv(name);
        if (val == NULL || val[0] == '\0')
            ej__yaml_err(c, at->start_mark, full, "environment variable %.100s is not set", name);
        else if ((*out = strdup(val)) == NULL)
            c->rc = EJ_ENOMEM;
        free(name);
        return;
    }
    char *p = name[0] == '/' || c->dir == NULL ? strdup(name) : ej__asprintf("%s/%s", c->dir, name);
    free(name);
    if (p == NULL) {
        c->rc = EJ_ENOMEM;
        return;
    }
    int e = ej__config_read_secret_line(p, out, warn, sizeof warn, err, sizeof err);
    if (e == EJ_ENOMEM)
        c->rc = e;
    else if (e != 0)
        ej__yaml_err(c, at->start_mark, full, "%s", err);
    else if (warn[0] != '\0')
        ej__yaml_warn(c, warn);
    free(p);
}

/* Something a mail header and an SMTP command can carry as an address. */
static bool is_address(const char *s)
{
    return strchr(s, '@') != NULL && s[0] != '@' && strpbrk(s, " \t\r\n<>,;\"") == NULL;
}

/* to: one address or a sequence of them. */
static void read_addresses(struct yctx *c, yaml_node_t *v, const char *path,
                           struct ej_alert_channel_config *ch)
{
    size_t n = v->type == YAML_SEQUENCE_NODE
                   ? (size_t)(v->data.sequence.items.top - v->data.sequence.items.start)
                   : 1;
    ch->to = calloc(n ? n : 1, sizeof *ch->to);
    if (ch->to == NULL) {
        c->rc = EJ_ENOMEM;
        return;
    }
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *a =
            v->type == YAML_SEQUENCE_NODE ? ej__yaml_node(c, v->data.sequence.items.start[i]) : v;
        char *addr = NULL;
        if (a == NULL || !ej__yaml_get_str(c, a, path, &addr) || addr == NULL)
            continue;
        if (!is_address(addr)) {
            char shown[128];
            ej__yaml_shown(a, shown, sizeof shown);
            ej__yaml_err(c, a->start_mark, path, "not an e-mail address: %s", shown);
            free(addr);
            continue;
        }
        ch->to[ch->to_count++] = addr;
    }
    if (n == 0)
        ej__yaml_err(c, v->start_mark, path, "names no recipient");
}

/* A URL key: http(s):// for the webhooks, smtp(s):// for e-mail. */
static void read_url(struct yctx *c, yaml_node_t *v, const char *path, bool smtp, char **dst)
{
    if (!ej__yaml_get_str(c, v, path, dst) || *dst == NULL)
        return;
    const char *a = smtp ? "smtp://" : "http://", *b = smtp ? "smtps://" : "https://";
    size_t skip = strncmp(*dst, a, strlen(a)) == 0   ? strlen(a)
                  : strncmp(*dst, b, strlen(b)) == 0 ? strlen(b)
                                                     : 0;
    /* A scheme, then a host. */
    bool ok = skip > 0 && (*dst)[skip] != '\0' && strpbrk(*dst, " \t\r\n") == NULL;
    if (!ok) {
        char shown[128];
        ej__yaml_shown(v, shown, sizeof shown);
        ej__yaml_err(c, v->start_mark, path, "must be a %s or %s URL, got %s", a, b, shown);
    }
}

static bool channel_type(struct yctx *c, yaml_node_t *v, const char *path,
                         ej_alert_channel_type *out)
{
    if (!ej__yaml_want_scalar(c, v, path, "a channel type"))
        return false;
    for (int t = 0; t < EJ_ALERT_CH_TYPES; t++) {
        if (strcmp((const char *)v->data.scalar.value, type_names[t]) == 0) {
            *out = (ej_alert_channel_type)t;
            return true;
        }
    }
    char shown[128];
    ej__yaml_shown(v, shown, sizeof shown);
    ej__yaml_err(c, v->start_mark, path,
                 "must be webhook, email, slack, dingtalk, wecom or feishu, got %s", shown);
    return false;
}

static void load_channel(struct yctx *c, yaml_node_t *k0, yaml_node_t *map,
                         struct ej_alert_channel_config *ch)
{
    char path[300], full[400];
    yaml_node_t *at[CK_COUNT] = {NULL};
    snprintf(path, sizeof path, "alerts.channels.%.100s", ch->name);
    if (map->type != YAML_MAPPING_NODE) {
        ej__yaml_err(c, ej__yaml_is_null(map) ? k0->start_mark : map->start_mark, path,
                     "expected a mapping, got %s",
                     ej__yaml_is_null(map) ? "nothing" : ej__yaml_kind_name(map));
        return;
    }
    mapping_values(c, map, path, ch_keys, CK_COUNT, at, NULL);
    snprintf(full, sizeof full, "%s.type", path);
    if (at[CK_TYPE] == NULL) {
        ej__yaml_err(c, k0->start_mark, full,
                     "is required (webhook, email, slack, dingtalk, wecom or feishu)");
        return;
    }
    if (!channel_type(c, at[CK_TYPE], full, &ch->type))
        return;
    for (int i = 0; i < CK_COUNT; i++) {
        if (at[i] != NULL && !(type_keys[ch->type] & BIT(i))) {
            snprintf(full, sizeof full, "%s.%s", path, ch_keys[i]);
            ej__yaml_err(c, at[i]->start_mark, full, "does not apply to %s channels",
                         type_names[ch->type]);
            at[i] = NULL;
        }
    }
    bool email = ch->type == EJ_ALERT_CH_EMAIL;
    int url_key = email ? CK_SMTP : CK_URL;
    snprintf(full, sizeof full, "%s.%s", path, ch_keys[url_key]);
    if (at[url_key] == NULL)
        ej__yaml_err(c, k0->start_mark, full, "is required for %s channels", type_names[ch->type]);
    else
        read_url(c, at[url_key], full, email, &ch->url);
    if (email) {
        snprintf(full, sizeof full, "%s.from", path);
        if (at[CK_FROM] == NULL)
            ej__yaml_err(c, k0->start_mark, full, "is required for email channels");
        else if (ej__yaml_get_str(c, at[CK_FROM], full, &ch->from) && ch->from != NULL &&
                 !is_address(ch->from)) {
            char shown[128];
            ej__yaml_shown(at[CK_FROM], shown, sizeof shown);
            ej__yaml_err(c, at[CK_FROM]->start_mark, full, "not an e-mail address: %s", shown);
        }
        snprintf(full, sizeof full, "%s.to", path);
        if (at[CK_TO] == NULL)
            ej__yaml_err(c, k0->start_mark, full, "is required for email channels");
        else
            read_addresses(c, at[CK_TO], full, ch);
        snprintf(full, sizeof full, "%s.user", path);
        if (at[CK_USER] != NULL)
            ej__yaml_get_str(c, at[CK_USER], full, &ch->user);
        snprintf(full, sizeof full, "%s.password", path);
        read_secret(c, at[CK_PASSWORD_FILE], at[CK_PASSWORD_ENV], full, &ch->secret);
    } else if (ch->type == EJ_ALERT_CH_WEBHOOK) {
        snprintf(full, sizeof full, "%s.secret", path);
        read_secret(c, at[CK_SECRET_FILE], at[CK_SECRET_ENV], full, &ch->secret);
    }
}

static void load_channels(struct yctx *c, yaml_node_t *k0, yaml_node_t *map,
                          struct ej_alert_config *ac)
{
    const char *path = "alerts.channels";
    if (map == NULL || ej__yaml_is_null(map)) {
        ej__yaml_err(c, k0->start_mark, path, "is required: at least one channel");
        return;
    }
    if (map->type != YAML_MAPPING_NODE) {
        ej__yaml_err(c, map->start_mark, path, "expected a mapping of name to channel, got %s",
                     ej__yaml_kind_name(map));
        return;
    }
    size_t n = (size_t)(map->data.mapping.pairs.top - map->data.mapping.pairs.start);
    if (n == 0 || n > EJ_ALERT_MAX_CHANNELS) {
        ej__yaml_err(c, map->start_mark, path, "must name 1..%d channels, got %zu",
                     EJ_ALERT_MAX_CHANNELS, n);
        return;
    }
    ac->channels = calloc(n, sizeof *ac->channels);
    if (ac->channels == NULL) {
        c->rc = EJ_ENOMEM;
        return;
    }
    for (size_t i = 0; i < n && c->rc == 0; i++) {
        yaml_node_t *k, *v;
        const char *name = ej__yaml_pair_key(c, &map->data.mapping.pairs.start[i], path, &k, &v);
        if (name == NULL)
            continue;
        bool ok = name[0] != '\0' && strlen(name) <= 64;
        for (const char *p = name; ok && *p; p++)
            ok = is_name_char(*p);
        char shown[128];
        ej__yaml_shown(k, shown, sizeof shown);
        if (!ok) {
            ej__yaml_err(c, k->start_mark, path,
                         "channel name %s: 1..64 letters, digits, '-', '_' or '.'", shown);
            continue;
        }
        bool dup = false;
        for (size_t j = 0; j < ac->channel_count && !dup; j++)
            dup = strcmp(ac->channels[j].name, name) == 0;
        if (dup) {
            ej__yaml_err(c, k->start_mark, path, "duplicate channel %s", shown);
            continue;
        }
        struct ej_alert_channel_config *ch = &ac->channels[ac->channel_count++];
        if ((ch->name = strdup(name)) == NULL) {
            c->rc = EJ_ENOMEM;
            return;
        }
        load_channel(c, k, v, ch);
    }
}

/* ------------------------------------------------------------------ rules */

/* The items of a scalar-or-sequence value. */
static size_t list_len(yaml_node_t *v)
{
    return v->type == YAML_SEQUENCE_NODE
               ? (size_t)(v->data.sequence.items.top - v->data.sequence.items.start)
               : 1;
}

static yaml_node_t *list_at(struct yctx *c, yaml_node_t *v, size_t i)
{
    return v->type == YAML_SEQUENCE_NODE ? ej__yaml_node(c, v->data.sequence.items.start[i]) : v;
}

static unsigned read_kinds(struct yctx *c, yaml_node_t *v, const char *path)
{
    unsigned on = 0;
    for (size_t i = 0; i < list_len(v); i++) {
        yaml_node_t *w = list_at(c, v, i);
        if (w == NULL || !ej__yaml_want_scalar(c, w, path, "an alert kind"))
            continue;
        int kind = ej_alert_kind_parse((const char *)w->data.scalar.value);
        if (kind < 0) {
            char shown[128];
            ej__yaml_shown(w, shown, sizeof shown);
            ej__yaml_err(c, w->start_mark, path,
                         "must be failed, timeout, not-run, missed or recovered, got %s", shown);
            continue;
        }
        on |= 1u << kind;
    }
    if (on == 0 && list_len(v) == 0)
        ej__yaml_err(c, v->start_mark, path, "names no kind");
    return on;
}

/* Channel names into indexes of ac->channels. */
static void read_channel_refs(struct yctx *c, yaml_node_t *v, const char *path,
                              const struct ej_alert_config *ac, size_t **out, size_t *count)
{
    size_t n = list_len(v);
    *out = calloc(n ? n : 1, sizeof **out);
    *count = 0;
    if (*out == NULL) {
        c->rc = EJ_ENOMEM;
        return;
    }
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *w = list_at(c, v, i);
        if (w == NULL || !ej__yaml_want_scalar(c, w, path, "a channel name"))
            continue;
        size_t j = 0;
        while (j < ac->channel_count &&
               strcmp(ac->channels[j].name, (const char *)w->data.scalar.value) != 0)
            j++;
        if (j == ac->channel_count) {
            char shown[128];
            ej__yaml_shown(w, shown, sizeof shown);
            ej__yaml_err(c, w->start_mark, path, "no channel %s in alerts.channels", shown);
            continue;
        }
        (*out)[(*count)++] = j;
    }
    if (n == 0)
        ej__yaml_err(c, v->start_mark, path, "names no channel");
}

/* Every channel, or the given ones: a rule's channels when it names none. */
static int copy_refs(const size_t *from, size_t n, size_t all, size_t **out, size_t *count)
{
    size_t m = from != NULL ? n : all;
    *out = calloc(m ? m : 1, sizeof **out);
    if (*out == NULL)
        return EJ_ENOMEM;
    for (size_t i = 0; i < m; i++)
        (*out)[i] = from != NULL ? from[i] : i;
    *count = m;
    return 0;
}

static void load_rule(struct yctx *c, yaml_node_t *map, const char *path,
                      const struct ej_alert_config *ac, const size_t *dflt, size_t ndflt,
                      struct ej_alert_rule_config *r)
{
    static const char *const keys[] = {"on", "after", "channels"};
    yaml_node_t *at[3] = {NULL};
    char full[512];
    r->after = 1;
    if (map->type != YAML_MAPPING_NODE) {
        ej__yaml_err(c, map->start_mark, path, "expected a mapping {on, after, channels}, got %s",
                     ej__yaml_kind_name(map));
        return;
    }
    mapping_values(c, map, path, keys, 3, at, NULL);
    snprintf(full, sizeof full, "%.440s.on", path);
    if (at[0] == NULL)
        ej__yaml_err(c, map->start_mark, full,
                     "is required: [failed, timeout, not-run, missed, recovered]");
    else
        r->on = read_kinds(c, at[0], full);
    snprintf(full, sizeof full, "%.440s.after", path);
    if (at[1] != NULL && ej__yaml_get_int(c, at[1], full, &r->after) &&
        (r->after < 1 || r->after > 1000000))
        ej__yaml_err(c, at[1]->start_mark, full, "must be 1..1000000, got %d", r->after);
    snprintf(full, sizeof full, "%.440s.%s", path, keys[2]);
    if (at[2] != NULL)
        read_channel_refs(c, at[2], full, ac, &r->channels, &r->channel_count);
    else if (copy_refs(dflt, ndflt, ac->channel_count, &r->channels, &r->channel_count) != 0)
        c->rc = EJ_ENOMEM;
}

/* rules: a sequence of rules (each {on, after, channels}). */
static void load_rules(struct yctx *c, yaml_node_t *seq, const char *path,
                       const struct ej_alert_config *ac, const size_t *dflt, size_t ndflt,
                       struct ej_alert_rule_config **out, size_t *count)
{
    char full[400];
    *out = NULL;
    *count = 0;
    if (ej__yaml_is_null(seq))
        return;
    if (seq->type != YAML_SEQUENCE_NODE) {
        ej__yaml_err(c, seq->start_mark, path, "expected a sequence of rules, got %s",
                     ej__yaml_kind_name(seq));
        return;
    }
    size_t n = list_len(seq);
    if (n > EJ_ALERT_MAX_RULES) {
        ej__yaml_err(c, seq->start_mark, path, "has %zu rules, more than the limit of %d", n,
                     EJ_ALERT_MAX_RULES);
        return;
    }
    *out = calloc(n ? n : 1, sizeof **out);
    if (*out == NULL) {
        c->rc = EJ_ENOMEM;
        return;
    }
    for (size_t i = 0; i < n && c->rc == 0; i++) {
        yaml_node_t *r = list_at(c, seq, i);
        if (r == NULL)
            continue;
        snprintf(full, sizeof full, "%s[%zu]", path, i);
        load_rule(c, r, full, ac, dflt, ndflt, &(*out)[(*count)++]);
    }
}

/* ------------------------------------------------------------ the section */

/* A job's alerts: {rules, channels}: its own rules, or the section's with
 * its channels. */
static void load_job_alerts(struct yctx *c, yaml_node_t *map, const char *jpath,
                            const struct ej_alert_config *ac,
                            const struct ej_alert_rule_config *file_rules, size_t file_nrules,
                            struct ej_alert_job_rules *jr)
{
    static const char *const keys[] = {"rules", "channels"};
    char path[400], full[440];
    size_t *refs = NULL, nrefs = 0;
    snprintf(path, sizeof path, "%s.alerts", jpath);
    if (map->type != YAML_MAPPING_NODE) {
        ej__yaml_err(c, map->start_mark, path, "expected a mapping {rules, channels}, got %s",
                     ej__yaml_kind_name(map));
        return;
    }
    yaml_node_t *at[2] = {NULL};
    mapping_values(c, map, path, keys, 2, at, NULL);
    yaml_node_t *rules = at[0], *channels = at[1];
    if (channels != NULL && !ej__yaml_is_null(channels)) {
        snprintf(full, sizeof full, "%s.channels", path);
        read_channel_refs(c, channels, full, ac, &refs, &nrefs);
    }
    if (rules != NULL) {
        snprintf(full, sizeof full, "%s.rules", path);
        load_rules(c, rules, full, ac, refs, nrefs, &jr->rules, &jr->rule_count);
    } else {
        /* The section's rules, sent to this job's channels when it names
         * some. */
        jr->rules = calloc(file_nrules ? file_nrules : 1, sizeof *jr->rules);
        for (size_t i = 0; jr->rules != NULL && i < file_nrules; i++) {
            jr->rules[i] = file_rules[i];
            const size_t *from = refs != NULL ? refs : file_rules[i].channels;
            size_t n = refs != NULL ? nrefs : file_rules[i].channel_count;
            jr->rules[i].channels = NULL;
            if (copy_refs(from, n, 0, &jr->rules[i].channels, &jr->rules[i].channel_count) != 0)
                break;
            jr->rule_count++;
        }
        if (jr->rule_count != file_nrules)
            c->rc = EJ_ENOMEM;
    }
    free(refs);
}

static void load_section(struct yctx *c, yaml_node_t *map, struct ej_alert_config *ac,
                         struct ej_alert_rule_config **rules, size_t *nrules)
{
    static const char *const keys[] = {"channels", "rules", "throttleSeconds"};
    yaml_node_t *at[3] = {NULL}, *k0 = NULL;
    yaml_node_t *key_at[3] = {NULL};
    mapping_values(c, map, "alerts", keys, 3, at, key_at);
    k0 = key_at[0];
    if (at[0] == NULL) {
        ej__yaml_err(c, map->start_mark, "alerts.channels", "is required: at least one channel");
        return;
    }
    load_channels(c, k0, at[0], ac);
    if (at[2] != NULL && !ej__yaml_is_null(at[2]) &&
        ej__yaml_get_int(c, at[2], "alerts.throttleSeconds", &ac->throttle_seconds) &&
        (ac->throttle_seconds < 0 || ac->throttle_seconds > 7 * 86400))
        ej__yaml_err(c, at[2]->start_mark, "alerts.throttleSeconds",
                     "must be 0..604800 (0: no throttling), got %d", ac->throttle_seconds);
    if (at[1] != NULL)
        load_rules(c, at[1], "alerts.rules", ac, NULL, 0, rules, nrules);
}

void ej__yaml_load_alerts(struct yctx *c, struct ej_daemon_config *out)
{
    struct ej_alert_config *ac = &out->alerts;
    struct ej_alert_rule_config *rules = NULL;
    size_t nrules = 0;
    ac->throttle_seconds = EJ_ALERT_THROTTLE_DEFAULT;
    yaml_node_t *sec = c->alerts;
    if (sec != NULL && !ej__yaml_is_null(sec) && sec->type != YAML_MAPPING_NODE) {
        ej__yaml_err(c, sec->start_mark, "alerts", "expected a mapping, got %s",
                     ej__yaml_kind_name(sec));
        return;
    }
    bool have = sec != NULL && !ej__yaml_is_null(sec);
    if (have)
        load_section(c, sec, ac, &rules, &nrules);
    if (c->rc != 0 || !have) {
        /* Without the section a job's alerts have no channel to go to. */
        for (size_t i = 0; c->job_alerts != NULL && i < out->job_count; i++) {
            yaml_node_t *ja = c->job_alerts[i];
            if (ja != NULL && !ej__yaml_is_null(ja) && c->rc == 0)
                ej__yaml_err(c, ja->start_mark, NULL,
                             "jobs.%.200s.alerts: there is no alerts: section with channels",
                             out->jobs[i].job_name);
        }
        rules_fini(rules, nrules);
        return;
    }
    ac->configured = ac->channel_count > 0;
    ac->job_rules = calloc(out->job_count ? out->job_count : 1, sizeof *ac->job_rules);
    if (ac->job_rules == NULL) {
        c->rc = EJ_ENOMEM;
        rules_fini(rules, nrules);
        return;
    }
    for (size_t i = 0; i < out->job_count && c->rc == 0; i++) {
        struct ej_alert_job_rules *jr = &ac->job_rules[ac->job_count++];
        char jpath[300];
        snprintf(jpath, sizeof jpath, "jobs.%.200s", out->jobs[i].job_name);
        if ((jr->job = strdup(out->jobs[i].job_name)) == NULL) {
            c->rc = EJ_ENOMEM;
            break;
        }
        yaml_node_t *ja = c->job_alerts != NULL ? c->job_alerts[i] : NULL;
        if (ja == NULL || ej__yaml_is_null(ja)) {
            load_job_alerts(c, &(yaml_node_t){.type = YAML_MAPPING_NODE}, jpath, ac, rules, nrules,
                            jr);
            continue;
        }
        /* defaults.alerts, met again in a later job: reported once. */
        bool again = false;
        for (size_t j = 0; j < i && !again; j++)
            again = c->job_alerts[j] == ja;
        bool muted = c->muted;
        c->muted = muted || again;
        load_job_alerts(c, ja, jpath, ac, rules, nrules, jr);
        c->muted = muted;
    }
    rules_fini(rules, nrules);
}
