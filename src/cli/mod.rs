//! The command-line client: `synthgate submit`, `synthgate jobs`, `synthgate records`,
//! `synthgate datasets` and `synthgate healthcheck`.
//!
//! Each subcommand is a clap `Args` struct plus an async function that returns the process exit
//! code, for `main.rs` to wire in:
//!
//! ```text
//! Command::Submit(args)      => cli::submit(args).await,
//! Command::Records(args)     => cli::records(args).await,
//! Command::Datasets(args)    => cli::datasets(args).await,
//! Command::Jobs(args)        => cli::jobs(args).await,
//! Command::Healthcheck(args) => cli::healthcheck(args).await,
//! ```
//!
//! Exit codes: `0` success; `1` the job did not complete (`submit --wait`) or the server is
//! unhealthy (`healthcheck`); `2` the request failed: an HTTP error (the server's `error.code`
//! and `error.message` are printed), an unreachable server, an unreadable or unsupported config
//! file. Failures are printed on stderr; stdout carries only data (the job id, the records).
//!
//! Layout: `client` talks HTTP (URLs, bearer key, the error envelope); `events` decodes the
//! job payloads and Server-Sent Events; `progress` turns counts into a bar and a summary;
//! `wait` follows a job's event stream; `seed_files` finds the local files a config's seed
//! names and `upload` puts a file on the server once (by content hash), for `submit` and
//! `datasets upload`; `dataset_view` reads and prints datasets; one file per subcommand.

mod client;
mod dataset_view;
mod datasets;
mod events;
mod healthcheck;
mod jobs;
mod progress;
mod records;
mod rollout_seed;
mod seed_files;
mod submit;
mod table;
mod terminal;
mod upload;
mod wait;

#[cfg(test)]
mod dataset_tests;
#[cfg(test)]
mod tests;

pub use client::ServerArgs;
pub use datasets::{
    DatasetFormat, DatasetsArgs, DatasetsCommand, IdArgs, ListArgs, UploadArgs, datasets,
};
pub use healthcheck::{HealthcheckArgs, healthcheck};
pub use jobs::{JobIdArgs, JobListArgs, JobsArgs, JobsCommand, jobs};
pub use records::{RecordsArgs, RecordsFormat, RecordsStatus, records};
pub use submit::{SubmitArgs, submit};
