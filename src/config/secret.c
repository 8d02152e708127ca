/*
 * Secrets in files: the ZooKeeper digest read from a file of its own, and
 * the permission rules for any file that holds a secret (as ssh applies to
 * its keys): refused when others may change it, a warning when everyone
 * may read it. Messages name the file, never the secret.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/internal.h"
#include "ejob/error.h"

/* A digest file is one line; anything much longer is not one. */
#define MAX_SECRET_FILE 4096

int ej_config_check_secret_mode(const char *path, unsigned mode, char *warn, size_t warnlen,
                                char *err, size_t errlen)
{
    if (warn != NULL && warnlen > 0)
        warn[0] = '\0';
    if (mode & (S_IWGRP | S_IWOTH)) {
        if (err != NULL && errlen > 0)
            snprintf(err, errlen,
                     "%s holds a secret and is %s-writable (mode %03o): refused; "
                     "chmod go-w %s",
                     path, (mode & S_IWOTH) ? "world" : "group", mode & 0777u, path);
        return EJ_ECONFIG;
    }
    if ((mode & S_IROTH) && warn != NULL && warnlen > 0)
        snprintf(warn, warnlen, "%s holds a secret and is world-readable (mode %03o); chmod o-r %s",
                 path, mode & 0777u, path);
    return 0;
}

/* The first line of the secret file at path, checked as any secret file. */
int ej__config_read_secret_line(const char *path, char **out, char *warn, size_t warnlen, char *err,
                                size_t errlen)
{
    if (warn != NULL && warnlen > 0)
        warn[0] = '\0';
    if (path == NULL || out == NULL)
        return EJ_EINVAL;
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        int e = errno;
        if (err != NULL && errlen > 0)
            snprintf(err, errlen, "%s: cannot open: %s", path, strerror(e));
        return -e;
    }
    int rc = 0;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        if (err != NULL && errlen > 0)
            snprintf(err, errlen, "%s: not a regular file", path);
        rc = EJ_ECONFIG;
        goto out_close;
    }
    rc = ej_config_check_secret_mode(path, (unsigned)st.st_mode, warn, warnlen, err, errlen);
    if (rc != 0)
        goto out_close;
    char buf[MAX_SECRET_FILE + 1];
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 || n > MAX_SECRET_FILE) {
        if (err != NULL && errlen > 0)
            snprintf(err, errlen, "%s: %s", path,
                     n < 0 ? strerror(errno) : "longer than one line of a secret");
        rc = n < 0 ? -EIO : EJ_ECONFIG;
        goto out_close;
    }
    buf[n] = '\0';
    /* The first line, without its line end. */
    buf[strcspn(buf, "\r\n")] = '\0';
    if (buf[0] == '\0') {
        if (err != NULL && errlen > 0)
            snprintf(err, errlen, "%s: its first line is empty", path);
        rc = EJ_ECONFIG;
    } else if ((*out = strdup(buf)) == NULL) {
        rc = EJ_ENOMEM;
    }
    memset(buf, 0, sizeof(buf));
out_close:
    close(fd);
    return rc;
}

int ej_config_read_secret_file(const char *path, char **out, char *warn, size_t warnlen, char *err,
                               size_t errlen)
{
    int rc = ej__config_read_secret_line(path, out, warn, warnlen, err, errlen);
    if (rc != 0)
        return rc;
    if (strchr(*out, ':') == NULL || (*out)[0] == ':') {
        if (err != NULL && errlen > 0)
            snprintf(err, errlen, "%s: must hold one line USER:PASSWORD", path);
        memset(*out, 0, strlen(*out));
        free(*out);
        *out = NULL;
        return EJ_ECONFIG;
    }
    return 0;
}
