//! A job's dataset as the tar archive NVIDIA's Data Designer clients unpack
//! (`load_dataset()`): one member, the Parquet export of the completed records, at the path
//! the client reads ([`DATASET_MEMBER`] for `nemo-microservices`, [`ARTIFACTS_MEMBER`] for
//! `nemo-platform`).
//!
//! A tar header holds its member's size, so the Parquet bytes are written out before the
//! archive starts: through the export cache for a finished job (once per ETag, then served from
//! that file each time, like a ranged export), to a file of its own for a job still stopping
//! (removed with the body). Disk, not memory: a job of a million records is not held in memory.
//! The `tar` crate builds the header.

use std::sync::Arc;

use bytes::Bytes;
use futures::StreamExt as _;
use futures::stream::BoxStream;

use super::{ExportFormat, ExportRecords, JobService};
use crate::domain::job::JobRow;
use crate::error::ApiError;
use crate::rendered::{RenderWriter, Rendered};

/// The member `nemo-microservices` reads (a directory of Parquet files, to the client).
pub const DATASET_MEMBER: &str = "dataset/part-0.parquet";
/// The member `nemo-platform` reads: its jobs' artifact directory holds the dataset's Parquet
/// files under `dataset/parquet-files/`, one a batch, and the archive roots it at `artifacts/`.
pub const ARTIFACTS_MEMBER: &str = "artifacts/dataset/parquet-files/batch_00000.parquet";

impl JobService {
    /// The dataset of `job` (as the caller read it, visible to `owner`) as a tar archive of
    /// one member at path `member`, streamed (see the module docs).
    pub async fn dataset_archive(
        &self,
        job: &JobRow,
        owner: Option<&str>,
        member: &str,
    ) -> Result<BoxStream<'static, Result<Bytes, std::io::Error>>, ApiError> {
        let export = self
            .export(
                job.id,
                owner,
                ExportFormat::Parquet,
                false,
                ExportRecords::Completed,
            )
            .await?;
        let parquet = if export.etag.is_some() {
            self.rendered(export)
                .await?
                .ok_or_else(|| ApiError::Internal("a finished export was not kept".into()))?
        } else {
            Arc::new(self.spool(export.body).await?)
        };
        let io = |e: std::io::Error| ApiError::Internal(format!("archiving the dataset: {e}"));
        let mut head = tar::Header::new_ustar();
        head.set_path(member).map_err(io)?;
        head.set_size(parquet.size);
        head.set_mode(0o644);
        head.set_mtime(u64::try_from(job.updated_at.timestamp()).unwrap_or(0));
        head.set_entry_type(tar::EntryType::Regular);
        head.set_cksum();
        let header = Bytes::copy_from_slice(head.as_bytes());
        // The member's last block padded to 512 bytes, then two zero blocks end the archive.
        let pad = usize::try_from((512 - parquet.size % 512) % 512).unwrap_or(0);
        let tail = Bytes::from(vec![0u8; pad + 1024]);
        let file = tokio::fs::File::open(&parquet.path).await.map_err(io)?;
        // The body holds the file: a spooled one is removed when the body is dropped, a kept
        // one cannot be while the body reads it.
        let member = tokio_util::io::ReaderStream::new(file).map(move |chunk| {
            let _ = &parquet;
            chunk
        });
        Ok(futures::stream::once(async move { Ok(header) })
            .chain(member)
            .chain(futures::stream::once(async move { Ok(tail) }))
            .boxed())
    }

    /// The Parquet export of a job that is not finished, written to a file of its own.
    async fn spool(
        &self,
        mut body: BoxStream<'static, Result<Bytes, std::io::Error>>,
    ) -> Result<Rendered, ApiError> {
        let io = |e: std::io::Error| ApiError::Internal(format!("spooling the dataset: {e}"));
        let mut out = RenderWriter::new(&self.render_dir).map_err(io)?;
        while let Some(chunk) = body.next().await {
            out.write(&chunk.map_err(io)?).map_err(io)?;
        }
        out.finish().map_err(io)
    }
}
