//! Seed rows read while records run: the blocks of stored datasets, fetched through
//! [`DatasetStore::read_dataset_block`](crate::store::DatasetStore::read_dataset_block) on
//! first use and kept in one byte-bounded cache per process, shared by every record of every
//! job (a dataset's rows never change once it is `ready`, so a block is the same for every
//! reader).
//!
//! A record needs one row; the cache holds whole blocks ([`BLOCK_ROWS`] rows), so an ordered
//! job reads each block once, and a shuffled one reads at most one block per record. Concurrent
//! misses on the same block wait for one query (the cache's placeholder guard) instead of each
//! making their own. Nothing here is O(rows of the dataset).

use std::sync::Arc;

use quick_cache::sync::Cache;
use serde_json::{Map, Value};

use super::{BLOCK_ROWS, DatasetId};
use crate::store::{DatasetStore, StoreError};

/// Counter of dataset blocks read from the database for seed rows (cache misses).
pub const SEED_BLOCKS_READ: &str = "synthgate_seed_blocks_read_total";

/// One block of a dataset's rows, shared by the cache and the records reading it.
type Block = Arc<Vec<Map<String, Value>>>;

/// Why a seed row could not be read.
#[derive(Debug, thiserror::Error)]
pub enum SeedReadError {
    /// The database failed or was unreachable: worth trying again later.
    #[error("reading seed dataset {dataset} failed: {source}")]
    Store {
        /// The dataset read.
        dataset: DatasetId,
        /// The store's error.
        #[source]
        source: StoreError,
    },
    /// The block holding the row is not there (the dataset is gone, or shorter than its
    /// row count says): trying again cannot help.
    #[error("seed dataset {dataset} has no row {row}; the dataset was deleted or is damaged")]
    Missing {
        /// The dataset read.
        dataset: DatasetId,
        /// The row asked for.
        row: u64,
    },
    /// The plan reads a dataset the job is not bound to (a bug: both come from one resolution).
    #[error("the job's plan reads seed dataset #{part}, which the job is not bound to")]
    Unbound {
        /// The index into the job's bound datasets.
        part: usize,
    },
}

impl SeedReadError {
    /// Whether a later attempt may succeed (the database was away), as opposed to data that
    /// is gone or damaged for good.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            Self::Store {
                source: StoreError::Db(_),
                ..
            }
        )
    }
}

/// A seed row held by its block: cheap to keep while a record generates.
#[derive(Debug, Clone)]
pub struct BlockRow {
    block: Block,
    pos: usize,
}

impl BlockRow {
    /// The row.
    pub fn get(&self) -> &Map<String, Value> {
        &self.block[self.pos]
    }
}

/// Weighs a block by an estimate of the memory its values take.
#[derive(Debug, Clone, Copy)]
struct BlockBytes;

impl quick_cache::Weighter<(DatasetId, u64), Block> for BlockBytes {
    fn weight(&self, _key: &(DatasetId, u64), block: &Block) -> u64 {
        let bytes: usize = block.iter().map(map_bytes).sum();
        // At least 1: quick_cache treats zero-weight items as never evicted.
        (bytes as u64).max(1)
    }
}

/// The approximate heap size of a row: its keys and values plus a per-entry overhead.
fn map_bytes(m: &Map<String, Value>) -> usize {
    m.iter().map(|(k, v)| 48 + k.len() + value_bytes(v)).sum()
}

fn value_bytes(v: &Value) -> usize {
    match v {
        Value::Null | Value::Bool(_) | Value::Number(_) => 0,
        Value::String(s) => s.len(),
        Value::Array(a) => a.iter().map(|v| 32 + value_bytes(v)).sum(),
        Value::Object(m) => map_bytes(m),
    }
}

/// The seed block cache of one process; see the module docs. Cheap to clone.
#[derive(Clone)]
pub struct SeedBlocks {
    store: Arc<dyn DatasetStore>,
    cache: Arc<Cache<(DatasetId, u64), Block, BlockBytes>>,
}

impl std::fmt::Debug for SeedBlocks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SeedBlocks")
            .field("blocks", &self.cache.len())
            .field("bytes", &self.cache.weight())
            .finish()
    }
}

impl SeedBlocks {
    /// A cache of at most about `capacity_bytes` of rows over `store`.
    pub fn new(store: Arc<dyn DatasetStore>, capacity_bytes: u64) -> Self {
        // One shard: the default (four per core) splits the capacity so finely that a block of
        // long rows (file contents) would not fit a shard and never be cached. Lookups are a
        // hash probe under a short lock, far cheaper than the record they serve.
        let options = quick_cache::OptionsBuilder::new()
            .shards(1)
            // A guess for the hash table's first allocation: blocks of ~16 KiB.
            .estimated_items_capacity(
                usize::try_from(capacity_bytes / 16_384)
                    .unwrap_or(64)
                    .max(16),
            )
            .weight_capacity(capacity_bytes)
            .build()
            .expect("the options set are valid");
        let cache =
            Cache::with_options(options, BlockBytes, Default::default(), Default::default());
        Self {
            store,
            cache: Arc::new(cache),
        }
    }

    /// Row `row` (0-based) of `dataset`, from the cache or its block read from the store.
    pub async fn row(&self, dataset: DatasetId, row: u64) -> Result<BlockRow, SeedReadError> {
        let index = row / BLOCK_ROWS;
        let block = self
            .cache
            .get_or_insert_async(&(dataset, index), self.read(dataset, index))
            .await?;
        let pos = usize::try_from(row % BLOCK_ROWS).unwrap_or(usize::MAX);
        if pos >= block.len() {
            return Err(SeedReadError::Missing { dataset, row });
        }
        Ok(BlockRow { block, pos })
    }

    /// Reads block `index` of `dataset` from the store. An empty block is missing data: it is
    /// not cached, so a dataset imported again under the same id (never: ids are fresh) or a
    /// transient gap is not remembered.
    async fn read(&self, dataset: DatasetId, index: u64) -> Result<Block, SeedReadError> {
        metrics::counter!(SEED_BLOCKS_READ).increment(1);
        let rows = self
            .store
            .read_dataset_block(dataset, index)
            .await
            .map_err(|source| SeedReadError::Store { dataset, source })?;
        if rows.is_empty() {
            return Err(SeedReadError::Missing {
                dataset,
                row: index * BLOCK_ROWS,
            });
        }
        Ok(Arc::new(rows))
    }
}
