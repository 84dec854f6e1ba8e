//! Checks of a Parquet file's structure made before the `parquet` crate reads it, for the two
//! ways a small crafted file hurts its reader:
//!
//! * **Schema depth.** The crate builds the schema tree (and later the record reader and each
//!   row) recursively, one stack frame per level of nesting: a 16 KB footer nesting 1,000
//!   groups overflows the stack. [`check_footer`] reads the schema's `num_children` with
//!   Thrift's own reader (the footer is Thrift, compact protocol), iteratively, and refuses
//!   nesting deeper than [`MAX_SCHEMA_DEPTH`].
//! * **Page sizes.** The crate allocates a page's claimed uncompressed size before it
//!   decompresses anything: a 114-byte file claiming a 2 GiB page allocates 2 GiB.
//!   [`check_pages`] walks every page header of every column chunk and refuses a page larger
//!   than [`MAX_PAGE_BYTES`], or one that runs past its chunk.
//!
//! These run inside the decoder process (`datasets::decoder`), whose caps on stack, memory and
//! CPU time are what keep a crafted file from the service: a second reader of the same bytes
//! can disagree with the crate's somewhere, and then the crate's reader crashes the child, not
//! the service. What the checks add is a precise message for the common cases, and they read
//! the fields as the crate does: by field id whatever type the file declares (an `i16`, `i32`
//! or `i64` is the same varint; a set is read as a list), the last of a repeated field winning
//! over the first, and every schema list of a footer that declares several.
//!
//! Thrift's `skip` is itself depth-bounded (64 levels), and its reads of lengths never
//! allocate what a length claims, so these walks are bounded by the file's size.

use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};

use parquet::file::metadata::ParquetMetaData;
use thrift::protocol::{TCompactInputProtocol, TInputProtocol, TType};

use crate::datasets::import::ImportError;

/// Deepest nesting of groups a Parquet schema may have. Seed datasets are tables: a column
/// that is a list of structs of lists is three levels.
pub(crate) const MAX_SCHEMA_DEPTH: usize = 64;

/// Largest footer (the file's metadata) read. Footers are kilobytes to a few megabytes.
const MAX_FOOTER_BYTES: u64 = 64 << 20;

/// Largest page, uncompressed. Writers cut pages at about 1 MiB (pyarrow, Spark, DuckDB); a
/// page holds more only for a single value that large, and rows are bounded by
/// `datasets.max_row_bytes`.
pub(crate) const MAX_PAGE_BYTES: i64 = 64 << 20;

/// Parquet's magic, at the start and the end of a file; `PARE` ends an encrypted one.
const MAGIC: &[u8; 4] = b"PAR1";

/// Checks the footer of the Parquet file `file`: its length, and the depth of its schema.
pub(crate) fn check_footer(file: &mut File) -> Result<(), ImportError> {
    let len = file
        .metadata()
        .map_err(|e| ImportError::internal(format!("stat {e}")))?
        .len();
    if len < 12 {
        return Err(not_parquet("the file is too short to be Parquet"));
    }
    let mut tail = [0u8; 8];
    file.seek(SeekFrom::End(-8))
        .and_then(|_| file.read_exact(&mut tail))
        .map_err(|e| ImportError::internal(format!("read {e}")))?;
    match &tail[4..] {
        m if m == MAGIC => {}
        b"PARE" => {
            return Err(ImportError::invalid(
                "the Parquet file is encrypted; encrypted Parquet is not supported",
            ));
        }
        _ => return Err(not_parquet("it does not end with Parquet's magic bytes")),
    }
    let meta_len = u64::from(u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]));
    if meta_len + 8 > len {
        return Err(not_parquet(
            "its footer claims more bytes than the file has",
        ));
    }
    if meta_len > MAX_FOOTER_BYTES {
        return Err(ImportError::invalid(format!(
            "the Parquet file's metadata is {meta_len} bytes, more than the {MAX_FOOTER_BYTES} read"
        )));
    }
    let mut footer = vec![0u8; meta_len as usize];
    file.seek(SeekFrom::Start(len - 8 - meta_len))
        .and_then(|_| file.read_exact(&mut footer))
        .map_err(|e| ImportError::internal(format!("read {e}")))?;
    let depth = schema_depth(&footer)
        .map_err(|e| not_parquet(&format!("its metadata cannot be decoded ({e})")))?;
    if depth > MAX_SCHEMA_DEPTH {
        return Err(ImportError::invalid(format!(
            "the Parquet file's schema nests {depth} levels deep; at most {MAX_SCHEMA_DEPTH} are read"
        )));
    }
    Ok(())
}

/// The nesting depth of the schema in a `FileMetaData` struct (field 2, a list of
/// `SchemaElement`s in depth-first order, each group saying how many children follow), the
/// deepest of every field 2 the footer holds. The root counts as level 0, so a flat table has
/// depth 1. Stops at the first level past [`MAX_SCHEMA_DEPTH`].
fn schema_depth(footer: &[u8]) -> thrift::Result<usize> {
    let mut p = TCompactInputProtocol::new(footer);
    let mut deepest = 0;
    p.read_struct_begin()?;
    loop {
        let field = p.read_field_begin()?;
        if field.field_type == TType::Stop {
            return Ok(deepest);
        }
        if field.id != Some(2) {
            p.skip(field.field_type)?;
            continue;
        }
        // The crate reads field 2 as a list whatever type it is declared with.
        let list = p.read_list_begin()?;
        // Children still to come of each group open above the current element.
        let mut open: Vec<i64> = Vec::new();
        for _ in 0..list.size {
            let children = num_children(&mut p)?;
            if let Some(left) = open.last_mut() {
                *left -= 1;
            }
            if children > 0 {
                open.push(children);
                // The root is the first open group: depth counts the levels below it.
                deepest = deepest.max(open.len());
                if deepest > MAX_SCHEMA_DEPTH {
                    return Ok(deepest);
                }
            }
            while open.last() == Some(&0) {
                open.pop();
            }
        }
    }
}

