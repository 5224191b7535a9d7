/* hmac: see hmac.h. Nettle computes the HMAC and compares in constant time. */
#include <string.h>

#include <nettle/hmac.h>
#include <nettle/memops.h>

#include "hmac.h"

void hmac_hex(const uint8_t *in, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";
	size_t i;

	for (i = 0; i < n; i++) {
		out[2 * i] = digits[in[i] >> 4];
		out[2 * i + 1] = digits[in[i] & 15];
	}
	out[2 * n] = 0;
}

void hmac_proof(const char *key, size_t keylen, const char *nonce,
                char out[HMAC_PROOF_LEN + 1])
{
	uint8_t mac[SHA256_DIGEST_SIZE];
	struct hmac_sha256_ctx ctx;

	hmac_sha256_set_key(&ctx, keylen, (const uint8_t *)key);
	hmac_sha256_update(&ctx, strlen(nonce), (const uint8_t *)nonce);
	hmac_sha256_digest(&ctx, sizeof(mac), mac);
	hmac_hex(mac, sizeof(mac), out);
}

bool hmac_verify(const char *key, size_t keylen, const char *nonce, const char *proof)
{
	char want[HMAC_PROOF_LEN + 1];

	hmac_proof(key, keylen, nonce, want);
	return strlen(proof) == HMAC_PROOF_LEN && memeql_sec(want, proof, HMAC_PROOF_LEN);
}
