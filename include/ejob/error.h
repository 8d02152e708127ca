/*
 * Error codes. Every ejob call that can fail returns an int: 0 is success,
 * a negative value is an error. As in libuv, an EJ_E* code that has an
 * errno meaning IS that -errno (EJ_ENOMEM == -ENOMEM, EJ_EINVAL == -EINVAL,
 * ...), so a module that returns -errno and one that returns EJ_E* agree;
 * ejob's own conditions have their own range, below -1000, that never
 * collides with errno.
 */
#ifndef EJOB_ERROR_H
#define EJOB_ERROR_H

#include <errno.h>

#include "ejob/common.h"

/* X(name, value, message) */
#define EJ_ERRNO_MAP(X)                                                                            \
    X(EAGAIN, -EAGAIN, "not now, try again")                                                       \
    X(EBUSY, -EBUSY, "resource busy")                                                              \
    X(EINVAL, -EINVAL, "invalid argument")                                                         \
    X(ENOMEM, -ENOMEM, "out of memory")                                                            \
    X(ECONFIG, -1005, "invalid job configuration")                                                 \
    X(ECRON, -1006, "invalid cron expression")                                                     \
    X(EPARSE, -1007, "malformed input")                                                            \
    X(ENOTFOUND, -1008, "not found")                                                               \
    X(ETIMEDOUT, -ETIMEDOUT, "timed out")                                                          \
    X(ECLOSED, -1010, "handle is closed or shutting down")                                         \
    X(ECONNLOSS, -1020, "ZooKeeper connection lost")                                               \
    X(ENONODE, -1021, "ZooKeeper node does not exist")                                             \
    X(ENODEEXISTS, -1022, "ZooKeeper node already exists")                                         \
    X(EBADVERSION, -1023, "ZooKeeper node version mismatch")                                       \
    X(ENOTEMPTY, -1024, "ZooKeeper node has children")                                             \
    X(ENOAUTH, -1025, "not authorised for this ZooKeeper node")                                    \
    X(EAUTHFAILED, -1026, "ZooKeeper authentication failed")                                       \
    X(ESESSIONEXPIRED, -1027, "ZooKeeper session expired")                                         \
    X(EBADPATH, -1028, "invalid ZooKeeper path")                                                   \
    X(ETOOBIG, -1029, "data exceeds ZooKeeper's size limit")                                       \
    X(ENOCHILDREN, -1030, "ephemeral ZooKeeper nodes cannot have children")                        \
    X(EZOOKEEPER, -1031, "ZooKeeper error")                                                        \
    X(ENOTLEADER, -1040, "this instance is not the leader")                                        \
    X(ESTOPPED, -1041, "job is stopped")                                                           \
    X(EJOBFAILED, -1042, "job item failed")                                                        \
    X(ESHARDING, -1043, "sharding failed")                                                         \
    X(EDB, -1044, "database error")

typedef enum {
    EJ_OK = 0,
#define EJ_ERR_ENUM(name, value, msg) EJ_##name = (value),
    EJ_ERRNO_MAP(EJ_ERR_ENUM)
#undef EJ_ERR_ENUM
} ej_errno;

/* A static, human-readable message for any return code (ejob's or -errno).
 * Never NULL. Thread-safe. */
EJ_EXTERN const char *ej_strerror(int err);

/* The symbolic name of a return code, e.g. "EJ_ECONNLOSS" or "ENOENT".
 * Never NULL. Thread-safe. */
EJ_EXTERN const char *ej_err_name(int err);

/* One family: the errno-valued codes are exactly -errno. */
_Static_assert(EJ_ENOMEM == -ENOMEM && EJ_EINVAL == -EINVAL, "EJ_E* must equal -errno");

#endif
