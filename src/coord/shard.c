/*
 * The sharding service (ElasticJob's ShardingService.shardingIfNecessary),
 * with bounded waits and transactions split to fit ZooKeeper's request
 * size limit.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "coord/internal.h"
#include "ejob/config.h"
#include "ejob/error.h"
#include "ejob/log.h"
#include "ejob/sharding.h"

#define MOD "coord"
#define CHUNK_BYTES_DEFAULT (512 * 1024)
#define CHUNK_OPS_MAX 5000
/* Per-op overhead of a multi request beyond path and data (header, ACL,
 * flags), generously estimated. */
#define OP_OVERHEAD 64

/* Run the strategy named name over ids. With reg (the leader resharding),
 * a strategy that counts the namespace's load (BALANCED) reads the
 * namespace's BALANCED jobs through reg; without reg, or when that read
 * fails, it shards this job alone. */
static int assign(ej_registry *reg, const char *name, const char *job, char *const *ids, size_t n,
                  int count, const char *const *previous, const char **owners_out)
{
    ej_sharding_strategy s;
    char err[256] = "";
    if (ej_sharding_find(name, &s, err, sizeof err) != 0) {
        EJ_LOG(EJ_LOG_WARN, MOD, EJ_ECONFIG,
               "job %s: %s; sharding with the default strategy (AVERAGE) instead", job, err);
        if (ej_sharding_find(NULL, &s, NULL, 0) != 0)
            return EJ_ESHARDING;
    }
    int *own = count > 0 ? malloc((size_t)count * sizeof *own) : NULL;
    if (count > 0 && own == NULL)
        return EJ_ENOMEM;
    int rc = EJ_EAGAIN;
    if (reg != NULL && s.namespace_load) {
        rc = ej__balance_ns_assign(reg, job, ids, n, count, previous, own);
        if (rc != 0)
            EJ_LOG(EJ_LOG_WARN, MOD, rc,
                   "job %s: cannot read the namespace's %s jobs (%s); sharding this job alone", job,
                   s.name, ej_strerror(rc));
    }
    if (rc != 0)
        rc = ej_sharding_run(&s, (const char *const *)ids, n, job, count, previous, own, err,
                             sizeof err);
    if (rc != 0) {
        EJ_LOG(EJ_LOG_ERROR, MOD, rc, "job %s: sharding strategy %s failed: %s", job, s.name, err);
        free(own);
        return rc;
    }
    for (int i = 0; i < count; i++)
        owners_out[i] = own[i] >= 0 ? ids[own[i]] : NULL;
    free(own);
    return 0;
}

int ej__shard_assign(const char *name, const char *job, char *const *ids, size_t n, int count,
                     const char *const *previous, const char **owners_out)
{
    return assign(NULL, name, job, ids, n, count, previous, owners_out);
}

/* ------------------------------------------------------------------------ */
/* Chunked writer                                                             */

struct opbuf {
    struct ej_reg_op *ops;
    char **paths; /* owned, parallel to ops */
    size_t n, cap;
    size_t bytes;
};

static int op_add(struct opbuf *b, ej_reg_op_type type, char *path, const char *data,
                  ej_reg_mode mode)
{
    if (path == NULL)
        return EJ_ENOMEM;
    if (b->n == b->cap) {
        size_t nc = b->cap ? b->cap * 2 : 256;
        struct ej_reg_op *o = realloc(b->ops, nc * sizeof *o);
        if (o == NULL) {
            free(path);
            return EJ_ENOMEM;
        }
        b->ops = o;
        char **p = realloc(b->paths, nc * sizeof *p);
        if (p == NULL) {
            free(path);
            return EJ_ENOMEM;
        }
        b->paths = p;
        b->cap = nc;
    }
    struct ej_reg_op *op = &b->ops[b->n];
    memset(op, 0, sizeof *op);
    op->type = type;
    op->path = path;
    op->data = data;
    op->len = data ? strlen(data) : 0;
    op->mode = mode;
    op->version = -1;
    b->paths[b->n] = path;
    b->n++;
    b->bytes += strlen(path) + op->len + OP_OVERHEAD;
    return 0;
}

