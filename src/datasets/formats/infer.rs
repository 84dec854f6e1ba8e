//! Column type inference: the kinds of value seen in a column, and the type they make.

use super::super::{ColumnType, DatasetColumn};

/// The columns of a file: each name with the type its values' kinds make.
pub(crate) fn columns(names: Vec<String>, kinds: Vec<KindSet>) -> Vec<DatasetColumn> {
    names
        .into_iter()
        .zip(kinds)
        .map(|(name, set)| DatasetColumn {
            name,
            r#type: set.column_type(),
        })
        .collect()
}

/// The kind of one non-null value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Integer,
    Float,
    Boolean,
    String,
    Timestamp,
    Object,
    Array,
}

/// The kinds seen in a column so far (nulls are not a kind: they never change a type).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct KindSet(u8);

impl KindSet {
    /// Adds a value's kind.
    pub(crate) fn add(&mut self, kind: Kind) {
        self.0 |= 1 << kind as u8;
    }

    fn has(self, kind: Kind) -> bool {
        self.0 & (1 << kind as u8) != 0
    }

    /// The column's type: `null` when no value was seen, the one kind when there is one,
    /// `float` for integers mixed with floats (as pandas reads them), else `string` (pandas'
    /// `object`: the values stay as they are, of mixed types).
    pub(crate) fn column_type(self) -> ColumnType {
        let only = |kind: Kind| self.0 == 1 << kind as u8;
        if self.0 == 0 {
            ColumnType::Null
        } else if only(Kind::Integer) {
            ColumnType::Integer
        } else if only(Kind::Float)
            || (self.has(Kind::Integer) && self.has(Kind::Float) && self.0.count_ones() == 2)
        {
            ColumnType::Float
        } else if only(Kind::Boolean) {
            ColumnType::Boolean
        } else if only(Kind::Timestamp) {
            ColumnType::Timestamp
        } else if only(Kind::Object) {
            ColumnType::Object
        } else if only(Kind::Array) {
            ColumnType::Array
        } else {
            ColumnType::String
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(kinds: &[Kind]) -> ColumnType {
        let mut set = KindSet::default();
        for k in kinds {
            set.add(*k);
        }
        set.column_type()
    }

    #[test]
    fn types_from_kinds() {
        assert_eq!(of(&[]), ColumnType::Null);
        assert_eq!(of(&[Kind::Integer]), ColumnType::Integer);
        assert_eq!(of(&[Kind::Integer, Kind::Float]), ColumnType::Float);
        assert_eq!(of(&[Kind::Float]), ColumnType::Float);
        assert_eq!(of(&[Kind::Boolean]), ColumnType::Boolean);
        assert_eq!(of(&[Kind::Boolean, Kind::Integer]), ColumnType::String);
        assert_eq!(of(&[Kind::Integer, Kind::String]), ColumnType::String);
        assert_eq!(of(&[Kind::Object]), ColumnType::Object);
        assert_eq!(of(&[Kind::Object, Kind::Array]), ColumnType::String);
        assert_eq!(of(&[Kind::Timestamp]), ColumnType::Timestamp);
    }
}
