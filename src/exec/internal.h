/*
 * Item runners: run one shard item of a job (simple, dataflow, script,
 * http), dispatch failures to the job's error handler, and build the
 * strings ElasticJob puts around a run (context JSON, task id). Internal
 * API used by the fire flow.
 *
 * The runners hold no state between calls: everything comes from the
 * borrowed struct ej_job_def and the ej_shard_context. All functions are
 * thread-safe; several items of one job may run at once.
 */
#ifndef EJ_EXEC_INTERNAL_H
#define EJ_EXEC_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <spawn.h>
#include <sys/types.h>

#include "ejob/job.h"

/* ------------------------------------------------------------ contexts */

/*
 * Prepares ctx for a run: zeroes it and links the cancellation flag
 * (borrowed; may be NULL = never cancelled; typically one flag per job,
 * set when the job must stop). The caller then fills the public fields.
 * Call ej__exec_context_fini() after the run.
 */
void ej__exec_context_init(ej_shard_context *ctx, const atomic_bool *cancel);

/*
 * Limits one item's run: kill (borrowed, may be NULL) stops this item alone
 * when set (a kill: the result is killed), and timeout_ms > 0 sets its
 * deadline from now (the result is a timeout). Both make
 * ej_shard_context_is_cancelled true, which every runner polls: a script's
 * group gets SIGTERM then SIGKILL, an HTTP transfer is aborted, a C job sees
 * the flag.
 */
void ej__exec_context_limit(ej_shard_context *ctx, const atomic_bool *kill, int64_t timeout_ms);

/* Has the item's deadline passed? */
bool ej__exec_timed_out(const ej_shard_context *ctx);

/* Can anything cancel this item (so the runner must poll)? */
bool ej__exec_cancellable(const ej_shard_context *ctx);

/* Frees what the run left in ctx (the error message). */
void ej__exec_context_fini(ej_shard_context *ctx);

/* The message set by ej_shard_context_set_error(), or NULL. Borrowed until
 * fini or the next set_error. */
const char *ej__exec_context_error(const ej_shard_context *ctx);

/*
 * The ShardingContext JSON a script gets as its last argument and an http
 * job in its `shardingContext` header, exactly as ElasticJob 2.1.5's Gson
 * writes it:
 *   {"jobName":"x","taskId":"...","shardingTotalCount":3,"jobParameter":"",
 *    "shardingItem":0,"shardingParameter":"A"}
 * (HTML-safe escaping, null fields omitted: shardingParameter when NULL;
 * jobName, taskId, jobParameter when NULL). Caller frees; NULL on
 * allocation failure.
 */
char *ej__exec_context_json(const ej_shard_context *ctx);

/*
 * The task id "jobName@-@0,1,2@-@READY@-@instanceId" for a run of items
 * (as given, comma separated; "" when count is 0). Caller frees; NULL on
 * allocation failure.
 */
char *ej__exec_task_id(const char *job_name, const int *items, size_t count,
                       const char *instance_id);

/* The environment variable of a script item and the request header of an
 * HTTP item that carry ctx->fencing_token (decimal; 0 when not known). */
#define EJ_FENCING_TOKEN_ENV "EJOB_FENCING_TOKEN"
#define EJ_FENCING_TOKEN_HEADER "X-Ejob-Fencing-Token"

/* --------------------------------------------------------------- runs */

struct ej__exec_opts {
    /* Dataflow streaming: asked after every processed batch; false stops
     * the loop (the job was stopped or needs resharding: ElasticJob's
     * isEligibleForJobRunning). NULL: always true. */
    bool (*keep_going)(void *arg);
    void *keep_going_arg;
    /* Live output of a script: called on the item's thread with the next
     * len bytes of stream (EJ_OUTPUT_STDOUT / _STDERR) from offset, at
     * most every EJ__LIVE_FLUSH_MS per stream while the item runs, and only
     * bytes within the output cap (the pieces are the first bytes of
     * res->output / err_output). NULL: none. */
    void (*output)(void *arg, int stream, int64_t offset, const char *data, size_t len);
    void *output_arg;
};

/* How long a script's output may wait before it goes to opts->output. */
#define EJ__LIVE_FLUSH_MS 250

/* The outcome of one item run. Caller finalises with ej__exec_result_fini. */
typedef struct ej__exec_result {
    int rc;              /* 0 success; else negative (EJ_EJOBFAILED, EJ_ETIMEDOUT, ...) */
    char *failure_cause; /* NULL on success; the message for the event / handler */
    char *output;        /* script stdout or http body; NULL if none */
    size_t output_len;
    bool output_truncated;
    char *err_output; /* script stderr; NULL if none */
    size_t err_output_len;
    bool err_output_truncated;
    int exit_code;    /* script: exit status; -1 if it did not exit normally */
    int term_signal;  /* script: the signal that ended it, else 0 */
    long http_status; /* http: response status, 0 if none */
    bool timed_out;   /* script timeout / http timeout */
    bool cancelled;   /* stopped because the context was cancelled */
    bool killed;      /* stopped by a kill (ej__exec_context_limit's flag) */
    bool abort_run;   /* the error handler asked to fail the whole run */
} ej__exec_result;

void ej__exec_result_fini(ej__exec_result *res);

/*
 * Runs one item on the calling thread according to def->type, and on
 * failure calls the job's error handler (ej__exec_handle_error). Blocks
 * until the item is done (a script: until it exits or its timeout /
 * cancellation has killed its process group).
 * opts may be NULL. res receives the outcome (always initialised).
 * Returns res->rc.
 */
