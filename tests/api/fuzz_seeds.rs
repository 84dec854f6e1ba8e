//! The fuzz targets' short run, on stable and in every test run: each target's seeds
//! (`fuzz/seeds/<target>/`) and two thousand deterministic mutations of them go through the
//! same entry points `cargo fuzz` drives (`synthgate::fuzzing`). A panic fails the test; an
//! abort (a stack overflow) ends the test binary; an input that takes longer than [`BOUND`]
//! fails it. The long runs are libFuzzer's (see fuzz/README.md); this keeps every target
//! building and its seeds passing between them.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parquet::basic::{Repetition, Type as PhysicalType};
use parquet::data_type::{ByteArray, ByteArrayType, Int64Type};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::Type;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use synthgate::datasets::DatasetFormat;
use synthgate::fuzzing;

/// Far above any input's real cost (milliseconds); an input that takes this long is a hang.
const BOUND: Duration = Duration::from_secs(10);

/// Mutations per target.
const MUTANTS: usize = 2_000;

/// The service's runtime threads have 2 MiB stacks: the targets run on no more.
const STACK: usize = 2 << 20;

fn seeds(target: &str) -> Vec<Vec<u8>> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/seeds")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let seeds: Vec<Vec<u8>> = files.iter().map(|f| std::fs::read(f).unwrap()).collect();
    assert!(!seeds.is_empty(), "no seeds in {}", dir.display());
    seeds
}

/// Byte strings the mutations splice in, so they reach past the first syntax check.
const TOKENS: &[&[u8]] = &[
    b"{{",
    b"}}",
    b"{%",
    b"%}",
    b"[",
    b"]",
    b"{",
    b"}",
    b"\"",
    b",",
    b":",
    b"\n",
    b"'",
    b"(",
    b")",
    b"*",
    b"+",
    b"-",
    b"|",
    b"~",
    b"\\",
    b"\0",
    b"\xff",
    b"1e308",
    b"-1",
    b"null",
    b"SELECT ",
    b" FROM ",
    b"range(99999)",
    b" * 99999",
    b"&a",
    b"*a",
    b"!!",
    b"PAR1",
];

/// A mutation of one of `seeds`: a few flips, insertions, deletions, duplications, token
/// insertions or splices.
fn mutate(rng: &mut StdRng, seeds: &[Vec<u8>]) -> Vec<u8> {
    let mut out = seeds[rng.random_range(0..seeds.len())].clone();
    for _ in 0..rng.random_range(1..=4) {
        let at = if out.is_empty() {
            0
        } else {
            rng.random_range(0..out.len())
        };
        match rng.random_range(0..6) {
            0 if !out.is_empty() => out[at] ^= 1 << rng.random_range(0..8),
            1 => out.insert(at, rng.random()),
            2 if !out.is_empty() => {
                let end = (at + rng.random_range(1..16)).min(out.len());
                out.drain(at..end);
            }
            3 if !out.is_empty() => {
                let end = (at + rng.random_range(1..64)).min(out.len());
                let piece = out[at..end].to_vec();
                for _ in 0..rng.random_range(1..8) {
                    out.splice(at..at, piece.iter().copied());
                }
            }
            4 => {
                let token = TOKENS[rng.random_range(0..TOKENS.len())];
                out.splice(at..at, token.iter().copied());
            }
            _ => {
                let other = &seeds[rng.random_range(0..seeds.len())];
                if !other.is_empty() {
                    let from = rng.random_range(0..other.len());
                    out.truncate(at);
                    out.extend_from_slice(&other[from..]);
                }
            }
        }
    }
    out
}

/// Runs `target` on every seed and [`MUTANTS`] mutations, each on a fresh 2 MiB thread.
fn run(name: &str, seeds: Vec<Vec<u8>>, target: fn(&[u8])) {
    let mut rng = StdRng::seed_from_u64(0x5eed ^ name.len() as u64);
    let mut inputs = seeds.clone();
    inputs.extend((0..MUTANTS).map(|_| mutate(&mut rng, &seeds)));
    let inputs = Arc::new(inputs);
    for i in 0..inputs.len() {
        let started = Instant::now();
        let all = Arc::clone(&inputs);
        let outcome = std::thread::Builder::new()
            .stack_size(STACK)
            .spawn(move || target(&all[i]))
            .unwrap()
            .join();
        let input = String::from_utf8_lossy(&inputs[i]);
        assert!(outcome.is_ok(), "{name}: input {i} panicked: {input:?}");
        let took = started.elapsed();
        assert!(took < BOUND, "{name}: input {i} took {took:?}: {input:?}");
    }
}

#[test]
fn job_json_seeds_and_mutations() {
    run("job_json", seeds("job_json"), fuzzing::job_json);
}

