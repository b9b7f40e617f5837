/*
 * inflate.c: gzip detection and streaming inflate (see inflate.h).
 *
 * States: SNIFF (fewer than two bytes seen) -> PLAIN or GZIP; GZIP -> GZIP_END
 * after a member ends, and back to GZIP if another member follows. Input that
 * is neither whitespace nor a new member after GZIP_END is an error.
 *
 * A member's CRC-32 is computed here, with libdeflate's (PCLMUL: 2.2x zlib
 * 1.2.13's crc32_z here, which took 5.4 % of a 1 GiB gzip upload's CPU), not
 * by zlib: inflateValidate(0) turns zlib's off, and the trailer (CRC-32 and
 * size, the last 8 bytes a member's inflate consumed) is checked against ours.
 * zlib then checks no header CRC-16 either (FHCRC, which gzip(1) never writes).
 */
#include <stdlib.h>
#include <string.h>

#include <libdeflate.h>

#include "alloc.h"
#include "inflate.h"

#define LOG_PREFIX "inflate"

enum { SNIFF, PLAIN, GZIP, GZIP_END, FAILED };

#define RATIO_FREE_BYTES (16u << 20)

int inflate_init(struct inflate_stage *st, uint64_t max_out, uint32_t max_ratio,
		 inflate_sink sink, void *payload)
{
	memset(st, 0, sizeof(*st));
	st->state = SNIFF;
	st->max_out = max_out;
	st->max_ratio = max_ratio;
	st->sink = sink;
	st->payload = payload;
	return TP_OK;
}

static int emit(struct inflate_stage *st, const uint8_t *data, size_t len, struct tp_errbuf *err)
{
	int rc;

	if (!len)
		return TP_OK;
	st->out_total += len;
	if (st->out_total > st->max_out)
		return tp_fail(err, TP_ERR_TOOBIG, "inflated_too_large",
			       "inflated size exceeds the cap of %llu bytes",
			       (unsigned long long)st->max_out);
	if (st->max_ratio && st->out_total > RATIO_FREE_BYTES &&
	    st->out_total / (st->in_total ? st->in_total : 1) > st->max_ratio)
		return tp_fail(err, TP_ERR_TOOBIG, "inflate_ratio_exceeded",
			       "compression ratio exceeds %u:1 (a zip bomb?)", st->max_ratio);
	rc = st->sink(st->payload, data, len);
	return rc;
}

static int gzip_start(struct inflate_stage *st, struct tp_errbuf *err)
{
	if (!st->out) {
		st->out = tp_malloc(INFLATE_OUT_SIZE);
		if (!st->out)
			return tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
		st->zs.zalloc = tp_zalloc;
		st->zs.zfree = tp_zfree;
		/* 16 + MAX_WBITS: gzip wrapper only */
		if (inflateInit2(&st->zs, 16 + MAX_WBITS) != Z_OK)
			return tp_fail(err, TP_ERR_NOMEM, NULL, "zlib init failed");
	} else if (inflateReset(&st->zs) != Z_OK) {
		return tp_fail(err, TP_ERR_INVALID, "bad_gzip", "zlib reset failed");
	}
	if (inflateValidate(&st->zs, 0) != Z_OK)
		return tp_fail(err, TP_ERR_INVALID, "bad_gzip", "zlib validate failed");
	st->crc = 0;
	st->isize = 0;
	st->state = GZIP;
	st->gzip = 1;
	return TP_OK;
}

/* tail[8], the last bytes consumed, after in[0, used) is consumed too. */
static void tail_push(uint8_t tail[8], const uint8_t *in, size_t used)
{
	if (used >= 8) {
		memcpy(tail, in + used - 8, 8);
	} else if (used) {
		memmove(tail, tail + used, 8 - used);
		memcpy(tail + 8 - used, in, used);
	}
}

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* A member ended after inflate consumed in[0, used), at input byte at: its CRC-32 and size
 * against ours. */
static int check_trailer(struct inflate_stage *st, const uint8_t *in, size_t used, uint64_t at,
			 struct tp_errbuf *err)
{
	uint8_t t[8];	/* the trailer: the last 8 bytes the member's inflate consumed, across pieces */

	memcpy(t, st->tail, sizeof(t));
	tail_push(t, in, used);
	if (le32(t) != st->crc || le32(t + 4) != st->isize)
		return tp_fail(err, TP_ERR_INVALID, "bad_gzip", "corrupt gzip data near input byte %llu: %s",
			       (unsigned long long)at,
			       le32(t) != st->crc ? "incorrect data check" : "incorrect length check");
	return TP_OK;
}

