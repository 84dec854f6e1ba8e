#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| synthgate::fuzzing::agent_rollout(data));