#[test]
fn job_yaml_seeds_and_mutations() {
    run("job_yaml", seeds("job_yaml"), fuzzing::job_yaml);
}

#[test]
fn template_seeds_and_mutations() {
    run("template", seeds("template"), fuzzing::template);
}

#[test]
fn sql_seeds_and_mutations() {
    run("sql", seeds("sql"), fuzzing::sql);
}

#[test]
fn hub_commit_seeds_and_mutations() {
    run("hub_commit", seeds("hub_commit"), fuzzing::hub_commit);
}

#[test]
fn mcp_message_seeds_and_mutations() {
    run("mcp_message", seeds("mcp_message"), fuzzing::mcp_message);
}

#[test]
fn llm_answer_seeds_and_mutations() {
    run("llm_answer", seeds("llm_answer"), fuzzing::llm_answer);
}

#[test]
fn trace_context_seeds_and_mutations() {
    run(
        "trace_context",
        seeds("trace_context"),
        fuzzing::trace_context,
    );
}

#[test]
fn platform_list_query_seeds_and_mutations() {
    run(
        "platform_list_query",
        seeds("platform_list_query"),
        fuzzing::platform_list_query,
    );
}

#[test]
fn agent_rollout_seeds_and_mutations() {
    run(
        "agent_rollout",
        seeds("agent_rollout"),
        fuzzing::agent_rollout,
    );
}

#[test]
fn dataset_csv_seeds_and_mutations() {
    run("dataset_csv", seeds("dataset_csv"), |d| {
        fuzzing::dataset(DatasetFormat::Csv, d);
    });
}

#[test]
fn dataset_jsonl_seeds_and_mutations() {
    run("dataset_jsonl", seeds("dataset_jsonl"), |d| {
        fuzzing::dataset(DatasetFormat::Jsonl, d);
    });
}

#[test]
fn dataset_parquet_seeds_and_mutations() {
    run("dataset_parquet", seeds("dataset_parquet"), |d| {
        fuzzing::dataset(DatasetFormat::Parquet, d);
    });
}

/// Writes the Parquet seeds (`SYNTHGATE_WRITE_PARQUET_SEEDS=1 cargo nextest run -E
/// 'test(parquet_seeds_are_current)'`), else checks the committed ones are what the writer
/// makes: binary seeds, so they are made here rather than by hand.
#[test]
fn parquet_seeds_are_current() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds/dataset_parquet");
    for (name, bytes) in [
        ("plain.parquet", parquet_seed(false)),
        ("dictionary.parquet", parquet_seed(true)),
    ] {
        let path = dir.join(name);
        if std::env::var_os("SYNTHGATE_WRITE_PARQUET_SEEDS").is_some() {
            std::fs::write(&path, &bytes).unwrap();
        }
        let committed = std::fs::read(&path).unwrap_or_default();
        assert_eq!(committed, bytes, "{}: regenerate the seeds", path.display());
    }
}

/// A small file of the real writer: an optional int64 column and a string column, with or
/// without dictionary encoding, two row groups.
fn parquet_seed(dictionary: bool) -> Vec<u8> {
    let id = Type::primitive_type_builder("id", PhysicalType::INT64)
        .with_repetition(Repetition::OPTIONAL)
        .build()
        .unwrap();
    let name = Type::primitive_type_builder("name", PhysicalType::BYTE_ARRAY)
        .with_repetition(Repetition::REQUIRED)
        .with_logical_type(Some(parquet::basic::LogicalType::String))
        .build()
        .unwrap();
    let schema = Type::group_type_builder("schema")
        .with_fields(vec![Arc::new(id), Arc::new(name)])
        .build()
        .unwrap();
    let props = WriterProperties::builder()
        .set_dictionary_enabled(dictionary)
        .set_created_by("synthgate fuzz seed".into())
        .build();
    let mut out = Vec::new();
    let mut writer =
        SerializedFileWriter::new(&mut out, Arc::new(schema), Arc::new(props)).unwrap();
    for group_index in 0..2i64 {
        let mut group = writer.next_row_group().unwrap();
        let mut col = group.next_column().unwrap().unwrap();
        col.typed::<Int64Type>()
            .write_batch(&[group_index, 7], Some(&[1, 0, 1]), None)
            .unwrap();
        col.close().unwrap();
        let mut col = group.next_column().unwrap().unwrap();
        let names: Vec<ByteArray> = ["ann", "bo", "ann"]
            .iter()
            .map(|s| ByteArray::from(*s))
            .collect();
        col.typed::<ByteArrayType>()
            .write_batch(&names, None, None)
            .unwrap();
        col.close().unwrap();
        group.close().unwrap();
    }
    writer.close().unwrap();
    out
}
