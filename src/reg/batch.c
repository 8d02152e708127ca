/*
 * Reads sent together (ej_registry_read_many): every request goes out
 * before any answer is waited for. The server answers a session's requests
 * in the order they were sent, so n reads cost one round trip where n
 * synchronous calls cost n. That matters where a loaded fleet's round trip
 * is hundreds of milliseconds: a leader reading each server's state before
 * it shards, a survivor checking a crashed session's items.
 *
 * The answers come on the client's completion thread; the calling thread
 * waits for all of them (each request's context lives in the batch, which
 * outlives its last answer).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zookeeper/zookeeper.h>

#include "common/util.h"
#include "ejob/error.h"
#include "reg/internal.h"

struct batch;

struct batch_slot {
    struct batch *b;
    size_t i;
    int zrc;
    char *data;
    size_t len;
    struct Stat st;
};

struct batch {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    size_t pending; /* requests sent and not yet answered */
    bool data;
    char **full; /* absolute paths */
    struct batch_slot *slots;
    size_t n;
};

/* Completion thread: one answer in. */
static void slot_done(struct batch_slot *s, int zrc, const char *value, int value_len,
                      const struct Stat *st)
{
    if (zrc == ZOK && st != NULL)
        s->st = *st;
    if (zrc == ZOK && s->b->data) {
        size_t len = value != NULL && value_len > 0 ? (size_t)value_len : 0;
        s->data = malloc(len + 1);
        if (s->data != NULL) {
            if (len)
                memcpy(s->data, value, len);
            s->data[len] = '\0';
            s->len = len;
        } else {
            zrc = ZSYSTEMERROR;
        }
    }
    struct batch *b = s->b;
    pthread_mutex_lock(&b->mu);
    s->zrc = zrc;
    if (--b->pending == 0)
        pthread_cond_signal(&b->cv);
    pthread_mutex_unlock(&b->mu);
}

static void get_done(int rc, const char *value, int value_len, const struct Stat *st,
                     const void *arg)
{
    slot_done((struct batch_slot *)arg, rc, value, value_len, st);
}

static void exists_done(int rc, const struct Stat *st, const void *arg)
{
    slot_done((struct batch_slot *)arg, rc, NULL, 0, st);
}

static void slots_clear(struct batch *b)
{
    for (size_t i = 0; i < b->n; i++) {
        free(b->slots[i].data);
        b->slots[i] = (struct batch_slot){.b = b, .i = i, .zrc = ZCONNECTIONLOSS};
    }
}

/* Send every read of b (count_first: count the first too; run_zk counts
 * the one of its own attempt). Returns the first error of a send; the
 * reads sent before it are answered. */
static int batch_send(ej_registry *reg, zhandle_t *zh, struct batch *b, bool count_first)
{
    slots_clear(b);
    int zrc = ZOK;
    pthread_mutex_lock(&b->mu);
    for (size_t i = 0; i < b->n && zrc == ZOK; i++) {
        if (i > 0 || count_first)
            ej__reg_count(reg);
        b->pending++;
        zrc = b->data ? zoo_aget(zh, b->full[i], 0, get_done, &b->slots[i])
                      : zoo_aexists(zh, b->full[i], 0, exists_done, &b->slots[i]);
        if (zrc != ZOK)
            b->pending--; /* not sent: no answer will come */
    }
    pthread_mutex_unlock(&b->mu);
    return zrc;
}

/* Wait for every answer of what batch_send sent; a connection loss among
 * them, else ZOK. */
static int batch_wait(struct batch *b)
{
    pthread_mutex_lock(&b->mu);
    while (b->pending > 0)
        pthread_cond_wait(&b->cv, &b->mu);
    pthread_mutex_unlock(&b->mu);
    for (size_t i = 0; i < b->n; i++)
        if (ej__reg_zk_is_connloss(b->slots[i].zrc))
            return b->slots[i].zrc;
    return ZOK;
}

/* One attempt: send every read, wait for every answer. A lost connection
 * answers each read sent with a connection loss, which repeats them all. */
static int batch_attempt(ej_registry *reg, zhandle_t *zh, void *arg)
{
    struct batch *b = arg;
    int zrc = batch_send(reg, zh, b, false);
    int wrc = batch_wait(b);
    return zrc != ZOK ? zrc : wrc;
}

