//! Deterministic randomness: one ChaCha stream per (job seed, record index, column).
//!
//! The seed layout is part of synthgate's reproducibility promise (a re-run record reproduces
//! its sampled values), so it must never change:
//!
//! ```text
//! ChaCha8Rng::from_seed(seed.to_le_bytes() ‖ index.to_le_bytes() ‖ fnv1a_128(name).to_le_bytes())
//! ```
//!
//! The column name is hashed with 128-bit FNV-1a (written out here, not `std`'s
//! `DefaultHasher`, whose output may change between Rust releases). Because each column has its
//! own stream, adding, removing or reordering columns never changes another column's values.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

const FNV_OFFSET_128: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
const FNV_PRIME_128: u128 = 0x0000_0000_0100_0000_0000_0000_0000_013b;

/// 128-bit FNV-1a of `name`'s UTF-8 bytes.
pub(crate) fn name_hash(name: &str) -> u128 {
    name.bytes().fold(FNV_OFFSET_128, |h, b| {
        (h ^ u128::from(b)).wrapping_mul(FNV_PRIME_128)
    })
}

/// The random stream of one column of one record.
pub(crate) fn column_rng(seed: u64, index: u64, name_hash: u128) -> ChaCha8Rng {
    let mut key = [0u8; 32];
    key[..8].copy_from_slice(&seed.to_le_bytes());
    key[8..16].copy_from_slice(&index.to_le_bytes());
    key[16..].copy_from_slice(&name_hash.to_le_bytes());
    ChaCha8Rng::from_seed(key)
}

/// SplitMix64's finalizer: a cheap, well-mixed 64-bit permutation.
pub(crate) fn mix64(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::RngExt;

    #[test]
    fn fnv_matches_reference_vectors() {
        // Published FNV-1a 128 test vectors.
        assert_eq!(name_hash(""), 0x6c62272e07bb014262b821756295c58d);
        assert_eq!(name_hash("a"), 0xd228cb696f1a8caf78912b704e4a8964);
    }

    #[test]
    fn streams_are_stable_and_independent() {
        let h = name_hash("price");
        let a: u64 = column_rng(7, 3, h).random();
        let b: u64 = column_rng(7, 3, h).random();
        assert_eq!(a, b);
        assert_ne!(a, column_rng(7, 4, h).random::<u64>());
        assert_ne!(a, column_rng(8, 3, h).random::<u64>());
        assert_ne!(a, column_rng(7, 3, name_hash("prices")).random::<u64>());
    }
}