int ej__exec_run_item(const struct ej_job_def *def, const ej_shard_context *ctx,
                      const struct ej__exec_opts *opts, ej__exec_result *res);

/*
 * Dispatches a failure to def->error_handler: LOG logs at ERROR
 * "Job '<job>' exception occur in job processing: <message>" (item >= 0
 * adds the item); IGNORE does nothing; FAIL logs and returns true; CUSTOM
 * calls the user's function and returns what it returns. item is -1 for a
 * failure outside an item. Returns true when the run must fail as a whole.
 */
bool ej__exec_handle_error(const struct ej_job_def *def, const char *job_name, int item,
                           const char *message);

/* Calls every listener's before (or after) callback in order. */
void ej__exec_listeners_before(const struct ej_job_def *def, const ej_shard_contexts_info *info);
void ej__exec_listeners_after(const struct ej_job_def *def, const ej_shard_contexts_info *info);

/* --------------------------------------------------------- script argv */

/*
 * Splits a command line as commons-exec's CommandLine.parse does:
 * tokens separated by spaces (only ' '), '...' and "..." quote (the quotes
 * are removed; "" gives an empty argument), no escapes. Returns a
 * NULL-terminated argv in *argv_out (one allocation: free(*argv_out)) and
 * the count in *argc_out (may be NULL).
 * Returns 0; EJ_ECONFIG with a message in err for unbalanced quotes or an
 * empty command; EJ_EINVAL; EJ_ENOMEM.
 */
int ej__exec_split_command(const char *line, char ***argv_out, int *argc_out, char *err,
                           size_t errlen);

/* ------------------------------------------------ item supervision */

/* True while the process whose /proc/PID/stat statfd reads is stopped
 * (SIGSTOP, a job-control stop, a debugger): the state follows the last
 * ')' of "pid (comm) S ...", comm may hold anything. Async-signal-safe,
 * for the supervisor and the zygote (supervise.c). */
bool ej__process_stopped(int statfd);

/* What kills an item's group if the daemon dies: the zygote (zygote.c),
 * one process for all items, or else a process of the item's own
 * (supervise.c). */
struct ej__supervisor {
    pid_t pid;   /* the item's process group id; -1 when none */
    int fd;      /* the daemon's end of the item's socket; -1 when none */
    bool zygote; /* the zygote started the item (it is not our child) */
    pid_t sup;   /* own supervisor process (not zygote); -1 when none */
    int leader;  /* pidfd of the item's first process (ours); -1 when none */
    bool lost;   /* the zygote died while the item ran: watched by leader */
};

/* ej__supervise_check(): the zygote died with the item still running. The
 * item's group is this process's to end (kill(-sup->pid, ...)); from now
 * on ej__supervise_exit_fd() and ej__supervise_check() follow its first
 * process through a pidfd held here, and its wait status stays unknown. */
#define EJ__SPAWNER_LOST 2

/*
 * Start argv (program file, looked up in PATH as posix_spawnp does) with
 * stdfds[0..2] as its standard descriptors, its signal mask empty and
 * every signal at its default, leading a process group that is ended if
 * this process dies before ej__supervise_end(), or is stopped for a
 * second: SIGTERM at once, SIGKILL grace_ms later. Signal the group with
 * kill(-sup->pid, ...). Through the zygote when it runs (EJOB_ZYGOTE=0
 * turns it off); otherwise a supervising process is forked for the item
 * and fa/attr (which must make the same descriptors, mask and defaults,
 * with POSIX_SPAWN_SETPGROUP) are used.
 * Returns 0 and *pid, or an errno value (nothing is left running).
 * Thread-safe.
 */
int ej__supervise_spawn(struct ej__supervisor *sup, pid_t *pid, const char *file,
                        const posix_spawn_file_actions_t *fa, posix_spawnattr_t *attr,
                        char *const argv[], char *const envp[], const int stdfds[3],
                        int64_t grace_ms);

/* A descriptor that becomes readable when the item exits (or, through the
 * zygote, when the zygote dies), or -1 (then look now and then). Owned by
 * sup: valid until the next ej__supervise_check() or ej__supervise_end(),
 * call again after EJ__SPAWNER_LOST. */
int ej__supervise_exit_fd(struct ej__supervisor *sup, pid_t pid);

/* Has the item exited? 0: not yet; 1: yes, *status is its wait status
 * (it is reaped or held for ej__supervise_end); -1: it is gone with its
 * status unknown; EJ__SPAWNER_LOST (once): the zygote died, the item may
 * still run. */
int ej__supervise_check(struct ej__supervisor *sup, pid_t pid, int *status);

/* The item is over (exited and checked, stragglers dealt with): the
 * supervision ends without touching the group, whose id is free for reuse
 * after this. Idempotent. */
void ej__supervise_end(struct ej__supervisor *sup);

/* zygote.c: start the item through the zygote. *sock receives the item's
 * socket (see zygote.c). Returns 0, ENOSYS when there is no zygote, or an
 * errno value. */
int ej__zygote_spawn(int *sock, pid_t *pid, const char *path, char *const argv[],
                     char *const envp[], const int stdfds[3], int64_t grace_ms);

/* 1 and *status when the zygote reported the item's exit, 0 not yet, -1
 * the zygote is gone. Does not block. */
int ej__zygote_wait(int sock, int *status);

#endif
