/*
 * The nodes around item runs (ElasticJob's ExecutionService): running,
 * misfire, the clock-skew check and the items of the next run. Writes are
 * batched into transactions and conditional: creating `running` fails when
 * another instance holds the item, so a stale view never runs an item twice.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "coord/internal.h"
#include "ejob/config.h"
#include "ejob/error.h"
#include "ejob/log.h"

#define MOD "coord"

static char *item_path(ej__coord *c, int item, ej_layout_node leaf)
{
    return ej_layout_path_dup(ej__coord_job_name(c), leaf, item, NULL);
}

/* Running nodes this instance may have left behind: a create whose answer
 * was lost (it may have been applied) or a delete that failed. Left alone
 * they would make every other instance skip the item until our session
 * ends; ej__running_cleanup deletes them (only ours: same session). */
struct suspect {
    int item;
    int64_t session;
};

/* Instances this one saw leave (their instance node removed) while it
 * was registered: a fire record naming one of them is a takeover's to
 * catch up (ej__running_departed). The oldest go first. */
#define DEPARTED_MAX 64
#define DEPARTED_KEEP_MS (24 * 3600 * 1000LL)

struct departed {
    char id[EJ__ID_MAX];
    int64_t at_ms; /* wall ms the removal was seen */
};

struct ej__running_state {
    pthread_mutex_t mu;
    struct suspect *v;
    size_t n, cap;
    struct departed gone[DEPARTED_MAX];
    size_t ngone; /* entries used; once full, the oldest is replaced */
};

struct ej__running_state *ej__running_state_new(void)
{
    struct ej__running_state *s = calloc(1, sizeof *s);
    if (s)
        pthread_mutex_init(&s->mu, NULL);
    return s;
}