/// Reads one `SchemaElement`, returning its `num_children` (field 5, the last one if
/// repeated, read as the crate reads it: a varint whatever its declared type; 0 for a leaf).
fn num_children<R: Read>(p: &mut TCompactInputProtocol<R>) -> thrift::Result<i64> {
    let mut children = 0;
    p.read_struct_begin()?;
    loop {
        let field = p.read_field_begin()?;
        match (field.field_type, field.id) {
            (TType::Stop, _) => break,
            (_, Some(5)) => children = i64::from(p.read_i32()?.max(0)),
            (other, _) => p.skip(other)?,
        }
        p.read_field_end()?;
    }
    p.read_struct_end()?;
    Ok(children)
}

/// Checks every page header of every column chunk in `meta` (see the module docs).
pub(crate) fn check_pages(file: &File, meta: &ParquetMetaData) -> Result<(), ImportError> {
    let len = file
        .metadata()
        .map_err(|e| ImportError::internal(format!("stat {e}")))?
        .len();
    let mut reader = Counting {
        inner: BufReader::new(file),
        read: 0,
    };
    for (g, group) in meta.row_groups().iter().enumerate() {
        for column in group.columns() {
            let start = column
                .dictionary_page_offset()
                .filter(|&o| o > 0)
                .unwrap_or_else(|| column.data_page_offset());
            let end = start.checked_add(column.compressed_size());
            let (Ok(start), Some(Ok(end))) = (u64::try_from(start), end.map(u64::try_from)) else {
                return Err(bad_chunk(
                    g,
                    column.column_path().string(),
                    "negative offsets",
                ));
            };
            if end > len || start > end {
                return Err(bad_chunk(
                    g,
                    column.column_path().string(),
                    "it lies outside the file",
                ));
            }
            let mut pos = start;
            while pos < end {
                reader
                    .inner
                    .seek(SeekFrom::Start(pos))
                    .map_err(|e| ImportError::internal(format!("seek {e}")))?;
                reader.read = 0;
                let (uncompressed, compressed) = page_sizes(&mut reader).map_err(|e| {
                    bad_chunk(
                        g,
                        column.column_path().string(),
                        &format!("a page header cannot be decoded ({e})"),
                    )
                })?;
                if uncompressed < 0 || compressed < 0 {
                    return Err(bad_chunk(
                        g,
                        column.column_path().string(),
                        "a page has a negative size",
                    ));
                }
                if uncompressed > MAX_PAGE_BYTES {
                    return Err(ImportError::invalid(format!(
                        "a page of column `{}` (row group {g}) is {uncompressed} bytes uncompressed; \
                         at most {MAX_PAGE_BYTES} are read",
                        column.column_path().string()
                    )));
                }
                pos += reader.read + compressed as u64;
                if pos > end {
                    return Err(bad_chunk(
                        g,
                        column.column_path().string(),
                        "a page runs past the end of its column chunk",
                    ));
                }
            }
        }
    }
    Ok(())
}

/// Reads one `PageHeader`: (uncompressed, compressed) sizes, fields 2 and 3, as the crate
/// reads them: varints whatever their declared type, the last of a repeated field winning.
fn page_sizes<R: Read>(r: R) -> thrift::Result<(i64, i64)> {
    let mut p = TCompactInputProtocol::new(r);
    let (mut uncompressed, mut compressed) = (None, None);
    p.read_struct_begin()?;
    loop {
        let field = p.read_field_begin()?;
        match (field.field_type, field.id) {
            (TType::Stop, _) => break,
            (_, Some(2)) => uncompressed = Some(i64::from(p.read_i32()?)),
            (_, Some(3)) => compressed = Some(i64::from(p.read_i32()?)),
            (other, _) => p.skip(other)?,
        }
        p.read_field_end()?;
    }
    p.read_struct_end()?;
    match (uncompressed, compressed) {
        (Some(u), Some(c)) => Ok((u, c)),
        _ => Err(thrift::new_protocol_error(
            thrift::ProtocolErrorKind::InvalidData,
            "a required size is missing",
        )),
    }
}

/// A reader that counts the bytes read through it (a page header's length is known only once
/// it has been read).
struct Counting<R> {
    inner: R,
    read: u64,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read += n as u64;
        Ok(n)
    }
}

fn not_parquet(why: &str) -> ImportError {
    ImportError::invalid(format!("not a readable Parquet file: {why}"))
}

fn bad_chunk(group: usize, column: String, why: &str) -> ImportError {
    ImportError::invalid(format!(
        "the Parquet file's column `{column}` (row group {group}) cannot be read: {why}"
    ))
}
