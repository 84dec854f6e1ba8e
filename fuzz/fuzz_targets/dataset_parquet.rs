#![no_main]

use synthgate::datasets::DatasetFormat;

// The importer contains the parquet crate's panics on crafted files (`catch_unwind`: the
// upload is refused as invalid, the process goes on), so a caught panic is not a crash here.
// libfuzzer-sys's panic hook aborts on any panic, caught or not; the default hook is put back,
// and an uncaught panic still reaches libfuzzer-sys, which aborts on it.
libfuzzer_sys::fuzz_target!(
    init: {
        let _ = std::panic::take_hook();
    },
    |data: &[u8]| synthgate::fuzzing::dataset(DatasetFormat::Parquet, data)
);