static void ops_clear(struct opbuf *b)
{
    for (size_t i = 0; i < b->n; i++)
        free(b->paths[i]);
    b->n = 0;
    b->bytes = 0;
}

static void ops_free(struct opbuf *b)
{
    ops_clear(b);
    free(b->ops);
    free(b->paths);
}

/* Apply ops one by one, mending what a stale view got wrong: a create of
 * an existing node becomes a set, a set of a missing node a create, a
 * delete of a missing node is done already. */
static int apply_one_by_one(ej_registry *reg, struct opbuf *b, size_t from, size_t to)
{
    for (size_t i = from; i < to; i++) {
        struct ej_reg_op *op = &b->ops[i];
        int rc = 0;
        switch (op->type) {
        case EJ_REG_OP_CREATE:
            rc = ej_registry_create_node(reg, op->path, op->data, op->len, op->mode,
                                         EJ_REG_CREATE_PARENTS, NULL);
            if (rc == EJ_ENODEEXISTS)
                rc = ej_registry_set(reg, op->path, op->data, op->len, -1, NULL);
            break;
        case EJ_REG_OP_SET:
            rc = ej_registry_persist(reg, op->path, op->data, op->len);
            break;
        case EJ_REG_OP_DELETE:
            rc = ej_registry_delete(reg, op->path, -1);
            if (rc == EJ_ENOTEMPTY)
                rc = ej_registry_delete_recursive(reg, op->path);
            if (rc == EJ_ENONODE)
                rc = 0;
            break;
        case EJ_REG_OP_CHECK:
            break;
        }
        if (rc != 0) {
            EJ_LOG(EJ_LOG_WARN, MOD, rc, "sharding write %s: %s", op->path,
                   ej_registry_errmsg(reg));
            return rc;
        }
    }
    return 0;
}

/* Commit ops[from..to) as one transaction, repairing on failure. */
static int commit(ej_registry *reg, struct opbuf *b, size_t from, size_t to)
{
    if (to <= from)
        return 0;
    size_t failed = 0;
    int rc = ej_registry_multi(reg, b->ops + from, to - from, &failed);
    if (rc == 0)
        return 0;
    if (rc == EJ_ECONNLOSS || rc == EJ_ESESSIONEXPIRED || rc == EJ_ECLOSED)
        return rc;
    EJ_LOG(EJ_LOG_INFO, MOD, rc,
           "sharding transaction of %zu ops failed at %s (%s); applying "
           "them one by one",
           to - from, failed < to - from ? b->ops[from + failed].path : "?",
           ej_registry_errmsg(reg));
    return apply_one_by_one(reg, b, from, to);
}

/* One resharding's writes: the operations not yet committed, in chunks. */
struct shard_writer {
    ej_registry *reg;
    ej__view *v;
    const char *job;
    size_t max_bytes;
    struct opbuf b;
    size_t committed; /* operations committed in earlier chunks */
};

/* The first sharding of the job: sharding/ itself may be missing (a
 * transaction cannot create parents). */
static int ensure_sharding_dir(struct shard_writer *w)
{
    char *dir = ej_layout_path_dup(w->job, EJ_LAYOUT_NODE_SHARDING, 0, NULL);
    int rc = dir ? ej_registry_create_node(w->reg, dir, NULL, 0, EJ_REG_PERSISTENT,
                                           EJ_REG_CREATE_PARENTS, NULL)
                 : EJ_ENOMEM;
    free(dir);
    return rc == EJ_ENODEEXISTS ? 0 : rc;
}

/* Commits the chunk when it is full: chunks are committed as they fill. */
static int flush_if_full(struct shard_writer *w)
{
    if (w->b.bytes < w->max_bytes && w->b.n < CHUNK_OPS_MAX)
        return 0;
    int rc = commit(w->reg, &w->b, 0, w->b.n);
    if (rc != 0)
        return rc;
    w->committed += w->b.n;
    ops_clear(&w->b);
    return 0;
}