void ej__running_state_free(struct ej__running_state *s)
{
    if (s == NULL)
        return;
    free(s->v);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

static void suspect_add(ej__coord *c, const int *items, size_t n, int64_t session)
{
    struct ej__running_state *s = ej__coord_exec_state(c);
    if (s == NULL || session == 0)
        return;
    pthread_mutex_lock(&s->mu);
    for (size_t i = 0; i < n; i++) {
        bool dup = false;
        for (size_t j = 0; j < s->n && !dup; j++)
            dup = s->v[j].item == items[i] && s->v[j].session == session;
        if (dup)
            continue;
        if (s->n == s->cap) {
            size_t nc = s->cap ? s->cap * 2 : 8;
            struct suspect *p = realloc(s->v, nc * sizeof *p);
            if (p == NULL)
                break;
            s->v = p;
            s->cap = nc;
        }
        s->v[s->n++] = (struct suspect){items[i], session};
    }
    pthread_mutex_unlock(&s->mu);
}

void ej__running_cleanup(ej__coord *c)
{
    struct ej__running_state *s = ej__coord_exec_state(c);
    if (s == NULL)
        return;
    pthread_mutex_lock(&s->mu);
    size_t n = s->n;
    struct suspect *v = s->v;
    s->v = NULL;
    s->n = s->cap = 0;
    pthread_mutex_unlock(&s->mu);
    if (n == 0)
        return;
    ej_registry *reg = ej__coord_registry(c);
    int64_t cur = ej_registry_session_id(reg);
    for (size_t i = 0; i < n; i++) {
        if (v[i].session != cur)
            continue; /* gone with its session */
        char *p = item_path(c, v[i].item, EJ_LAYOUT_NODE_ITEM_RUNNING);
        struct ej_node_stat st;
        bool ex = false;
        int rc = p ? ej_registry_exists(reg, p, &ex, &st) : EJ_ENOMEM;
        if (rc == 0 && ex && st.ephemeral_owner == cur) {
            rc = ej_registry_delete(reg, p, st.version);
            if (rc == 0)
                EJ_LOG(EJ_LOG_INFO, MOD, 0, "job %s: deleted %s left by a lost request",
                       ej__coord_job_name(c), p);
            else if (rc == EJ_ENONODE)
                rc = 0;
        }
        free(p);
        if (rc != 0)
            suspect_add(c, &v[i].item, 1, v[i].session);
    }
    free(v);
}

/* ------------------------------------------------------------------------ */
/* Fire records                                                               */

/* The data of sharding/{n} an ejob run writes: "fired MS by ID". */
#define FIRED_FMT "fired %" PRId64 " by %s"

int ej__running_read_fired(ej__coord *c, int item, int64_t *fired_ms, char *by, size_t bylen)
{
    char *p = item_path(c, item, EJ_LAYOUT_NODE_ITEM);
    char *data = NULL;
    size_t len = 0;
    int rc = p ? ej_registry_get(ej__coord_registry(c), p, &data, &len, NULL) : EJ_ENOMEM;
    free(p);
    if (rc != 0)
        return rc;
    long long ms = 0;
    int off = 0;
    rc = EJ_ENOTFOUND;
    if (data != NULL && sscanf(data, "fired %lld by %n", &ms, &off) == 1 && off > 0 && ms > 0 &&
        data[off] != '\0' && strlen(data + off) < bylen) {
        *fired_ms = ms;
        snprintf(by, bylen, "%s", data + off);
        rc = 0;
    }
    free(data);
    return rc;
}

void ej__running_note_departed(ej__coord *c, const char *id)
{
    struct ej__running_state *s = ej__coord_exec_state(c);
    if (s == NULL || id == NULL || strlen(id) >= EJ__ID_MAX)
        return;
    int64_t now = ej__now_ms();
    pthread_mutex_lock(&s->mu);
    size_t slot = s->ngone;
    for (size_t i = 0; i < s->ngone; i++)
        if (strcmp(s->gone[i].id, id) == 0)
            slot = i;
    if (slot == DEPARTED_MAX) {
        slot = 0;
        for (size_t i = 1; i < s->ngone; i++)
            if (s->gone[i].at_ms < s->gone[slot].at_ms)
                slot = i;
    }
    snprintf(s->gone[slot].id, sizeof s->gone[slot].id, "%s", id);
    s->gone[slot].at_ms = now;
    if (slot == s->ngone)
        s->ngone++;
    pthread_mutex_unlock(&s->mu);
}

bool ej__running_departed(ej__coord *c, const char *id)
{
    struct ej__running_state *s = ej__coord_exec_state(c);
    if (s == NULL || id == NULL)
        return false;
    int64_t now = ej__now_ms();
    bool found = false;
    pthread_mutex_lock(&s->mu);
    for (size_t i = 0; i < s->ngone && !found; i++)
        found = strcmp(s->gone[i].id, id) == 0 && now - s->gone[i].at_ms < DEPARTED_KEEP_MS;
    pthread_mutex_unlock(&s->mu);
    return found;
}

bool ej__running_any_departed(ej__coord *c)
{
    struct ej__running_state *s = ej__coord_exec_state(c);
    if (s == NULL)
        return false;
    pthread_mutex_lock(&s->mu);
    bool any = s->ngone > 0;
    pthread_mutex_unlock(&s->mu);
    return any;
}

/* ------------------------------------------------------------------------ */
/* Running nodes                                                              */

/* The state of one ej__running_begin: items[i] is to be started while ok[i];
 * mine[i] marks a running node found to be ours already (created by an
 * earlier request whose answer was lost), not to be created again. */
struct begin {
    ej__coord *c;
    ej_registry *reg;
    int64_t sess;
    const int *items;
    size_t n;
    bool *ok, *mine;
    int64_t *tokens;
    char **paths;
    char **item_paths;     /* sharding/{n}, for the fire record; NULL: none */
    char *record;          /* "fired MS by ID", or NULL */
    struct ej_reg_op *ops; /* 2n + 1 */
    size_t *idx;           /* op -> item */
};

/* Our running node of an earlier request: its czxid is its token. */
static bool begin_is_mine(struct begin *b, size_t i)
{
    struct ej_node_stat est;
    bool ex = false;
    if (ej_registry_exists(b->reg, b->paths[i], &ex, &est) != 0 || !ex ||
        est.ephemeral_owner != b->sess)
        return false;
    b->mine[i] = true;
    b->tokens[i] = est.czxid;
    return true;
}

/* An item the transaction failed on (rc, the failing op's error): skip it
 * or adopt it. Returns false when the failure is not about that item. */
static bool begin_item_failed(struct begin *b, size_t i, int rc)
{
    if (rc == EJ_ENODEEXISTS && begin_is_mine(b, i))
        return true;
    if (rc != EJ_ENODEEXISTS && rc != EJ_ENONODE)
        return false;
    b->ok[i] = false;
    if (rc == EJ_ENODEEXISTS) {
        /* Running elsewhere (or still running here from an earlier fire):
         * never twice at once; run it again later. */
        EJ_LOG(EJ_LOG_INFO, MOD, 0, "job %s: item %d is still running elsewhere; marked misfire",
               ej__coord_job_name(b->c), b->items[i]);
        ej__running_set_misfire(b->c, &b->items[i], 1);
    } else {
        EJ_LOG(EJ_LOG_INFO, MOD, 0, "job %s: item %d no longer exists; skipped",
               ej__coord_job_name(b->c), b->items[i]);
    }
    return true;
}

/*
 * One transaction creating the running nodes still to be created, and
 * (with a record) setting each of their sharding/{n} to it: the fire time
 * the run covers, so that an instance taking the item over knows which
 * fire times its owner started (docs/coordination.md "Takeover"). It ends
 * with a set of the first created node to its own (empty) data: the C
 * client returns no stat for a create inside a multi (it sends no CREATE2
 * there), but does for a set, and that stat's czxid is the transaction's
 * zxid, the czxid of every node it created: the fencing token of the batch,
 * without a read. Nobody can watch the data of a node created in the same
 * transaction, so the set fires no watch; the node keeps its bytes (its
 * data version is 1). Returns 0 when done, EJ_EAGAIN to try again with the
 * items left, else the error (nothing may start).
 */
static int begin_attempt(struct begin *b)
{
    size_t k = 0;
    for (size_t i = 0; i < b->n; i++) {
        if (!b->ok[i] || b->mine[i])
            continue;
        b->ops[k] = (struct ej_reg_op){
            .type = EJ_REG_OP_CREATE, .path = b->paths[i], .mode = EJ_REG_EPHEMERAL, .version = -1};
        b->idx[k++] = i;
    }
    if (k == 0)
        return 0;
    size_t nrec = 0;
    for (size_t j = 0; b->record != NULL && j < k; j++)
        b->ops[k + nrec++] = (struct ej_reg_op){.type = EJ_REG_OP_SET,
                                                .path = b->item_paths[b->idx[j]],
                                                .data = b->record,
                                                .len = strlen(b->record),
                                                .version = -1};
    struct ej_node_stat st;
    b->ops[k + nrec] = (struct ej_reg_op){
        .type = EJ_REG_OP_SET, .path = b->paths[b->idx[0]], .version = 0, .out_stat = &st};
    size_t failed = 0;
    int rc = ej_registry_multi(b->reg, b->ops, k + nrec + 1, &failed);
    if (rc == 0) {
        EJ_ASSERT(st.czxid > 0);
        for (size_t j = 0; j < k; j++)
            b->tokens[b->idx[j]] = st.czxid;
        return 0;
    }
    /* A record's set fails only when its item is gone (NONODE). */
    if (failed >= k && failed < k + nrec)
        failed -= k;
    if (failed < k && begin_item_failed(b, b->idx[failed], rc))
        return EJ_EAGAIN;
    /* No answer, or a dead session: nothing may start. The transaction
     * may have been applied: its nodes are cleaned up later. */
    EJ_LOG(EJ_LOG_WARN, MOD, rc, "job %s: cannot register the start of items: %s",
           ej__coord_job_name(b->c), ej_registry_errmsg(b->reg));
    for (size_t i = 0; i < b->n; i++) {
        if (b->ok[i])
            suspect_add(b->c, &b->items[i], 1, b->sess);
        b->ok[i] = false;
        b->tokens[i] = 0;
    }
    return rc;
}

int ej__running_begin(ej__coord *c, const int *items, size_t n, int64_t fired_ms, bool *ok,
                   int64_t *tokens, int64_t *session_out)
{
    ej_registry *reg = ej__coord_registry(c);
    int64_t sess = ej_registry_session_id(reg);
    *session_out = sess;
    for (size_t i = 0; i < n; i++) {
        ok[i] = false;
        tokens[i] = 0;
    }
    if (n == 0)
        return 0;
    if (sess == 0)
        return EJ_ECONNLOSS;
    struct begin b = {
        .c = c, .reg = reg, .sess = sess, .items = items, .n = n, .ok = ok, .tokens = tokens};
    b.ops = calloc(2 * n + 1, sizeof *b.ops);
    b.idx = calloc(n, sizeof *b.idx);
    b.paths = calloc(n, sizeof *b.paths);
    b.mine = calloc(n, sizeof *b.mine);
    if (fired_ms > 0) {
        b.item_paths = calloc(n, sizeof *b.item_paths);
        b.record = ej__asprintf(FIRED_FMT, fired_ms, ej__coord_instance_id(c));
    }
    int rc = 0;
    if (b.ops == NULL || b.idx == NULL || b.paths == NULL || b.mine == NULL ||
        (fired_ms > 0 && (b.item_paths == NULL || b.record == NULL))) {
        rc = EJ_ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        b.paths[i] = item_path(c, items[i], EJ_LAYOUT_NODE_ITEM_RUNNING);
        if (b.item_paths)
            b.item_paths[i] = item_path(c, items[i], EJ_LAYOUT_NODE_ITEM);
        if (b.paths[i] == NULL || (b.item_paths && b.item_paths[i] == NULL)) {
            rc = EJ_ENOMEM;
            for (size_t j = 0; j < n; j++)
                ok[j] = false;
            goto out;
        }
        ok[i] = true;
    }
    /* Each failed attempt removes or adopts one item: at most n + 1. */
    while ((rc = begin_attempt(&b)) == EJ_EAGAIN)
        ;
out:
    if (b.paths)
        for (size_t i = 0; i < n; i++)
            free(b.paths[i]);
    if (b.item_paths)
        for (size_t i = 0; i < n; i++)
            free(b.item_paths[i]);
    free(b.item_paths);
    free(b.record);
    free(b.paths);
    free(b.ops);
    free(b.idx);
    free(b.mine);
    return rc;
}

/* Delete (or create) one leaf for items in one transaction; fall back to
 * one call each when the transaction fails on a node that is not in the
 * expected state. */
static int batch(ej__coord *c, const int *items, size_t n, ej_layout_node leaf, bool create)
{
    if (n == 0)
        return 0;
    ej_registry *reg = ej__coord_registry(c);
    struct ej_reg_op *ops = calloc(n, sizeof *ops);
    char **paths = calloc(n, sizeof *paths);
    int rc = 0;
    if (ops == NULL || paths == NULL) {
        rc = EJ_ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        paths[i] = item_path(c, items[i], leaf);
        if (paths[i] == NULL) {
            rc = EJ_ENOMEM;
            goto out;
        }
        ops[i] = (struct ej_reg_op){.type = create ? EJ_REG_OP_CREATE : EJ_REG_OP_DELETE,
                                    .path = paths[i],
                                    .mode = EJ_REG_PERSISTENT,
                                    .version = -1};
    }
    rc = ej_registry_multi(reg, ops, n, NULL);
    if (rc == EJ_ENODEEXISTS || rc == EJ_ENONODE || (rc != 0 && n == 1)) {
        rc = 0;
        for (size_t i = 0; i < n; i++) {
            int r =
                create ? ej_registry_create_node(reg, paths[i], NULL, 0, EJ_REG_PERSISTENT, 0, NULL)
                       : ej_registry_delete(reg, paths[i], -1);
            if (r != 0 && r != EJ_ENODEEXISTS && r != EJ_ENONODE)
                rc = r;
        }
    }
    if (rc != 0) {
        const char *leaf_name = strrchr(paths[0], '/') + 1;
        EJ_LOG(EJ_LOG_WARN, MOD, rc, "job %s: cannot %s %s nodes: %s", ej__coord_job_name(c),
               create ? "create" : "delete", leaf_name, ej_registry_errmsg(reg));
        if (!create && leaf == EJ_LAYOUT_NODE_ITEM_RUNNING)
            suspect_add(c, items, n, ej_registry_session_id(reg));
    }
out:
    if (paths)
        for (size_t i = 0; i < n; i++)
            free(paths[i]);
    free(paths);
    free(ops);
    return rc;
}

void ej__running_complete(ej__coord *c, const int *items, size_t n, int64_t session)
{
    if (n == 0 || session == 0)
        return;
    /* Our running nodes went with an earlier session; deleting by path now
     * could remove the node of the instance that took the item over. */
    if (ej_registry_session_id(ej__coord_registry(c)) != session)
        return;
    batch(c, items, n, EJ_LAYOUT_NODE_ITEM_RUNNING, false);
}

void ej__running_complete_one(ej__coord *c, int item, int64_t session)
{
    if (session == 0 || ej_registry_session_id(ej__coord_registry(c)) != session)
        return;
    char *p = item_path(c, item, EJ_LAYOUT_NODE_ITEM_RUNNING);
    if (p == NULL)
        return;
    int rc = ej_registry_delete(ej__coord_registry(c), p, -1);
    if (rc != 0 && rc != EJ_ENONODE) {
        EJ_LOG(EJ_LOG_WARN, MOD, rc, "job %s: cannot delete %s: %s", ej__coord_job_name(c), p,
               ej_registry_errmsg(ej__coord_registry(c)));
        suspect_add(c, &item, 1, session);
    }
    free(p);
}

int ej__running_check_alive(ej__coord *c)
{
    ej_registry *reg = ej__coord_registry(c);
    int64_t sess = ej_registry_session_id(reg);
    char *p = ej_layout_path_dup(ej__coord_job_name(c), EJ_LAYOUT_NODE_INSTANCE, 0,
                                  ej__coord_instance_id(c));
    if (p == NULL)
        return EJ_ENOMEM;
    bool ex = false;
    struct ej_node_stat st;
    int rc = ej_registry_exists(reg, p, &ex, &st);
    free(p);
    if (rc != 0)
        return rc;
    if (!ex || st.ephemeral_owner != sess || sess == 0)
        return EJ_ESESSIONEXPIRED;
    return 0;
}

int ej__running_set_misfire(ej__coord *c, const int *items, size_t n)
{
    for (size_t i = 0; i < n; i++)
        ej__view_claim_misfire(ej__coord_view(c), items[i]);
    int rc = batch(c, items, n, EJ_LAYOUT_NODE_ITEM_MISFIRE, true);
    for (size_t i = 0; i < n && rc == 0; i++)
        ej__view_note_misfire(ej__coord_view(c), items[i], true);
    return rc;
}

int ej__running_clear_misfire(ej__coord *c, const int *items, size_t n)
{
    int rc = batch(c, items, n, EJ_LAYOUT_NODE_ITEM_MISFIRE, false);
    for (size_t i = 0; i < n && rc == 0; i++)
        ej__view_note_misfire(ej__coord_view(c), items[i], false);
    return rc;
}

static bool misfire_now(ej__coord *c, int item)
{
    char *p = item_path(c, item, EJ_LAYOUT_NODE_ITEM_MISFIRE);
    bool exists = false;
    if (p == NULL || ej_registry_exists(ej__coord_registry(c), p, &exists, NULL) != 0)
        exists = false;
    free(p);
    return exists;
}

int ej__running_check_time_diff(ej__coord *c, int max_seconds, char *msg, size_t msglen)
{
    ej_registry *reg = ej__coord_registry(c);
    char *p = ej_layout_path_dup(ej__coord_job_name(c), EJ_LAYOUT_NODE_SYSTEM_TIME, 0, NULL);
    if (p == NULL)
        return EJ_ENOMEM;
    struct ej_node_stat st;
    memset(&st, 0, sizeof st);
    int rc = ej_registry_set(reg, p, "", 0, -1, &st);
    if (rc == EJ_ENONODE) {
        rc = ej_registry_persist(reg, p, "", 0);
        if (rc == 0) {
            bool ex = false;
            rc = ej_registry_exists(reg, p, &ex, &st);
        }
    }
    free(p);
    if (rc != 0)
        return rc;
    int64_t now = ej__now_ms();
    int64_t diff = now > st.mtime ? now - st.mtime : st.mtime - now;
    if (diff > (int64_t)max_seconds * 1000) {
        snprintf(msg, msglen,
                 "Time different between job server and register center exceed '%d' seconds, "
                 "max time different is '%d' seconds.",
                 (int)(diff / 1000), max_seconds);
        return EJ_ECONFIG;
    }
    return 0;
}

/* The view watches sharding/{n}/disabled of its own items only, from the
 * moment an item becomes one: right after a resharding the state may not
 * be loaded yet. Ask (one read, only then) rather than run a disabled
 * item; an error reads as disabled, for this fire. */
static bool disabled_now(ej__coord *c, int item)
{
    char *p = item_path(c, item, EJ_LAYOUT_NODE_ITEM_DISABLED);
    bool exists = true;
    if (p == NULL || ej_registry_exists(ej__coord_registry(c), p, &exists, NULL) != 0)
        exists = true;
    free(p);
    return exists;
}

int ej__running_plan_items(ej__coord *c, bool failover_on, bool want_misfire,
                           struct ej__plan_item **out, size_t *nout)
{
    *out = NULL;
    *nout = 0;
    int *items = NULL;
    size_t n = 0;
    int rc = ej__view_items_of(ej__coord_view(c), ej__coord_instance_id(c), &items, &n);
    if (rc != 0 || n == 0)
        return rc;
    struct ej__plan_item *r = malloc(n * sizeof *r);
    if (r == NULL) {
        free(items);
        return EJ_ENOMEM;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        struct ej__view_item it;
        if (ej__view_get(ej__coord_view(c), items[i], &it) != 0)
            continue;
        struct ej__plan_item *p = &r[k++];
        *p = (struct ej__plan_item){.item = items[i],
                                    .owned = true,
                                    .taken_away = it.failover_owner > 0,
                                    .disabled = (signed char)(it.disabled < 0 ? -1 : it.disabled > 0),
                                    .misfire = (signed char)(it.misfire < 0 ? -1 : it.misfire > 0)};
        ej__view_item_fini(&it);
        if (failover_on && p->taken_away)
            continue;
        if (p->disabled < 0)
            p->disabled = disabled_now(c, p->item);
        /* Not loaded yet (an item just ours): the mark is a fact in
         * ZooKeeper, ask it rather than drop a promised re-run. */
        if (want_misfire && p->disabled == 0 && p->misfire < 0)
            p->misfire = misfire_now(c, p->item);
    }
    free(items);
    *out = r;
    *nout = k;
    return 0;
}
