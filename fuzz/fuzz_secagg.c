/* Secure-aggregation messages (src/secagg/): every parser of a message that arrives from the other side.
 * Input: byte 0 = slot (mod 7, fuzz/secagg_round.h: which message of a small honest round is replaced), the rest =
 * the message delivered in its place.  Any outcome but a crash, a leak, undefined behaviour or an error without a
 * message is fine: a replaced message may well be accepted (it may be the honest one). */
#include "secagg_round.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    secagg_round_spec s = {.slot = data[0] % SECAGG_SLOTS, .fz = data + 1, .fzlen = size - 1};
    secagg_round(&s);
    return 0;
}