static int add_item_op(struct shard_writer *w, ej_reg_op_type type, ej_layout_node node,
                       int item, const char *data)
{
    return op_add(&w->b, type, ej_layout_path_dup(w->job, node, item, NULL), data,
                  type == EJ_REG_OP_CREATE ? EJ_REG_PERSISTENT : 0);
}

/* Step 1: items at or above the new count go, with their subtree. */
static int drop_items_from(struct shard_writer *w, const int *present, size_t npresent, int count)
{
    for (size_t i = 0; i < npresent; i++) {
        int item = present[i];
        if (item < count)
            continue;
        struct ej__view_item it;
        if (ej__view_get(w->v, item, &it) != 0)
            continue;
        bool has_inst = it.owner != NULL;
        bool has_mis = it.misfire > 0, has_dis = it.disabled > 0;
        ej__view_item_fini(&it);
        int rc = 0;
        if (has_inst)
            rc = add_item_op(w, EJ_REG_OP_DELETE, EJ_LAYOUT_NODE_ITEM_INSTANCE, item, NULL);
        if (rc == 0 && has_mis)
            rc = add_item_op(w, EJ_REG_OP_DELETE, EJ_LAYOUT_NODE_ITEM_MISFIRE, item, NULL);
        if (rc == 0 && has_dis)
            rc = add_item_op(w, EJ_REG_OP_DELETE, EJ_LAYOUT_NODE_ITEM_DISABLED, item, NULL);
        if (rc == 0)
            rc = add_item_op(w, EJ_REG_OP_DELETE, EJ_LAYOUT_NODE_ITEM, item, NULL);
        if (rc == 0)
            rc = flush_if_full(w);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* Step 2: items 0..count-1 with their owners; unchanged ones cost nothing. */
static int write_owners(struct shard_writer *w, int count, const char *const *owners)
{
    for (int item = 0; item < count; item++) {
        struct ej__view_item it;
        bool present_now = ej__view_get(w->v, item, &it) == 0;
        const char *want = owners[item];
        int rc = 0;
        if (!present_now) {
            rc = add_item_op(w, EJ_REG_OP_CREATE, EJ_LAYOUT_NODE_ITEM, item, "");
            if (rc == 0 && want)
                rc = add_item_op(w, EJ_REG_OP_CREATE, EJ_LAYOUT_NODE_ITEM_INSTANCE, item, want);
        } else {
            if (want && it.owner == NULL)
                rc = add_item_op(w, EJ_REG_OP_CREATE, EJ_LAYOUT_NODE_ITEM_INSTANCE, item, want);
            else if (want && strcmp(want, it.owner) != 0)
                rc = add_item_op(w, EJ_REG_OP_SET, EJ_LAYOUT_NODE_ITEM_INSTANCE, item, want);
            else if (!want && it.owner != NULL)
                rc = add_item_op(w, EJ_REG_OP_DELETE, EJ_LAYOUT_NODE_ITEM_INSTANCE, item, NULL);
            ej__view_item_fini(&it);
        }
        if (rc == 0)
            rc = flush_if_full(w);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* Step 3, the last transaction: ElasticJob's check("/"), the rest of the
 * owners, then the two deletes that tell readers the sharding is complete.
 * A failed transaction is repaired op by op, the flags still last. */
static int commit_last(struct shard_writer *w, int count)
{
    struct opbuf *b = &w->b;
    size_t nitem_ops = b->n;
    int rc = op_add(b, EJ_REG_OP_CHECK, strdup("/"), NULL, 0);
    if (rc == 0)
        rc = add_item_op(w, EJ_REG_OP_DELETE, EJ_LAYOUT_NODE_SHARDING_NECESSARY, 0, NULL);
    if (rc == 0)
        rc = add_item_op(w, EJ_REG_OP_DELETE, EJ_LAYOUT_NODE_SHARDING_PROCESSING, 0, NULL);
    if (rc != 0)
        return rc;
    /* Move the check to the front, as ElasticJob orders it. */
    struct ej_reg_op chk = b->ops[nitem_ops];
    char *chkp = b->paths[nitem_ops];
    memmove(b->ops + 1, b->ops, nitem_ops * sizeof *b->ops);
    memmove(b->paths + 1, b->paths, nitem_ops * sizeof *b->paths);
    b->ops[0] = chk;
    b->paths[0] = chkp;
    size_t failed = 0;
    rc = ej_registry_multi(w->reg, b->ops, b->n, &failed);
    if (rc != 0 && rc != EJ_ECONNLOSS && rc != EJ_ESESSIONEXPIRED && rc != EJ_ECLOSED) {
        EJ_LOG(EJ_LOG_INFO, MOD, rc, "final sharding transaction failed at %s (%s); repairing",
               failed < b->n ? b->ops[failed].path : "?", ej_registry_errmsg(w->reg));
        rc = apply_one_by_one(w->reg, b, 1, 1 + nitem_ops);
        if (rc == 0) {
            /* Only now may readers see the flags go. */
            rc = ej_registry_multi(w->reg, b->ops + 1 + nitem_ops, 2, NULL);
            if (rc != 0)
                rc = apply_one_by_one(w->reg, b, 1 + nitem_ops, b->n);
        }
    }
    if (rc == 0)
        EJ_LOG(EJ_LOG_DEBUG, MOD, 0, "job %s: sharding of %d items written (%zu ops)", w->job,
               count, w->committed + b->n);
    return rc;
}

int ej__shard_write(ej__coord *c, int count, const char *const *owners, size_t max_bytes)
{
    if (c == NULL || count < 0 || (count > 0 && owners == NULL))
        return EJ_EINVAL;
    char *jobname = strdup(ej__coord_job_name(c));
    if (jobname == NULL)
        return EJ_ENOMEM;
    struct shard_writer w = {.reg = ej__coord_registry(c),
                             .v = ej__coord_view(c),
                             .job = jobname,
                             .max_bytes = max_bytes ? max_bytes : CHUNK_BYTES_DEFAULT};
    int *present = NULL;
    size_t npresent = 0;
    int rc = ej__view_items(w.v, &present, &npresent);
    if (rc == 0 && npresent == 0)
        rc = ensure_sharding_dir(&w);
    if (rc == 0)
        rc = drop_items_from(&w, present, npresent, count);
    if (rc == 0)
        rc = write_owners(&w, count, owners);
    if (rc == 0)
        rc = commit_last(&w, count);
    ops_free(&w.b);
    free(present);
    free(jobname);
    return rc;
}

/* ------------------------------------------------------------------------ */

/* How long a leader naming no live instance is given to register it. */
#define STALE_LEADER_MS 1000

/* Wait until neither necessary nor processing exists or this instance
 * becomes the leader. Returns 0, 1 (now leader) or EJ_ETIMEDOUT. */
static int wait_for_leader_sharding(ej__coord *c, int64_t deadline)
{
    bool logged = false;
    int64_t start = ej__mono_ms();
    int64_t stale_since = 0;
    uint64_t seq = ej__coord_change_seq(c);
    for (;;) {
        if (!ej__coord_necessary(c) && !ej__coord_processing(c))
            return 0;
        if (ej__coord_is_leader(c))
            return 1;
        /* A leader that is no live instance never reshards. Java elects
         * before it creates its instance node, so a leader is taken as
         * stale only after STALE_LEADER_MS. */
        if (!ej__coord_leader_stale(c)) {
            stale_since = 0;
        } else if (stale_since == 0) {
            stale_since = ej__mono_ms();
        } else if (ej__mono_ms() - stale_since >= STALE_LEADER_MS) {
            stale_since = 0;
            ej__coord_heal_leader(c);
            if (ej__coord_is_leader(c))
                return 1;
        }
        if (ej__coord_stopped(c))
            return EJ_ESTOPPED;
        if (!logged && ej__mono_ms() - start > 1000) {
            logged = true;
            EJ_LOG(EJ_LOG_INFO, MOD, 0,
                   "job %s: instance %s waits for the leader to finish sharding",
                   ej__coord_job_name(c), ej__coord_instance_id(c));
        }
        if (!ej__coord_wait_change(c, &seq, deadline)) {
            bool still = ej__coord_necessary(c) || ej__coord_processing(c);
            if (!still)
                return 0;
            /* The fire does not run: the runtime counts and reports it
             * (reason leader-wait) with a rate-limited warning, so this
             * line, one per fire, is for debugging. */
            EJ_LOG(EJ_LOG_DEBUG, MOD, EJ_ETIMEDOUT,
                   "job %s: waited %" PRId64 " ms for the leader to reshard "
                   "(leader/sharding/necessary or processing still there); this fire does not run",
                   ej__coord_job_name(c), ej__mono_ms() - start);
            return EJ_ETIMEDOUT;
        }
    }
}

/* How many items a session other than sess runs now, read from ZooKeeper
 * (no instance watches running nodes: view.c): one round trip for all the
 * items. 0 when the read failed (the resharding goes on: conditional
 * running nodes still keep an item from running twice). */
static size_t running_elsewhere(ej__coord *c, const char *job, int64_t sess)
{
    int *items = NULL;
    size_t n = 0;
    if (ej__view_items(ej__coord_view(c), &items, &n) != 0 || n == 0) {
        free(items);
        return 0;
    }
    struct ej_reg_read *rd = calloc(n, sizeof *rd);
    bool ok = rd != NULL;
    for (size_t i = 0; ok && i < n; i++)
        ok = (rd[i].path = ej_layout_path_dup(job, EJ_LAYOUT_NODE_ITEM_RUNNING, items[i], NULL));
    ok = ok && ej_registry_read_many(ej__coord_registry(c), rd, n, false) == 0;
    size_t k = 0;
    for (size_t i = 0; ok && i < n; i++)
        if (rd[i].result == 0 && rd[i].stat.ephemeral_owner != sess)
            k++;
    for (size_t i = 0; rd != NULL && i < n; i++)
        free((char *)rd[i].path);
    free(rd);
    free(items);
    return k;
}

#define RUNNING_POLL_MS 250

/* Waits for items other instances are running: resharding under them
 * makes their new owners skip them (their running nodes stay until they
 * end: never twice at once) and run them as misfires later. At most half
 * the wait bound: the followers wait for this resharding, from the same
 * fire time, for the bound, and must not give their fires up (leader-wait)
 * while this leader works. The leader stops waiting when it leaves. The
 * running nodes are read again every RUNNING_POLL_MS (as Java's leader
 * polls them), not watched: a watch would cost every member reads at every
 * fire of every other member. */
static void wait_for_running_items(ej__coord *c, const char *job, int64_t sess, int64_t deadline)
{
    int64_t wstart = ej__mono_ms();
    int64_t run_deadline = wstart + ej__coord_wait_bound(c) / 2;
    if (run_deadline > deadline)
        run_deadline = deadline;
    bool logged = false;
    size_t running = running_elsewhere(c, job, sess);
    while (running > 0 && ej__mono_ms() < run_deadline && ej__coord_is_leader(c)) {
        if (!logged && ej__mono_ms() - wstart > 1000) {
            logged = true;
            EJ_LOG(EJ_LOG_INFO, MOD, 0, "job %s: waiting for %zu running items before resharding",
                   job, running);
        }
        int64_t next = ej__mono_ms() + RUNNING_POLL_MS;
        uint64_t seq = ej__coord_change_seq(c);
        while (ej__mono_ms() < next && ej__mono_ms() < run_deadline && ej__coord_is_leader(c))
            ej__coord_wait_change(c, &seq, next < run_deadline ? next : run_deadline);
        running = running_elsewhere(c, job, sess);
    }
    if (running > 0)
        EJ_LOG(EJ_LOG_WARN, MOD, 0,
               "job %s: resharding while items still run elsewhere (waited %" PRId64 " ms)", job,
               ej__mono_ms() - wstart);
}

/* Creates leader/sharding/processing (ephemeral), or finds it ours.
 * EJ_EBUSY when another session holds it. */
static int claim_processing(ej_registry *reg, const char *job, const char *p_proc, int64_t sess)
{
    int rc = ej_registry_create_node(reg, p_proc, NULL, 0, EJ_REG_EPHEMERAL,
                                     EJ_REG_CREATE_PARENTS, NULL);
    if (rc != EJ_ENODEEXISTS)
        return rc;
    struct ej_node_stat st;
    bool ex = false;
    if (ej_registry_exists(reg, p_proc, &ex, &st) == 0 && ex && st.ephemeral_owner != sess) {
        EJ_LOG(EJ_LOG_WARN, MOD, 0,
               "job %s: %s is held by session 0x%" PRIx64 "; not resharding now", job, p_proc,
               (uint64_t)st.ephemeral_owner);
        return EJ_EBUSY;
    }
    return 0;
}

/* The strategy's assignment of count items over ids (owners[item], borrowed
 * from ids), from the previous owners in the view, written. *tried: the
 * assignment was attempted (false: no memory to start). */
static int assign_and_write(ej__coord *c, const char *job, char **ids, size_t n, int count,
                            const char **owners, bool *tried)
{
    ej__view *v = ej__coord_view(c);
    const char **prev = calloc((size_t)count + 1, sizeof *prev);
    struct ej__view_item *items = calloc((size_t)count + 1, sizeof *items);
    *tried = prev != NULL && items != NULL;
    if (!*tried) {
        free(prev);
        free(items);
        return EJ_ENOMEM;
    }
    for (int i = 0; i < count; i++)
        if (ej__view_get(v, i, &items[i]) == 0)
            prev[i] = items[i].owner;
    char *strategy = ej__coord_strategy_name(c);
    int rc = assign(ej__coord_registry(c), strategy ? strategy : "", job, ids, n, count, prev,
                    owners);
    free(strategy);
    if (rc == 0)
        rc = ej__shard_write(c, count, owners, 0);
    for (int i = 0; i < count; i++)
        ej__view_item_fini(&items[i]);
    free(items);
    free(prev);
    return rc;
}

/* Lets the view catch up with what was just written: this instance's own
 * items are read from it right after. Polled: the check is linear in the
 * items, and every item's change would wake a condition wait. */
static void wait_view_shows(ej__coord *c, const char *job, const char **owners, int count,
                            int64_t deadline)
{
    while (!ej__view_matches(ej__coord_view(c), owners, count)) {
        if (ej__mono_ms() >= deadline) {
            EJ_LOG(EJ_LOG_WARN, MOD, EJ_ETIMEDOUT,
                   "job %s: the sharding view did not show the new assignment in time", job);
            return;
        }
        ej__sleep_ms(count > 10000 ? 50 : 5);
    }
}

/* An instance that joined or left, or a server disabled or enabled, while
 * this sharding ran may have set the flag before the last transaction
 * deleted it: shard again at the next fire if the instances on enabled
 * servers are no longer those just used. */
static void recheck_instances(ej__coord *c, const char *job, char **ids, size_t n)
{
    char **now_ids = NULL;
    size_t now_n = 0;
    if (ej__coord_shard_instances(c, &now_ids, &now_n) != 0)
        return;
    bool same = now_n == n;
    for (size_t i = 0; same && i < n; i++)
        same = strcmp(now_ids[i], ids[i]) == 0;
    if (!same) {
        EJ_LOG(EJ_LOG_INFO, MOD, 0,
               "job %s: instances changed while sharding; resharding at the next fire", job);
        ej__coord_set_necessary(c);
    }
    ej_registry_free_names(now_ids);
}

static int leader_shard(ej__coord *c, int64_t deadline)
{
    ej_registry *reg = ej__coord_registry(c);
    int64_t sess = ej_registry_session_id(reg);
    struct ej_job_config cfg;
    int rc = ej__coord_config(c, &cfg);
    if (rc != 0)
        return rc;
    char *p_proc = ej_layout_path_dup(cfg.job_name, EJ_LAYOUT_NODE_SHARDING_PROCESSING, 0, NULL);
    char **ids = NULL;
    size_t n = 0;
    const char **owners = NULL;
    int count = cfg.sharding_total_count;
    if (p_proc == NULL) {
        rc = EJ_ENOMEM;
        goto out;
    }
    wait_for_running_items(c, cfg.job_name, sess, deadline);
    rc = claim_processing(reg, cfg.job_name, p_proc, sess);
    if (rc == 0)
        rc = ej__coord_shard_instances(c, &ids, &n);
    if (rc != 0)
        goto out;
    owners = calloc((size_t)count + 1, sizeof *owners);
    bool tried = false;
    rc = owners ? assign_and_write(c, cfg.job_name, ids, n, count, owners, &tried) : EJ_ENOMEM;
    if (rc != 0 && !tried)
        goto out;
    if (rc != 0) {
        /* Leave processing to the session's end only if we cannot delete
         * it: readers must not wait for a dead attempt. */
        ej_registry_delete(reg, p_proc, -1);
        goto out;
    }
    EJ_LOG(EJ_LOG_INFO, MOD, 0, "job %s: resharded %d items over %zu instances", cfg.job_name,
           count, n);
    ej__coord_count_reshard(c);
    wait_view_shows(c, cfg.job_name, owners, count, deadline);
    recheck_instances(c, cfg.job_name, ids, n);
out:
    free(owners);
    ej_registry_free_names(ids);
    free(p_proc);
    ej_job_config_fini(&cfg);
    return rc;
}

/* Reshard when the flag is one this leader has not resharded for yet: the
 * other resharding (a fire's, a busy leader's task) may just have done it
 * while the cache still shows the flag. Shard lock held (checked there). */
static int shard_if_flag_new(ej__coord *c, int64_t deadline)
{
    int64_t flag = 0;
    if (!ej__coord_shard_flag_new(c, &flag))
        return 0;
    int rc = leader_shard(c, deadline);
    if (rc == 0)
        ej__coord_shard_flag_consumed(c, flag);
    return rc;
}

int ej__shard_if_necessary(ej__coord *c)
{
    if (c == NULL)
        return EJ_EINVAL;
    bool need = ej__coord_necessary(c);
    if (!need)
        return 0;
    char **ids = NULL;
    size_t n = 0;
    int rc = ej__coord_available_instances(c, &ids, &n);
    ej_registry_free_names(ids);
    if (rc != 0 || n == 0)
        return rc;
    int bound = ej__coord_wait_bound(c);
    int64_t deadline = ej__mono_ms() + bound;
    if (!ej__coord_is_leader_until_block(c, bound)) {
        rc = wait_for_leader_sharding(c, deadline);
        if (rc != 1)
            return rc;
    }
    /* Leader: one resharding at a time (a fire's, a busy leader's task);
     * check the flag again under it (the other may have sharded). */
    ej__coord_shard_lock(c);
    rc = shard_if_flag_new(c, deadline + bound);
    ej__coord_shard_unlock(c);
    return rc;
}

static void busy_shard_task(ej__coord *c, void *arg)
{
    (void)arg;
    /* Unclaimed first: a flag set again while this one shards gets a task
     * of its own (the lock above keeps them apart). */
    ej__coord_shard_unclaim(c);
    if (!ej__coord_is_leader(c) || ej__coord_stopped(c))
        return;
    int rc = ej__shard_if_necessary(c);
    if (rc != 0)
        EJ_LOG(EJ_LOG_WARN, MOD, rc,
               "job %s: resharding while the job runs failed (%s); the next fire tries again",
               ej__coord_job_name(c), ej_strerror(rc));
}

void ej__coord_set_busy(ej__coord *c, bool busy)
{
    ej__coord_note_busy(c, busy);
    /* A fire that runs no resharding (a failover run) must not keep one
     * waiting for its end. */
    if (busy)
        ej__shard_when_busy(c);
}

void ej__shard_when_busy(ej__coord *c)
{
    if (c == NULL || !ej__coord_busy(c) || !ej__coord_is_leader(c))
        return;
    bool need = ej__coord_necessary(c);
    if (!need || !ej__coord_shard_claim(c))
        return;
    EJ_LOG(EJ_LOG_DEBUG, MOD, 0, "job %s: resharding now, while this leader's job runs",
           ej__coord_job_name(c));
    if (ej__coord_post_pool(c, busy_shard_task, NULL) != 0)
        ej__coord_shard_unclaim(c);
}