/* Each read's outcome into reads (the batch's data moves there). */
static void batch_results(ej_registry *reg, struct batch *b, struct ej_reg_read *reads)
{
    const char *op = b->data ? "get" : "exists";
    for (size_t i = 0; i < b->n; i++) {
        struct batch_slot *s = &b->slots[i];
        struct ej_reg_read *r = &reads[i];
        r->data = NULL;
        r->len = 0;
        memset(&r->stat, 0, sizeof r->stat);
        if (s->zrc == ZOK) {
            r->result = 0;
            ej__reg_stat_from_zk(&r->stat, &s->st);
            r->data = s->data;
            r->len = s->len;
            s->data = NULL;
        } else if (s->zrc == ZNONODE) {
            r->result = EJ_ENONODE;
        } else {
            r->result = ej__reg_op_fail(reg, op, r->path, s->zrc);
        }
    }
}

static void batch_fini(struct batch *b)
{
    for (size_t i = 0; b->full != NULL && i < b->n; i++)
        free(b->full[i]);
    free(b->full);
    for (size_t i = 0; b->slots != NULL && i < b->n; i++)
        free(b->slots[i].data);
    free(b->slots);
    pthread_cond_destroy(&b->cv);
    pthread_mutex_destroy(&b->mu);
}

int ej_registry_read_many(ej_registry *reg, struct ej_reg_read *reads, size_t n, bool data)
{
    const char *op = data ? "get" : "exists";
    if (reads == NULL && n > 0)
        return ej__reg_fail(EJ_EINVAL, "read_many: reads is NULL");
    if (n == 0)
        return 0;
    struct batch b = {.data = data, .n = n};
    pthread_mutex_init(&b.mu, NULL);
    pthread_cond_init(&b.cv, NULL);
    b.full = calloc(n, sizeof *b.full);
    b.slots = calloc(n, sizeof *b.slots);
    int rc = b.full && b.slots ? 0 : ej__reg_fail(-ENOMEM, "read_many: out of memory");
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = ej__reg_resolve(reg, op, reads[i].path, false, &b.full[i]);
    if (rc == 0) {
        int zrc = ej__reg_run_zk(reg, true, batch_attempt, &b, NULL);
        if (zrc == ZOK)
            batch_results(reg, &b, reads);
        else
            rc = ej__reg_op_fail(reg, op, reads[0].path, zrc);
    }
    batch_fini(&b);
    return rc;
}

void ej_registry_reads_fini(struct ej_reg_read *reads, size_t n)
{
    for (size_t i = 0; reads != NULL && i < n; i++) {
        free(reads[i].data);
        reads[i].data = NULL;
    }
}

/* ------------------------------------------------------------------------ */
/* A create with a listing right behind it                                   */

struct create_list {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int pending;
    const char *full, *dir_full;
    int flags;
    int create_zrc, list_zrc;
    char *created; /* absolute */
    char **names;
    size_t count;
    struct batch *after; /* reads sent behind the two, or NULL */
};

static void created_done(int rc, const char *value, const void *arg)
{
    struct create_list *cl = (struct create_list *)arg;
    char *copy = rc == ZOK && value != NULL ? strdup(value) : NULL;
    pthread_mutex_lock(&cl->mu);
    cl->create_zrc = rc == ZOK && copy == NULL ? ZSYSTEMERROR : rc;
    cl->created = copy;
    if (--cl->pending == 0)
        pthread_cond_signal(&cl->cv);
    pthread_mutex_unlock(&cl->mu);
}

static void listed_done(int rc, const struct String_vector *sv, const void *arg)
{
    struct create_list *cl = (struct create_list *)arg;
    char **names = NULL;
    size_t n = rc == ZOK && sv != NULL && sv->count > 0 ? (size_t)sv->count : 0;
    if (rc == ZOK && (names = ej__reg_copy_names(sv ? sv->data : NULL, n)) == NULL)
        rc = ZSYSTEMERROR;
    pthread_mutex_lock(&cl->mu);
    cl->list_zrc = rc;
    cl->names = names;
    cl->count = n;
    if (--cl->pending == 0)
        pthread_cond_signal(&cl->cv);
    pthread_mutex_unlock(&cl->mu);
}

