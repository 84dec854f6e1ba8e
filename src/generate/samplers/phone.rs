//! en_US `phone_number` of a `person`, as DataDesigner derives it
//! (`entities/person.py: generate_phone_number`, `entities/phone_number.py`): for adults with
//! a postcode, an area code drawn from the ZIP codes around theirs, population-weighted (60%
//! the exact ZIP, 20% its 4-digit prefix, 10% its 3-digit prefix, 10% anywhere), then a random
//! local number, written `AAA-PPP-LLLL`.
//!
//! The ZIP-to-area-code table is DataDesigner's (`assets/zip_area_code_map.parquet`,
//! Apache-2.0), kept as `assets/zip_area_codes.csv.gz` (zipcode, area code, population) and
//! read once. Where DataDesigner's exchange and line draws can give `1000` or `10000` (its
//! `randint` bounds are inclusive), these stay within three and four digits; a postcode the
//! table lacks falls back to its prefixes instead of failing the record.

use std::io::Read as _;
use std::sync::OnceLock;

use rand::RngExt;
use rand_chacha::ChaCha8Rng;

static TABLE_GZ: &[u8] = include_bytes!("../assets/zip_area_codes.csv.gz");

/// The ZIP codes, sorted, with their area codes and the cumulative population up to each.
struct ZipTable {
    zips: Vec<u32>,
    areas: Vec<u16>,
    cumulative: Vec<u64>,
}

fn table() -> Option<&'static ZipTable> {
    static TABLE: OnceLock<Option<ZipTable>> = OnceLock::new();
    TABLE
        .get_or_init(|| {
            let mut text = String::new();
            flate2::read::GzDecoder::new(TABLE_GZ)
                .read_to_string(&mut text)
                .ok()?;
            let mut t = ZipTable {
                zips: Vec::new(),
                areas: Vec::new(),
                cumulative: Vec::new(),
            };
            let mut total = 0u64;
            for line in text.lines().skip(1) {
                let mut parts = line.split(',');
                let zip = parts.next()?.parse().ok()?;
                let area = parts.next()?.parse().ok()?;
                total += parts.next()?.parse::<u64>().ok()?;
                t.zips.push(zip);
                t.areas.push(area);
                t.cumulative.push(total);
            }
            Some(t)
        })
        .as_ref()
}

impl ZipTable {
    /// A population-weighted area code among the ZIP codes at indexes `lo..hi`.
    fn weighted(&self, lo: usize, hi: usize, rng: &mut ChaCha8Rng) -> Option<u16> {
        if lo >= hi {
            return None;
        }
        let before = if lo == 0 { 0 } else { self.cumulative[lo - 1] };
        let span = self.cumulative[hi - 1] - before;
        if span == 0 {
            return Some(self.areas[rng.random_range(lo..hi)]);
        }
        let u = before + rng.random_range(0..span);
        let i = self.cumulative[lo..hi].partition_point(|&c| c <= u) + lo;
        self.areas.get(i.min(hi - 1)).copied()
    }

    /// The area code of ZIP codes starting with `prefix` (1 to 5 digits), weighted.
    fn for_prefix(&self, prefix: &str, rng: &mut ChaCha8Rng) -> Option<u16> {
        let digits = u32::try_from(prefix.len())
            .ok()
            .filter(|n| (1..=5).contains(n))?;
        let p: u32 = prefix.parse().ok()?;
        let scale = 10u32.pow(5 - digits);
        let lo = self.zips.partition_point(|&z| z < p * scale);
        let hi = self.zips.partition_point(|&z| z < (p + 1) * scale);
        self.weighted(lo, hi, rng)
    }
}

/// A phone number for a person with `postcode` (5 digits, or more as ZIP+4), `None` when the
/// postcode is not a US ZIP code.
pub(crate) fn phone_number(postcode: &str, rng: &mut ChaCha8Rng) -> Option<String> {
    let t = table()?;
    let zip: String = postcode.chars().take(5).collect();
    if zip.len() != 5 || !zip.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let r = rng.random::<f64>();
    let tries: &[usize] = if r < 0.6 {
        &[5, 4, 3]
    } else if r < 0.8 {
        &[4, 3]
    } else if r < 0.9 {
        &[3]
    } else {
        &[]
    };
    let area = tries
        .iter()
        .find_map(|&n| t.for_prefix(&zip[..n], rng))
        .or_else(|| t.weighted(0, t.zips.len(), rng))?;
    let exchange = rng.random_range(200..=999u16);
    let line = rng.random_range(0..=9999u16);
    Some(format!("{area:03}-{exchange:03}-{line:04}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng as _;

    #[test]
    fn area_codes_come_from_the_postcode_mostly() {
        let t = table().expect("the table decodes");
        assert!(t.zips.len() > 30_000);
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        // Manhattan (100xx) is area 212 or 646/917 overlays; count the draws whose area is
        // that of the exact ZIP code.
        let exact = t.for_prefix("10001", &mut rng).unwrap();
        let mut same = 0;
        for _ in 0..1000 {
            let p = phone_number("10001", &mut rng).unwrap();
            let parts: Vec<&str> = p.split('-').collect();
            assert_eq!(
                parts.iter().map(|s| s.len()).collect::<Vec<_>>(),
                [3, 3, 4],
                "{p}"
            );
            if parts[0] == format!("{exact:03}") {
                same += 1;
            }
        }
        assert!(same >= 550, "{same} of 1000 from the exact ZIP's area");
        assert_eq!(phone_number("SW1A 1AA", &mut rng), None);
        assert!(phone_number("99999", &mut rng).is_some(), "falls back");
    }
}
