#![no_main]

use synthgate::datasets::DatasetFormat;

libfuzzer_sys::fuzz_target!(|data: &[u8]| synthgate::fuzzing::dataset(DatasetFormat::Parquet, data));
