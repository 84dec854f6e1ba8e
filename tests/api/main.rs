//! TEMPORARY: the store suite alone; the lead merges these modules into the real binary.

mod db;
mod store;
