/*
 * Shared between the daemon YAML loader's files (yaml.c, yaml_alerts.c):
 * the loading context and the reading helpers of yaml.c. Not public.
 */
#ifndef EJ_CONFIG_YAML_INTERNAL_H
#define EJ_CONFIG_YAML_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <yaml.h>

#include "config/daemon_file.h"
#include "ejob/common.h"

struct ymsg {
    size_t line, column, seq;
    char *text;
};

struct yctx {
    yaml_document_t *doc;
    const char *name;
    struct ej_config_errors *errs;
    int nerr;
    int rc; /* EJ_ENOMEM once an allocation failed */
    size_t visits;
    bool too_complex;
    bool muted; /* applying defaults: their problems were reported once */
    struct ymsg *msgs;
    size_t nmsgs;
    const char *dir;                   /* of the file, for digestFile; NULL = cwd */
    unsigned mode;                     /* the file's st_mode; 0 for a string */
    struct ej_config_errors *warnings; /* out->warnings */
    yaml_node_t *alerts;               /* the alerts: section's value, or NULL */
    yaml_node_t **job_alerts;          /* per job: its alerts (own or defaults'), or NULL */
};

/* A problem at m, "PATH: message" (path may be NULL). */
void ej__yaml_err(struct yctx *c, yaml_mark_t m, const char *path, const char *fmt, ...)
    EJ_PRINTF(4, 5);
/* A warning that does not stop the file. */
void ej__yaml_warn(struct yctx *c, const char *msg);
yaml_node_t *ej__yaml_node(struct yctx *c, int id);
/* "a mapping", "a sequence", "a scalar". */
const char *ej__yaml_kind_name(yaml_node_t *n);
/* An empty, ~ or null plain scalar: read as absent. */
bool ej__yaml_is_null(yaml_node_t *n);
/* n's text, quoted and cut for a message. */
void ej__yaml_shown(yaml_node_t *n, char *out, size_t outlen);
/* Readers: false when v is not what is wanted (reported at v). */
bool ej__yaml_want_scalar(struct yctx *c, yaml_node_t *v, const char *path, const char *what);
bool ej__yaml_get_str(struct yctx *c, yaml_node_t *v, const char *path, char **dst);
bool ej__yaml_get_int(struct yctx *c, yaml_node_t *v, const char *path, int *dst);
/* A mapping pair's key text (NULL: skip the pair, reported) and nodes. */
const char *ej__yaml_pair_key(struct yctx *c, yaml_node_pair_t *pair, const char *path,
                              yaml_node_t **k, yaml_node_t **v);
/* Reports a repeated key; true when key index i was seen already. */
bool ej__yaml_seen_before(struct yctx *c, bool *seen, int i, yaml_node_t *k, const char *path);
void ej__yaml_unknown_key(struct yctx *c, yaml_node_t *k, const char *path);

/* The alerts: section and every job's alerts (yaml_alerts.c), into
 * out->alerts. Called once the jobs are loaded. */
void ej__yaml_load_alerts(struct yctx *c, struct ej_daemon_config *out);

#endif
