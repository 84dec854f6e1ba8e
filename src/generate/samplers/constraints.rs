//! DataDesigner's sampler `constraints` (`scalar_inequality`, `column_inequality`): parsing
//! and checking them against the columns (`invalid_constraint`), and testing a draw.
//!
//! Numerical samplers compare their values after `convert_to`. `datetime` and `timedelta`
//! samplers compare their instants before formatting, as DataDesigner does (its datetime
//! `preproc` is the identity; `convert_to` formats after sampling), so `column_inequality`
//! orders two date columns whatever their formats. A date compared with a number, which numpy
//! cannot do either, is refused at submit.
//!
//! As in DataDesigner (`engine/sampling_gen/generator.py`), a constrained sampler column is
//! redrawn until every constraint on it holds (rejection sampling), comparing the value after
//! `convert_to`; a `column_inequality` makes the target column depend on its `rhs` column.
//! Redraws continue the column's own random stream, so they stay deterministic. DataDesigner
//! bounds the redraws of a batch at five per record of the batch (5,000 for its usual
//! 1,000-record batches, each redraw covering every record still unmet); synthgate runs records
//! one by one and bounds each at [`MAX_DRAWS`], then fails the record with
//! `constraint_unsatisfied`. At 1,000 draws a constraint met one time in a hundred failed about
//! one record in 23,000 (measured: record 17,766 of 20,000); at 10,000 that is e^-100, and
//! even one in a thousand fails one record in 22,000. A numerical draw costs tens of
//! nanoseconds, so the bound costs under a millisecond.

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::Value;

use chrono::NaiveDateTime;

use super::super::convert::{parse_python_float, python_float_repr};
use super::Sampled;
use crate::domain::dataset::{ColumnConfig, ColumnKind, ConfigIssue, codes};

/// Draws of one record's constrained column before it fails.
pub(crate) const MAX_DRAWS: usize = 10_000;

/// DataDesigner's `InequalityOperator`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    Lt,
    Le,
    Gt,
    Ge,
}

impl Op {
    fn parse(s: &str) -> Option<Self> {
        match s {
            "lt" => Some(Self::Lt),
            "le" => Some(Self::Le),
            "gt" => Some(Self::Gt),
            "ge" => Some(Self::Ge),
            _ => None,
        }
    }

    fn symbol(self) -> &'static str {
        match self {
            Self::Lt => "<",
            Self::Le => "<=",
            Self::Gt => ">",
            Self::Ge => ">=",
        }
    }

    fn holds<T: PartialOrd>(self, lhs: T, rhs: T) -> bool {
        match self {
            Self::Lt => lhs < rhs,
            Self::Le => lhs <= rhs,
            Self::Gt => lhs > rhs,
            Self::Ge => lhs >= rhs,
        }
    }
}

/// One side of a comparison: a number, or a sampled date (its instant, not its text).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Operand {
    Number(f64),
    Time(NaiveDateTime),
}

impl Operand {
    /// A column's draw: its instant for dates, else its converted value as a number.
    fn of(raw: Option<&Sampled>, value: &Value) -> Option<Self> {
        match raw {
            Some(Sampled::DateTime(t)) => Some(Self::Time(*t)),
            _ => number(value).map(Self::Number),
        }
    }
}

/// What a constraint compares with.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Rhs {
    Scalar(f64),
    Column { slot: usize, name: String },
}

/// One compiled constraint on a sampler column.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Check {
    pub(crate) op: Op,
    pub(crate) rhs: Rhs,
}

