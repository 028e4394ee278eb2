package tokenizer

import "unicode/utf8"

// byteToRune is GPT-2's bytes_to_unicode table: printable bytes (0x21–0x7E,
// 0xA1–0xAC, 0xAE–0xFF) map to the code point of the same value, the other
// 68 bytes map in byte order to U+0100, U+0101, …
var byteToRune [256]rune

// runeToByte is the inverse of byteToRune, keyed by code point (all values
// are below U+0144).
var runeToByte map[rune]byte

func init() {
	runeToByte = make(map[rune]byte, 256)
	n := rune(0)
	for b := 0; b < 256; b++ {
		if (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			byteToRune[b] = rune(b)
		} else {
			byteToRune[b] = 0x100 + n
			n++
		}
		runeToByte[byteToRune[b]] = byte(b)
	}
}

// byteLevelDecode maps a byte-level token string (every character one byte)
// back to raw bytes. ok is false when some character is not in the byte
// alphabet; HF's ByteLevel decoder then keeps the token's own UTF-8 bytes.
func byteLevelDecode(tok string) (raw []byte, ok bool) {
	raw = make([]byte, 0, len(tok))
	for _, r := range tok {
		b, found := runeToByte[r]
		if !found {
			return nil, false
		}
		raw = append(raw, b)
	}
	return raw, true
}

// byteLevelEncode maps raw bytes to their byte-level string.
func byteLevelEncode(raw []byte) string {
	buf := make([]byte, 0, 2*len(raw))
	for _, b := range raw {
		buf = utf8.AppendRune(buf, byteToRune[b])
	}
	return string(buf)
}

// appendLossyUTF8 appends s to dst, replacing every maximal subpart of an
// ill-formed UTF-8 sequence by one U+FFFD. This is the Unicode "substitution
// of maximal subparts" practice that Rust's String::from_utf8_lossy (used by
// HF's ByteLevel decoder) and the WHATWG TextDecoder both follow. Go's
// utf8.DecodeRune differs: it reports each bad byte separately, so a
// truncated sequence like "\xE2\x82" would give two U+FFFD instead of one.
func appendLossyUTF8(dst []byte, s []byte) []byte {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			dst = append(dst, c)
			i++
			continue
		}
		if r, size := utf8.DecodeRune(s[i:]); r != utf8.RuneError || size > 1 {
			dst = append(dst, s[i:i+size]...)
			i += size
			continue
		}
		// Invalid: find the length of the maximal subpart starting at i.
		n := 1
		lo, hi := byte(0x80), byte(0xBF)
		need := 0
		switch {
		case c >= 0xC2 && c <= 0xDF:
			need = 1
		case c == 0xE0:
			need, lo = 2, 0xA0
		case c == 0xED:
			need, hi = 2, 0x9F
		case c >= 0xE1 && c <= 0xEF:
			need = 2
		case c == 0xF0:
			need, lo = 3, 0x90
		case c == 0xF4:
			need, hi = 3, 0x8F
		case c >= 0xF1 && c <= 0xF3:
			need = 3
		}
		for k := 0; k < need && i+n < len(s); k++ {
			b := s[i+n]
			if b < lo || b > hi {
				break
			}
			n++
			lo, hi = 0x80, 0xBF
		}
		dst = append(dst, "\uFFFD"...)
		i += n
	}
	return dst
}