static int gzip_feed(struct inflate_stage *st, const uint8_t *in, size_t len, struct tp_errbuf *err)
{
	int rc;

	while (len) {
		if (st->state == GZIP_END) {
			/* trailing NULs and whitespace after a member are tolerated */
			if (*in == 0 || *in == '\n' || *in == ' ' || *in == '\r' || *in == '\t') {
				in++, len--;
				continue;
			}
			if (*in != 0x1f)
				return tp_fail(err, TP_ERR_INVALID, "bad_gzip",
					       "garbage after the end of the gzip stream at byte %llu",
					       (unsigned long long)(st->in_total - len));
			if ((rc = gzip_start(st, err)))
				return rc;
		}
		st->zs.next_in = (Bytef *)in;
		st->zs.avail_in = len > (1u << 30) ? (1u << 30) : (uInt)len;
		size_t fed = st->zs.avail_in;
		do {
			st->zs.next_out = st->out;
			st->zs.avail_out = INFLATE_OUT_SIZE;
			int zr = inflate(&st->zs, Z_NO_FLUSH);
			if (zr != Z_OK && zr != Z_STREAM_END && zr != Z_BUF_ERROR)
				return tp_fail(err, TP_ERR_INVALID, "bad_gzip",
					       "corrupt gzip data near input byte %llu: %s",
					       (unsigned long long)(st->in_total - len + (fed - st->zs.avail_in)),
					       st->zs.msg ? st->zs.msg : "inflate error");
			size_t got = INFLATE_OUT_SIZE - st->zs.avail_out;
			st->crc = libdeflate_crc32(st->crc, st->out, got);
			st->isize += (uint32_t)got;
			if ((rc = emit(st, st->out, got, err)))
				return rc;
			if (zr == Z_STREAM_END) {
				if ((rc = check_trailer(st, in, fed - st->zs.avail_in,
							st->in_total - len + (fed - st->zs.avail_in), err)))
					return rc;
				st->state = GZIP_END;
				break;
			}
			if (zr == Z_BUF_ERROR && st->zs.avail_in == 0)
				break;
		} while (st->zs.avail_in > 0 || st->zs.avail_out == 0);
		size_t used = fed - st->zs.avail_in;
		tail_push(st->tail, in, used);
		in += used;
		len -= used;
	}
	return TP_OK;
}

int inflate_feed(struct inflate_stage *st, const uint8_t *in, size_t len, struct tp_errbuf *err)
{
	int rc;

	if (st->state == FAILED)
		return TP_ERR_INVALID;
	st->in_total += len;
	if (st->state == SNIFF) {
		while (len && st->nmagic < 2) {
			st->magic[st->nmagic++] = *in++;
			len--;
		}
		if (st->nmagic < 2)
			return TP_OK;
		if (st->magic[0] == 0x1f && st->magic[1] == 0x8b) {
			if ((rc = gzip_start(st, err)) || (rc = gzip_feed(st, st->magic, 2, err)))
				goto fail;
		} else {
			st->state = PLAIN;
			if ((rc = emit(st, st->magic, 2, err)))
				goto fail;
		}
	}
	if (st->state == PLAIN)
		rc = emit(st, in, len, err);
	else
		rc = gzip_feed(st, in, len, err);
	if (rc)
		goto fail;
	return TP_OK;
fail:
	st->state = FAILED;
	return rc;
}

int inflate_finish(struct inflate_stage *st, struct tp_errbuf *err)
{
	int rc = TP_OK;

	switch (st->state) {
	case SNIFF:
		/* 0 or 1 byte in all: pass it through, the parser decides */
		rc = emit(st, st->magic, (size_t)st->nmagic, err);
		break;
	case GZIP:
		rc = tp_fail(err, TP_ERR_INVALID, "truncated_gzip",
			     "the gzip stream ends early, after %llu input bytes",
			     (unsigned long long)st->in_total);
		break;
	case FAILED:
		rc = TP_ERR_INVALID;
		break;
	}
	if (rc)
		st->state = FAILED;
	return rc;
}

int inflate_is_gzip(const struct inflate_stage *st)
{
	return st->gzip;
}

void inflate_release(struct inflate_stage *st)
{
	if (st->out) {
		inflateEnd(&st->zs);
		tp_free(st->out);
		st->out = NULL;
	}
}
