#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| synthgate::fuzzing::platform_list_query(data));
