//! Bitmaps (Arrow validity and boolean values, LSB first) copied between bit offsets.

/// Writes bits `src_bit .. src_bit + len` of `src` to bits `dst_bit .. dst_bit + len` of `dst`,
/// leaving the other bits of `dst` as they are.
///
/// ```text
/// src = [0b1011_0110], src_bit = 1, len = 4   -> bits 1,1,0,1
/// dst = [0b0000_0001, 0], dst_bit = 6         -> dst = [0b1100_0001, 0b0000_0010]
/// ```
pub(crate) fn copy_bits(src: &[u8], src_bit: usize, dst: &mut [u8], dst_bit: usize, len: usize) {
    if len == 0 {
        return;
    }
    if src_bit % 8 == 0 && dst_bit % 8 == 0 {
        let whole = len / 8;
        let (s, d) = (src_bit / 8, dst_bit / 8);
        dst[d..d + whole].copy_from_slice(&src[s..s + whole]);
        let rest = len % 8;
        if rest > 0 {
            let mask = (1u8 << rest) - 1;
            dst[d + whole] = (dst[d + whole] & !mask) | (src[s + whole] & mask);
        }
        return;
    }
    let mut i = 0;
    // Bit by bit up to the destination's next byte boundary, then whole destination bytes.
    while i < len && (dst_bit + i) % 8 != 0 {
        set(dst, dst_bit + i, get(src, src_bit + i));
        i += 1;
    }
    let shift = (src_bit + i) % 8;
    while len - i >= 8 {
        let s = (src_bit + i) / 8;
        let lo = src[s] as u16;
        let hi = if shift > 0 { src[s + 1] as u16 } else { 0 };
        dst[(dst_bit + i) / 8] = (((hi << 8) | lo) >> shift) as u8;
        i += 8;
    }
    while i < len {
        set(dst, dst_bit + i, get(src, src_bit + i));
        i += 1;
    }
}

/// Bits `bit .. bit + len` of `src` as a new bitmap starting at bit 0 (trailing bits zero).
pub(crate) fn bits_from(src: &[u8], bit: usize, len: usize) -> Vec<u8> {
    let mut out = vec![0u8; len.div_ceil(8)];
    copy_bits(src, bit, &mut out, 0, len);
    out
}

pub(crate) fn get(bits: &[u8], i: usize) -> bool {
    bits[i / 8] >> (i % 8) & 1 == 1
}

fn set(bits: &mut [u8], i: usize, v: bool) {
    if v {
        bits[i / 8] |= 1 << (i % 8);
    } else {
        bits[i / 8] &= !(1 << (i % 8));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_doc_example() {
        let mut dst = [0b0000_0001u8, 0];
        copy_bits(&[0b1011_0110], 1, &mut dst, 6, 4);
        assert_eq!(dst, [0b1100_0001, 0b0000_0010]);
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, rng_algorithm: proptest::test_runner::RngAlgorithm::ChaCha, rng_seed: proptest::test_runner::RngSeed::Fixed(0xb175), failure_persistence: None, ..ProptestConfig::default() })]
        #[test]
        fn copy_bits_matches_bit_by_bit(src in proptest::collection::vec(any::<u8>(), 0..40), dst0 in proptest::collection::vec(any::<u8>(), 40), sb in 0usize..64, db in 0usize..64, len in 0usize..200) {
            let len = len.min((src.len() * 8).saturating_sub(sb)).min(40 * 8 - db);
            let mut dst = dst0.clone();
            copy_bits(&src, sb, &mut dst, db, len);
            for i in 0..40 * 8 {
                let want = if i >= db && i < db + len { get(&src, sb + i - db) } else { get(&dst0, i) };
                prop_assert_eq!(get(&dst, i), want, "bit {}", i);
            }
        }
    }
}