impl Check {
    /// Whether a draw (`sampled`, converted to `value`) meets the constraint; `raw` and
    /// `values` are the record's draws and values by slot. `Err` when a side is not a number
    /// or a date, or the two are not alike, which no redraw can fix.
    pub(crate) fn holds(
        &self,
        sampled: &Sampled,
        value: &Value,
        raw: &[Option<Sampled>],
        values: &[Value],
    ) -> Result<bool, String> {
        let lhs = Operand::of(Some(sampled), value)
            .ok_or_else(|| format!("value {value} is not a number"))?;
        let rhs = match &self.rhs {
            Rhs::Scalar(x) => Operand::Number(*x),
            Rhs::Column { slot, name } => {
                let v = values.get(*slot).unwrap_or(&Value::Null);
                Operand::of(raw.get(*slot).and_then(Option::as_ref), v).ok_or_else(|| {
                    format!(
                        "constraint '{} {name}': {name} is {v}, not a number or a date",
                        self.op.symbol()
                    )
                })?
            }
        };
        match (lhs, rhs) {
            (Operand::Number(l), Operand::Number(r)) => Ok(self.op.holds(l, r)),
            (Operand::Time(l), Operand::Time(r)) => Ok(self.op.holds(l, r)),
            _ => Err(format!(
                "constraint '{}' compares a date with a number",
                self.describe()
            )),
        }
    }

    /// `< 10` or `<= other_column`, for messages.
    pub(crate) fn describe(&self) -> String {
        match &self.rhs {
            Rhs::Scalar(x) => format!("{} {}", self.op.symbol(), python_float_repr(*x)),
            Rhs::Column { name, .. } => format!("{} {name}", self.op.symbol()),
        }
    }
}

/// A sampler value as a number, the way numpy compares it (bools are 0 and 1).
fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::Bool(b) => Some(f64::from(u8::from(*b))),
        Value::String(s) => parse_python_float(s),
        _ => None,
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConstraint {
    target_column: String,
    operator: String,
    rhs: Value,
    #[serde(default)]
    constraint_type: Option<String>,
}

/// A compiled constraint: target column index, the `rhs` column index for a column
/// inequality, and the check.
pub(crate) struct Compiled {
    pub(crate) target: usize,
    pub(crate) rhs_column: Option<usize>,
    pub(crate) check: Check,
}

/// Parses and checks `constraints` against `columns` (with their value `slots`).
pub(crate) fn compile(
    raw: Option<&Value>,
    columns: &[&ColumnConfig],
    slots: &[usize],
    issues: &mut Vec<ConfigIssue>,
) -> Vec<Compiled> {
    let items = match raw {
        None | Some(Value::Null) => return Vec::new(),
        Some(Value::Array(items)) => items,
        Some(_) => {
            issues.push(ConfigIssue::at_field(
                codes::INVALID_CONSTRAINT,
                "constraints",
                "must be a list of constraints",
            ));
            return Vec::new();
        }
    };
    let mut by_name: HashMap<&str, usize> = HashMap::new();
    for (ci, col) in columns.iter().enumerate() {
        by_name.entry(col.name.as_str()).or_insert(ci);
    }
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let mut bad = |key: &str, msg: String| {
            let field = if key.is_empty() {
                format!("constraints[{i}]")
            } else {
                format!("constraints[{i}].{key}")
            };
            issues.push(ConfigIssue::at_field(
                codes::INVALID_CONSTRAINT,
                &field,
                msg,
            ));
        };
        let c: RawConstraint = match crate::domain::dataset::deserialize_at(item) {
            Ok(c) => c,
            Err((path, msg)) => {
                bad(&path, msg);
                continue;
            }
        };
        let op = Op::parse(&c.operator);
        if op.is_none() {
            let msg = format!(
                "operator must be one of lt, le, gt, ge, got '{}'",
                c.operator
            );
            bad("operator", msg);
        }
        let target = constrained_sampler(&by_name, columns, &c.target_column);
        if let Err(msg) = &target {
            bad("target_column", msg.clone());
        }
        let rhs = match resolve_type(c.constraint_type.as_deref(), &c.rhs) {
            Err(msg) => {
                bad("constraint_type", msg);
                None
            }
            Ok(Kind::Scalar) if matches!(target, Ok((_, Side::Time))) => {
                bad(
                    "rhs",
                    format!(
                        "'{}' is a date: a scalar_inequality would compare it with a number \
                         ({}), which DataDesigner cannot either; compare it with another \
                         datetime or timedelta column (column_inequality)",
                        c.target_column, c.rhs
                    ),
                );
                None
            }
            Ok(Kind::Scalar) => match number(&c.rhs).filter(|x| x.is_finite()) {
                Some(x) if !c.rhs.is_boolean() => Some((Rhs::Scalar(x), None)),
                _ => {
                    bad(
                        "rhs",
                        format!("a scalar_inequality needs a number, got {}", c.rhs),
                    );
                    None
                }
            },
            Ok(Kind::Column) => {
                let name = c.rhs.as_str().unwrap_or_default();
                match constrained_sampler(&by_name, columns, name) {
                    Ok((_, side)) if matches!(target, Ok((_, t)) if t != side) => {
                        bad(
                            "rhs",
                            format!(
                                "'{}' and '{name}' cannot be compared: one is a date, the other \
                                 a number",
                                c.target_column
                            ),
                        );
                        None
                    }
                    Ok((ci, _)) => Some((
                        Rhs::Column {
                            slot: slots[ci],
                            name: name.to_owned(),
                        },
                        Some(ci),
                    )),
                    Err(msg) => {
                        bad("rhs", msg);
                        None
                    }
                }
            }
        };
        if let (Some(op), Ok((target, _)), Some((rhs, rhs_column))) = (op, target, rhs) {
            if rhs_column == Some(target) {
                bad(
                    "rhs",
                    format!("'{}' cannot be compared with itself", c.target_column),
                );
                continue;
            }
            out.push(Compiled {
                target,
                rhs_column,
                check: Check { op, rhs },
            });
        }
    }
    out
}

