/*
 * Delivery: an HTTP POST of JSON (the webhook, signed when it has a
 * secret, and the chats), or an e-mail over SMTP (STARTTLS when the server
 * offers it, login when a password is given), both through libcurl. One
 * attempt per call; the caller retries.
 */
#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alert/internal.h"

/* Bytes of a receiver's answer kept for the log and `ejob alerts test`. */
#define ANSWER_KEEP 200

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

static void curl_init(void)
{
    curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* The first ANSWER_KEEP bytes of the receiver's answer. */
struct answer {
    char text[ANSWER_KEEP + 1];
    size_t len;
};

static size_t keep_answer(char *ptr, size_t size, size_t nmemb, void *user)
{
    struct answer *a = user;
    size_t n = size * nmemb;
    size_t take = n < ANSWER_KEEP - a->len ? n : ANSWER_KEEP - a->len;
    memcpy(a->text + a->len, ptr, take);
    a->len += take;
    a->text[a->len] = '\0';
    return n;
}

/* SMTP: every server reply line comes through the header callback; keep
 * the last one (the answer to the end of the message). */
static size_t keep_reply(char *ptr, size_t size, size_t nmemb, void *user)
{
    struct answer *a = user;
    size_t n = size * nmemb;
    size_t take = n < ANSWER_KEEP ? n : ANSWER_KEEP;
    memcpy(a->text, ptr, take);
    a->len = take;
    while (a->len > 0 && (a->text[a->len - 1] == '\n' || a->text[a->len - 1] == '\r'))
        a->len--;
    a->text[a->len] = '\0';
    return n;
}

/* One line, printable: an answer goes into a log line. */
static void flatten(char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            *s = ' ';
}

static CURL *new_handle(void)
{
    pthread_once(&curl_once, curl_init);
    if (curl_init_rc != CURLE_OK)
        return NULL;
    CURL *h = curl_easy_init();
    if (h == NULL)
        return NULL;
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)ALERT_SEND_TIMEOUT_MS);
    return h;
}

static enum ej__alert_outcome post_json(const struct ej_alert_channel_config *ch, const char *body,
                                        char *answer, size_t answerlen)
{
    CURL *h = new_handle();
    if (h == NULL) {
        snprintf(answer, answerlen, "cannot start libcurl");
        return ALERT_RETRY;
    }
    struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
    char sig[128], line[192];
    if (ch->type == EJ_ALERT_CH_WEBHOOK && ch->secret != NULL) {
        ej__alert_sign(ch->secret, body, strlen(body), sig, sizeof sig);
        snprintf(line, sizeof line, "%s: %s", EJ_ALERT_SIGNATURE_HEADER, sig);
        hdr = curl_slist_append(hdr, line);
    }
    hdr = curl_slist_append(hdr, "User-Agent: ejob-alerts");
    struct answer a = {.len = 0};
    curl_easy_setopt(h, CURLOPT_URL, ch->url);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, keep_answer);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &a);
    CURLcode rc = hdr != NULL ? curl_easy_perform(h) : CURLE_OUT_OF_MEMORY;
    long status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(hdr);
    curl_easy_cleanup(h);
    if (rc != CURLE_OK) {
        snprintf(answer, answerlen, "%s", curl_easy_strerror(rc));
        return ALERT_RETRY;
    }
    flatten(a.text);
    snprintf(answer, answerlen, "HTTP %ld: %s", status, a.text);
    if (status >= 200 && status < 300)
        return ALERT_SENT;
    return status >= 500 || status == 429 || status == 408 ? ALERT_RETRY : ALERT_REFUSED;
}

/* The message being uploaded to the SMTP server. */
struct upload {
    const char *data;
    size_t left;
};

static size_t read_upload(char *ptr, size_t size, size_t nmemb, void *user)
{
    struct upload *u = user;
    size_t n = size * nmemb < u->left ? size * nmemb : u->left;
    memcpy(ptr, u->data, n);
    u->data += n;
    u->left -= n;
    return n;
}

static enum ej__alert_outcome send_mail(const struct ej_alert_channel_config *ch,
                                        const char *message, char *answer, size_t answerlen)
{
    CURL *h = new_handle();
    if (h == NULL) {
        snprintf(answer, answerlen, "cannot start libcurl");
        return ALERT_RETRY;
    }
    struct curl_slist *rcpt = NULL;
    for (size_t i = 0; i < ch->to_count; i++)
        rcpt = curl_slist_append(rcpt, ch->to[i]);
    char from[320];
    snprintf(from, sizeof from, "<%s>", ch->from);
    struct upload u = {message, strlen(message)};
    struct answer a = {.len = 0};
    curl_easy_setopt(h, CURLOPT_URL, ch->url);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "smtp,smtps");
    /* STARTTLS when the server offers it; smtps:// is TLS from the start. */
    curl_easy_setopt(h, CURLOPT_USE_SSL, (long)CURLUSESSL_TRY);
    curl_easy_setopt(h, CURLOPT_MAIL_FROM, from);
    curl_easy_setopt(h, CURLOPT_MAIL_RCPT, rcpt);
    if (ch->secret != NULL) {
        curl_easy_setopt(h, CURLOPT_USERNAME, ch->user != NULL ? ch->user : ch->from);
        curl_easy_setopt(h, CURLOPT_PASSWORD, ch->secret);
    }
    curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(h, CURLOPT_READFUNCTION, read_upload);
    curl_easy_setopt(h, CURLOPT_READDATA, &u);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, keep_reply);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &a);
    CURLcode rc = rcpt != NULL ? curl_easy_perform(h) : CURLE_OUT_OF_MEMORY;
    long code = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    curl_slist_free_all(rcpt);
    curl_easy_cleanup(h);
    flatten(a.text);
    if (rc != CURLE_OK) {
        snprintf(answer, answerlen, "%s%s%s", curl_easy_strerror(rc), a.len ? ": " : "", a.text);
        /* A 5xx reply is a final no; a lost connection or 4xx may pass. */
        return code >= 500 && code < 600 ? ALERT_REFUSED : ALERT_RETRY;
    }
    snprintf(answer, answerlen, "SMTP %s", a.len ? a.text : "ok");
    return ALERT_SENT;
}

enum ej__alert_outcome ej__alert_deliver(const struct ej_alert_channel_config *ch, const char *body,
                                         char *answer, size_t answerlen)
{
    answer[0] = '\0';
    if (ch->type == EJ_ALERT_CH_EMAIL)
        return send_mail(ch, body, answer, answerlen);
    return post_json(ch, body, answer, answerlen);
}
