/*
 * HMAC-SHA256 (RFC 2104 over FIPS 180-4's SHA-256) of a webhook body. Our
 * own, a hundred lines, so that the library (every module goes into
 * libejob) needs no crypto library for one signature; the unit test checks
 * it against RFC 4231's vectors.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "alert/internal.h"

struct sha256 {
    uint32_t h[8];
    uint64_t bytes;
    unsigned char block[64];
    size_t used;
};

static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static uint32_t ror(uint32_t x, int n)
{
    return (x >> n) | (x << (32 - n));
}

static void compress(struct sha256 *s, const unsigned char *p)
{
    uint32_t w[64], v[8];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ror(w[i - 15], 7) ^ ror(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ror(w[i - 2], 17) ^ ror(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    memcpy(v, s->h, sizeof v);
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = v[7] + (ror(v[4], 6) ^ ror(v[4], 11) ^ ror(v[4], 25)) +
                      ((v[4] & v[5]) ^ (~v[4] & v[6])) + K[i] + w[i];
        uint32_t t2 = (ror(v[0], 2) ^ ror(v[0], 13) ^ ror(v[0], 22)) +
                      ((v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]));
        memmove(v + 1, v, 7 * sizeof v[0]);
        v[4] += t1;
        v[0] = t1 + t2;
    }
    for (int i = 0; i < 8; i++)
        s->h[i] += v[i];
}

static void sha_init(struct sha256 *s)
{
    static const uint32_t h0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(s->h, h0, sizeof h0);
    s->bytes = 0;
    s->used = 0;
}

static void sha_update(struct sha256 *s, const void *data, size_t n)
{
    const unsigned char *p = data;
    s->bytes += n;
    while (n > 0) {
        size_t take = 64 - s->used < n ? 64 - s->used : n;
        memcpy(s->block + s->used, p, take);
        s->used += take;
        p += take;
        n -= take;
        if (s->used == 64) {
            compress(s, s->block);
            s->used = 0;
        }
    }
}

static void sha_final(struct sha256 *s, unsigned char out[32])
{
    uint64_t bits = s->bytes * 8;
    unsigned char pad[72] = {0x80};
    size_t padn = (s->used < 56 ? 56 : 120) - s->used;
    for (int i = 0; i < 8; i++)
        pad[padn + (size_t)i] = (unsigned char)(bits >> (56 - 8 * i));
    sha_update(s, pad, padn + 8);
    for (int i = 0; i < 8; i++)
        for (int b = 0; b < 4; b++)
            out[4 * i + b] = (unsigned char)(s->h[i] >> (24 - 8 * b));
}

void ej__alert_sign(const char *key, const char *body, size_t len, char *out, size_t outlen)
{
    unsigned char k[64] = {0}, pad[64], inner[32], mac[32];
    size_t klen = strlen(key);
    struct sha256 s;
    if (klen > sizeof k) {
        sha_init(&s);
        sha_update(&s, key, klen);
        sha_final(&s, k);
    } else {
        memcpy(k, key, klen);
    }
    for (int i = 0; i < 64; i++)
        pad[i] = k[i] ^ 0x36;
    sha_init(&s);
    sha_update(&s, pad, sizeof pad);
    sha_update(&s, body, len);
    sha_final(&s, inner);
    for (int i = 0; i < 64; i++)
        pad[i] = k[i] ^ 0x5c;
    sha_init(&s);
    sha_update(&s, pad, sizeof pad);
    sha_update(&s, inner, sizeof inner);
    sha_final(&s, mac);
    size_t at = (size_t)snprintf(out, outlen, "sha256=");
    for (size_t i = 0; i < sizeof mac && at + 2 < outlen; i++)
        at += (size_t)snprintf(out + at, outlen - at, "%02x", mac[i]);
    memset(k, 0, sizeof k);
    memset(pad, 0, sizeof pad);
}