enum Kind {
    Scalar,
    Column,
}

/// DataDesigner's `resolve_constraint_input_type`: the given type, else from the shape of `rhs`
/// (a string that is not a number names a column).
fn resolve_type(given: Option<&str>, rhs: &Value) -> Result<Kind, String> {
    match given {
        Some("scalar_inequality") => Ok(Kind::Scalar),
        Some("column_inequality") if rhs.is_string() => Ok(Kind::Column),
        Some("column_inequality") => Err(format!(
            "a column_inequality needs rhs to be a column name, got {rhs}"
        )),
        Some(other) => Err(format!(
            "constraint_type must be scalar_inequality or column_inequality, got '{other}'"
        )),
        None => match rhs {
            Value::String(s) if parse_python_float(s).is_none_or(|x| !x.is_finite()) => {
                Ok(Kind::Column)
            }
            _ => Ok(Kind::Scalar),
        },
    }
}

/// What a constrained column compares as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Number,
    Time,
}

/// The index of column `name` and how it compares, if it is a sampler DataDesigner's
/// constraints can compare (a numerical one, or a `datetime` or `timedelta` one), else why
/// not.
fn constrained_sampler(
    by_name: &HashMap<&str, usize>,
    columns: &[&ColumnConfig],
    name: &str,
) -> Result<(usize, Side), String> {
    use crate::domain::dataset::SamplerType;
    let Some(&ci) = by_name.get(name) else {
        return Err(format!("'{name}' is not a column"));
    };
    match &columns[ci].kind {
        ColumnKind::Sampler(s) if s.sampler_type.is_numerical() => Ok((ci, Side::Number)),
        ColumnKind::Sampler(s)
            if matches!(
                s.sampler_type,
                SamplerType::Datetime | SamplerType::Timedelta
            ) =>
        {
            Ok((ci, Side::Time))
        }
        ColumnKind::Sampler(s) => Err(format!(
            "'{name}' is a {} sampler; constraints apply to numerical samplers (bernoulli, bernoulli_mixture, binomial, gaussian, poisson, scipy, uniform) and to datetime and timedelta samplers",
            s.sampler_type.as_str()
        )),
        _ => Err(format!(
            "'{name}' is not a sampler column; constraints apply to sampler columns"
        )),
    }
}