static int create_list_attempt(ej_registry *reg, zhandle_t *zh, void *arg)
{
    struct create_list *cl = arg;
    free(cl->created); /* what an earlier attempt left */
    cl->created = NULL;
    ej_registry_free_names(cl->names);
    cl->names = NULL;
    cl->list_zrc = ZCONNECTIONLOSS;
    pthread_mutex_lock(&cl->mu);
    cl->pending = 1;
    int zrc = zoo_acreate(zh, cl->full, "", 0, ej__reg_acl(reg), cl->flags, created_done, cl);
    if (zrc != ZOK) {
        cl->pending = 0;
        pthread_mutex_unlock(&cl->mu);
        return zrc;
    }
    ej__reg_count(reg); /* run_zk counted the create */
    cl->pending++;
    if (zoo_aget_children(zh, cl->dir_full, 0, listed_done, cl) != ZOK) {
        cl->pending--;
        cl->list_zrc = ZCONNECTIONLOSS;
    }
    /* Sent behind the listing, answered after it: a caller that finds its
     * node the lowest in the listing holds the latch for these reads. */
    if (cl->after != NULL)
        batch_send(reg, zh, cl->after, true);
    while (cl->pending > 0)
        pthread_cond_wait(&cl->cv, &cl->mu);
    pthread_mutex_unlock(&cl->mu);
    if (cl->after != NULL)
        batch_wait(cl->after);
    return cl->create_zrc;
}

int ej__reg_create_then_list(ej_registry *reg, const char *path, ej_reg_mode mode, const char *dir,
                             bool make_parents, char **actual, char ***names, size_t *count,
                             struct ej_reg_read *after, size_t nafter)
{
    *actual = NULL;
    *names = NULL;
    *count = 0;
    for (size_t i = 0; i < nafter; i++)
        after[i] = (struct ej_reg_read){.path = after[i].path, .result = EJ_ECONNLOSS};
    int flags = ej__reg_zk_mode(mode);
    if (flags < 0)
        return ej__reg_fail(EJ_EINVAL, "create %s: unknown mode %d", path, (int)mode);
    bool seq = mode == EJ_REG_PERSISTENT_SEQUENTIAL || mode == EJ_REG_EPHEMERAL_SEQUENTIAL;
    char *full = NULL, *dir_full = NULL;
    int rc = ej__reg_resolve(reg, "create", path, seq, &full);
    if (rc == 0)
        rc = ej__reg_resolve(reg, "children", dir, false, &dir_full);
    struct create_list cl = {
        .full = full, .dir_full = dir_full, .flags = flags, .list_zrc = ZCONNECTIONLOSS};
    pthread_mutex_init(&cl.mu, NULL);
    pthread_cond_init(&cl.cv, NULL);
    struct batch b = {.n = nafter};
    pthread_mutex_init(&b.mu, NULL);
    pthread_cond_init(&b.cv, NULL);
    if (rc == 0 && nafter > 0) { /* the reads are extra: without them, the two alone */
        b.full = calloc(nafter, sizeof *b.full);
        b.slots = calloc(nafter, sizeof *b.slots);
        bool ready = b.full && b.slots;
        for (size_t i = 0; i < nafter && ready; i++)
            ready = ej__reg_resolve(reg, "exists", after[i].path, false, &b.full[i]) == 0;
        cl.after = ready ? &b : NULL;
    }
    if (rc == 0) {
        /* Not retried once sent: a sequential create's lost answer leaves it
         * unknown whether the node was made (the caller looks). */
        int zrc = ej__reg_run_zk(reg, false, create_list_attempt, &cl, NULL);
        if (zrc == ZNONODE && make_parents) {
            /* A parent missing (a job's first latch, or a container that
             * Curator or an older ejob made and the server reaped): the
             * parents, then the two again. */
            zrc = ej__reg_make_parents(reg, full, false);
            if (zrc == ZOK)
                zrc = ej__reg_run_zk(reg, false, create_list_attempt, &cl, NULL);
        }
        if (zrc != ZOK) {
            rc = ej__reg_op_fail(reg, "create", path, zrc);
        } else {
            const char *rel = ej__reg_rel_path(reg, cl.created);
            *actual = strdup(rel ? rel : cl.created);
            rc = *actual ? 0 : ej__reg_fail(-ENOMEM, "create %s: out of memory", path);
        }
    }
    if (rc == 0 && cl.list_zrc == ZOK) {
        *names = cl.names;
        *count = cl.count;
        cl.names = NULL;
    } else if (rc == 0) {
        rc = ej__reg_op_fail(reg, "children", dir, cl.list_zrc);
    }
    if (rc == 0 && cl.after != NULL)
        batch_results(reg, &b, after);
    batch_fini(&b);
    ej_registry_free_names(cl.names);
    free(cl.created);
    free(full);
    free(dir_full);
    pthread_cond_destroy(&cl.cv);
    pthread_mutex_destroy(&cl.mu);
    return rc;
}
