//! [`row_struct!`]: a row struct and its `sqlx::FromRow`, each field read from the column of
//! its name.
//!
//! sqlx's `#[derive(FromRow)]` does the same, but it lives in sqlx's proc-macro crate, and
//! turning that crate on (sqlx's `derive` or `macros` feature) also turns on its database
//! drivers, for the compile-time checked queries this service does not use: a release build
//! then compiles sqlx's Postgres and SQLite drivers, SQLite's C and Tokio a second time, for
//! the compiler, about 70 s of CPU on two cores (bench/README.md, "Release build time"). The
//! impls are what the derive writes: `try_get` by field name, the field's type bound by
//! `Decode + Type` of the row's database.

/// Declares a struct whose fields are columns and implements `sqlx::FromRow` for it, for any
/// row type whose columns are indexed by name. Attributes (doc comments, derives) pass through.
macro_rules! row_struct {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident $(<$($g:ident),+>)? {
            $($(#[$fmeta:meta])* $fvis:vis $field:ident: $ty:ty),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        $vis struct $name $(<$($g),+>)? {
            $($(#[$fmeta])* $fvis $field: $ty),+
        }

        impl<'r, R: sqlx::Row $($(, $g)+)?> sqlx::FromRow<'r, R> for $name $(<$($g),+>)?
        where
            &'r str: sqlx::ColumnIndex<R>,
            $($ty: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,)+
        {
            fn from_row(row: &'r R) -> Result<Self, sqlx::Error> {
                Ok(Self {
                    $($field: row.try_get(stringify!($field))?),+
                })
            }
        }
    };
}
pub(crate) use row_struct;
