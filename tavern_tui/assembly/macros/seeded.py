"""The two pieces of JavaScript `{{pick}}` is seeded with, re-stated from their rules.

- `string_hash`: SillyTavern `public/scripts/utils.js` `getStringHash(str, seed = 0)` (the 53-bit "cyrb53"
  hash: two 32-bit lanes over the UTF-16 code units, `Math.imul` arithmetic, result
  `4294967296 * (2097151 & h2) + (h1 >>> 0)`).
- `seedrandom`: David Bau's seedrandom (the default ARC4 generator SillyTavern ships in `lib.js`): the seed
  string is mixed into a key (`mixkey`), an RC4 state is keyed with it and 256 bytes are discarded; each
  number takes 6 bytes (48 bits), widened byte by byte to 52 significant bits, in [0, 1).

The `{{pick}}` seed (core-macros.js): `getStringHash([chatIdHash, contentHash, globalOffset,
pick_reroll_seed].filter(x => x !== null).join("-"))`, where `chatIdHash` is `chat_metadata.chat_id_hash`
when it is a number, else `getStringHash(chat_metadata.main_chat ?? current chat id)`, and `contentHash` is
`getStringHash` of the raw text being evaluated; the choice is `list[floor(seedrandom(String(seed))() * n)]`.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["seedrandom", "string_hash", "utf16_units"]

_M32 = 0xFFFFFFFF


def utf16_units(text: str) -> list[int]:
    """`text` as JavaScript sees it: UTF-16 code units (a character past U+FFFF is a surrogate pair)."""
    data = text.encode("utf-16-le", "surrogatepass")
    return [data[i] | (data[i + 1] << 8) for i in range(0, len(data), 2)]


def _imul(a: int, b: int) -> int:
    return ((a & _M32) * (b & _M32)) & _M32


def string_hash(text: str, seed: int = 0) -> int:
    """SillyTavern `getStringHash(text, seed)`: a non-negative integer below 2**53."""
    h1 = (0xDEADBEEF ^ seed) & _M32
    h2 = (0x41C6CE57 ^ seed) & _M32
    for ch in utf16_units(text):
        h1 = _imul(h1 ^ ch, 2654435761)
        h2 = _imul(h2 ^ ch, 1597334677)
    h1 = _imul(h1 ^ (h1 >> 16), 2246822507) ^ _imul(h2 ^ (h2 >> 13), 3266489909)
    h2 = _imul(h2 ^ (h2 >> 16), 2246822507) ^ _imul(h1 ^ (h1 >> 13), 3266489909)
    return 4294967296 * (2097151 & h2) + (h1 & _M32)


def seedrandom(seed: str) -> Callable[[], float]:
    """seedrandom(seed) (ARC4, no entropy): a function returning the same sequence of floats in [0, 1) as
    JavaScript's `seedrandom(seed)()` calls do."""
    width, mask = 256, 255
    key: list[int] = []
    smear = 0
    # mixkey: key[j & 255] = 255 & ((smear ^= key[j & 255] * 19) + charCode); an unset slot reads as 0.
    for j, code in enumerate(utf16_units(seed)):
        slot = j & mask
        old = key[slot] if slot < len(key) else 0
        smear ^= old * 19
        value = mask & (smear + code)
        if slot < len(key):
            key[slot] = value
        else:
            key.append(value)
    if not key:
        key = [0]
    s = list(range(width))
    j = 0
    for i in range(width):
        t = s[i]
        j = mask & (j + key[i % len(key)] + t)
        s[i] = s[j]
        s[j] = t
    state = [0, 0]  # i, j

    def take(count: int) -> int:
        i, jj = state
        r = 0
        for _ in range(count):
            i = mask & (i + 1)
            t = s[i]
            jj = mask & (jj + t)
            s[i] = s[jj]
            s[jj] = t
            r = r * width + s[mask & (s[i] + t)]
        state[0], state[1] = i, jj
        return r

    take(width)  # RC4-drop[256]
    start_denom, significance, overflow = width ** 6, 2 ** 52, 2 ** 53

    def prng() -> float:
        n = take(6)
        d = start_denom
        x = 0
        while n < significance:
            n = (n + x) * width
            d *= width
            x = take(1)
        while n >= overflow:
            n //= 2
            d //= 2
            x >>= 1
        return (n + x) / d

    return prng
