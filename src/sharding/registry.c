/* Strategy names: the built-ins, their Java class names, and the registry of
 * custom strategies. */
#include <pthread.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/check.h"
#include "ejob/error.h"
#include "ejob/sharding.h"

struct builtin {
    const char *name;       /* canonical, matched case-insensitively */
    const char *alias;      /* another case-insensitive name, or NULL */
    const char *java_class; /* simple class name, or NULL */
    const char *full_class; /* a full class name of its own package, or NULL */
    ej_sharding_fn fn;
    bool namespace_load;
};

static const struct builtin builtins[] = {
    {"AVERAGE", "AVG_ALLOCATION", "AverageAllocationJobShardingStrategy", NULL, ej_sharding_average,
     false},
    {"ODEVITY", NULL, "OdevitySortByNameJobShardingStrategy", NULL, ej_sharding_odevity, false},
    {"ROTATE", "ROUND_ROBIN", "RotateServerByNameJobShardingStrategy", NULL, ej_sharding_rotate,
     false},
    {"CONSISTENT_HASH", NULL, NULL, NULL, ej_sharding_consistent_hash, false},
    {"STICKY", NULL, NULL, NULL, ej_sharding_sticky, false},
    /* No Java class implements it: a Java instance that reads this name
     * cannot load the class and cannot lead the job. */
    {"BALANCED", NULL, NULL, "io.ejob.sharding.BalancedShardingStrategy", ej_sharding_balanced,
     true},
};
#define N_BUILTINS (sizeof(builtins) / sizeof(builtins[0]))

/* Java packages the class names appear under in jobShardingStrategyClass. */
static const char *const java_packages[] = {
    "com.dangdang.ddframe.job.lite.api.strategy.impl.",
    "io.elasticjob.lite.api.strategy.impl.",
};
#define N_PACKAGES (sizeof(java_packages) / sizeof(java_packages[0]))

struct custom {
    char name[EJ_SHARDING_NAME_MAX];
    ej_sharding_fn fn;
    void *user;
};

static ej__mutex registry_lock = EJ__MUTEX_INITIALIZER;
static struct custom *customs;
static size_t n_customs, cap_customs;

static void set_err(char *err, size_t err_len, const char *fmt, ...) EJ_PRINTF(3, 4);
static void set_err(char *err, size_t err_len, const char *fmt, ...)
{
    if (err == NULL || err_len == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, err_len, fmt, ap);
    va_end(ap);
}

static const struct builtin *find_builtin(const char *name)
{
    if (name == NULL || name[0] == '\0')
        return &builtins[0];
    for (size_t i = 0; i < N_BUILTINS; i++) {
        const struct builtin *b = &builtins[i];
        if (strcasecmp(name, b->name) == 0 || (b->alias && strcasecmp(name, b->alias) == 0) ||
            (b->full_class && strcmp(name, b->full_class) == 0))
            return b;
        if (b->java_class == NULL)
            continue;
        for (size_t p = 0; p < N_PACKAGES; p++) {
            size_t plen = strlen(java_packages[p]);
            if (strncmp(name, java_packages[p], plen) == 0 &&
                strcmp(name + plen, b->java_class) == 0)
                return b;
        }
    }
    return NULL;
}

/* Caller holds registry_lock. */
static struct custom *find_custom(const char *name)
{
    EJ_ASSERT_HELD(&registry_lock);
    for (size_t i = 0; i < n_customs; i++)
        if (strcmp(customs[i].name, name) == 0)
            return &customs[i];
    return NULL;
}

int ej_sharding_find(const char *name, ej_sharding_strategy *out, char *err, size_t err_len)
{
    if (out == NULL) {
        set_err(err, err_len, "no output given for sharding strategy lookup");
        return EJ_EINVAL;
    }
    const struct builtin *b = find_builtin(name);
    if (b != NULL) {
        memset(out, 0, sizeof(*out));
        snprintf(out->name, sizeof(out->name), "%s", b->name);
        out->fn = b->fn;
        out->user = NULL;
        out->builtin = true;
        out->namespace_load = b->namespace_load;
        return 0;
    }
    int rc = EJ_ENOTFOUND;
    ej__mutex_lock(&registry_lock);
    struct custom *c = find_custom(name);
    if (c != NULL) {
        memset(out, 0, sizeof(*out));
        memcpy(out->name, c->name, sizeof(out->name));
        out->fn = c->fn;
        out->user = c->user;
        out->builtin = false;
        rc = 0;
    }
    ej__mutex_unlock(&registry_lock);
    if (rc != 0)
        set_err(err, err_len, "unknown sharding strategy \"%s\"", name);
    return rc;
}

int ej_sharding_register(const char *name, ej_sharding_fn fn, void *user)
{
    if (name == NULL || fn == NULL || name[0] == '\0' || strlen(name) >= EJ_SHARDING_NAME_MAX ||
        find_builtin(name) != NULL)
        return EJ_EINVAL;
    int rc = 0;
    ej__mutex_lock(&registry_lock);
    struct custom *c = find_custom(name);
    if (c == NULL) {
        if (n_customs == cap_customs) {
            size_t cap = cap_customs ? cap_customs * 2 : 8;
            struct custom *grown = realloc(customs, cap * sizeof(*grown));
            if (grown == NULL) {
                rc = EJ_ENOMEM;
                goto out_unlock;
            }
            customs = grown;
            cap_customs = cap;
        }
        c = &customs[n_customs++];
        memset(c, 0, sizeof(*c));
        memcpy(c->name, name, strlen(name) + 1);
    }
    c->fn = fn;
    c->user = user;
out_unlock:
    ej__mutex_unlock(&registry_lock);
    return rc;
}

int ej_sharding_unregister(const char *name)
{
    if (name == NULL)
        return EJ_EINVAL;
    int rc = EJ_ENOTFOUND;
    ej__mutex_lock(&registry_lock);
    struct custom *c = find_custom(name);
    if (c != NULL) {
        size_t i = (size_t)(c - customs);
        memmove(&customs[i], &customs[i + 1], (n_customs - i - 1) * sizeof(*customs));
        n_customs--;
        rc = 0;
    }
    ej__mutex_unlock(&registry_lock);
    return rc;
}
