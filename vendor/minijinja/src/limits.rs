//! Render limits beyond fuel (a synthgate patch, see `SYNTHGATE.md` at the crate root).
//!
//! Fuel charges the data a template creates, but two things escape it:
//!
//! * **Formatting shared data.** Containers share their items, so `[s] * n` or `l + l` make a
//!   value whose printed form is far larger than anything fuel paid for. Printing it (output,
//!   `~`, captures, `|string`, `format`) used to allocate gigabytes before fuel was charged for
//!   the result. With a [`scope`] active, containers charge a per-thread format budget for
//!   every item *before* writing it; once the budget is spent they print `...` instead of their
//!   items and [`exceeded`] reports it, so the caller fails the render. Nothing errors inside
//!   `Display` (which would make `format!` panic): the output is only truncated, never grown.
//! * **Wall time.** The fuel tracker also checks a per-thread deadline every
//!   [`DEADLINE_CHECK_EVERY`] instructions. One instruction may still do work that grows with
//!   shared data (sorting a list that repeats one long string compares it again and again), so
//!   comparing and hashing values check the deadline too ([`should_stop`]); once any limit is
//!   exceeded they answer at once (equal, or nothing hashed), which ends the instruction
//!   quickly with a meaningless result that is never used, since the render fails.
//!
//! Without an active scope nothing changes: budgets are unlimited and there is no deadline.

use std::cell::{Cell, RefCell};
use std::time::Instant;

use crate::value::Value;

/// How many fuel-tracked instructions run between two deadline checks (`Instant::now` is too
/// costly for every instruction).
pub(crate) const DEADLINE_CHECK_EVERY: u32 = 1024;

/// How many comparisons or hashes run between two deadline checks in [`should_stop`]: fewer
/// than instructions, since one may cost as much as its (long, shared) operands.
const STOP_CHECK_EVERY: u32 = 64;

/// Which limit a render ran into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exceeded {
    /// The format budget was spent: some container printed `...` instead of its items.
    FormatBudget,
    /// The deadline passed.
    Deadline,
    /// Comparing and hashing long strings used up the work budget.
    Work,
    /// A value nested deeper than [`MAX_NESTING`] was printed, serialized or compared.
    Nesting,
}

thread_local! {
    static FORMAT_BUDGET: Cell<Option<usize>> = const { Cell::new(None) };
    static WORK_BUDGET: Cell<Option<usize>> = const { Cell::new(None) };
    static DEADLINE: Cell<Option<Instant>> = const { Cell::new(None) };
    static EXCEEDED: Cell<Option<Exceeded>> = const { Cell::new(None) };
    static UNTIL_STOP_CHECK: Cell<u32> = const { Cell::new(STOP_CHECK_EVERY) };
    static NESTING: Cell<usize> = const { Cell::new(0) };
}

/// Restores the limits that were active before [`scope`] when dropped.
#[must_use = "the limits end when the guard is dropped"]
pub struct ScopeGuard {
    budget: Option<usize>,
    work: Option<usize>,
    deadline: Option<Instant>,
    exceeded: Option<Exceeded>,
}

impl Drop for ScopeGuard {
    fn drop(&mut self) {
        FORMAT_BUDGET.with(|c| c.set(self.budget));
        WORK_BUDGET.with(|c| c.set(self.work));
        DEADLINE.with(|c| c.set(self.deadline));
        EXCEEDED.with(|c| c.set(self.exceeded));
    }
}

/// Sets this thread's limits until the guard drops: at most `format_budget` bytes of container
/// formatting, at most `work_budget` bytes of strings compared or hashed, and no instruction
/// started after `deadline`.
pub fn scope(format_budget: usize, work_budget: usize, deadline: Option<Instant>) -> ScopeGuard {
    ScopeGuard {
        budget: FORMAT_BUDGET.with(|c| c.replace(Some(format_budget))),
        work: WORK_BUDGET.with(|c| c.replace(Some(work_budget))),
        deadline: DEADLINE.with(|c| c.replace(deadline)),
        exceeded: EXCEEDED.with(|c| c.replace(None)),
    }
}

/// The first limit this thread ran into since its [`scope`] began, if any.
pub fn exceeded() -> Option<Exceeded> {
    EXCEEDED.with(|c| c.get())
}

fn mark(what: Exceeded) {
    EXCEEDED.with(|c| {
        if c.get().is_none() {
            c.set(Some(what));
        }
    });
}

/// Charges the format budget for printing `value` as a container item. Returns `false` (and
/// records [`Exceeded::FormatBudget`]) when the budget cannot pay for it: the caller must not
/// print the item. Nested containers charge for their own items when they are printed.
///
/// `pretty` is the formatter's alternate mode (`pprint`, `{:#?}`): there every item goes on a
/// line of its own, indented four spaces per level of nesting, so the indentation is paid for
/// too (a list nested thirty levels deep writes 120 bytes of it per item).
pub(crate) fn charge_item(value: &Value, pretty: bool) -> bool {
    // Quotes and separator for strings; a flat guess for numbers and other scalars.
    let mut cost = value.as_str().map_or(24, |s| s.len() + 4);
    if pretty {
        cost = cost.saturating_add(NESTING.with(|c| c.get()).saturating_mul(4) + 1);
    }
    charge_bytes(cost)
}

/// Runs `f`, which prints the items of a container, one level deeper (see [`charge_item`]).
pub(crate) fn nested<R>(f: impl FnOnce() -> R) -> R {
    struct Restore(usize);
    impl Drop for Restore {
        fn drop(&mut self) {
            NESTING.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(NESTING.with(|c| c.replace(c.get().saturating_add(1))));
    f()
}

/// Charges `n` bytes of formatting; see [`charge_item`]. Printing also stops at the deadline
/// (checked every [`STOP_CHECK_EVERY`] charges): one print is one instruction, and a budget of
/// short items can take long to spend.
pub(crate) fn charge_bytes(n: usize) -> bool {
    if EXCEEDED.with(|c| c.get()).is_some() {
        return false;
    }
    if should_stop(0) {
        return false;
    }
    FORMAT_BUDGET.with(|c| match c.get() {
        None => true,
        Some(left) if left >= n => {
            c.set(Some(left - n));
            true
        }
        Some(_) => {
            c.set(Some(0));
            mark(Exceeded::FormatBudget);
            false
        }
    })
}

/// Whether this thread's deadline has passed (recorded as [`Exceeded::Deadline`]).
pub(crate) fn deadline_passed() -> bool {
    let passed = DEADLINE
        .with(|c| c.get())
        .is_some_and(|d| Instant::now() >= d);
    if passed {
        mark(Exceeded::Deadline);
    }
    passed
}

/// Whether per-item work inside one instruction (comparing, hashing) should stop: once a limit
/// was exceeded, or when the deadline has passed (checked every [`STOP_CHECK_EVERY`] calls).
/// `bytes` is what the caller is about to compare or hash; it is charged to the work budget.
#[inline]
pub(crate) fn should_stop(bytes: usize) -> bool {
    if EXCEEDED.with(|c| c.get()).is_some() {
        return true;
    }
    if bytes > 0 {
        let spent = WORK_BUDGET.with(|c| match c.get() {
            None => false,
            Some(left) if left >= bytes => {
                c.set(Some(left - bytes));
                false
            }
            Some(_) => {
                c.set(Some(0));
                true
            }
        });
        if spent {
            mark(Exceeded::Work);
            return true;
        }
    }
    let left = UNTIL_STOP_CHECK.with(|c| c.get());
    if left == 0 {
        UNTIL_STOP_CHECK.with(|c| c.set(STOP_CHECK_EVERY));
        deadline_passed()
    } else {
        UNTIL_STOP_CHECK.with(|c| c.set(left - 1));
        false
    }
}

/// The string bytes of `v` that comparing or hashing it reads (0 for other values).
#[inline]
pub(crate) fn str_len(v: &Value) -> usize {
    v.as_str().map_or(0, str::len)
}

/// How many objects may be dropped inside one another before the rest wait their turn (see
/// [`release`]). A level takes a few hundred bytes of stack in a debug build.
const MAX_DROP_DEPTH: usize = 100;

thread_local! {
    static DROP_DEPTH: Cell<usize> = const { Cell::new(0) };
    static DEFERRED_DROPS: RefCell<Vec<(*const (), fn(*const ()))>> = const { RefCell::new(Vec::new()) };
}

/// Releases one reference to a type-erased object (`decref(ptr)`), without recursing deeper
/// than [`MAX_DROP_DEPTH`].
///
/// A template can nest lists a hundred thousand levels deep (`{% set ns.l = [ns.l] %}` in a
/// loop, within its fuel). Dropping such a value dropped each level inside the one above it and
/// overflowed the thread's stack: the process aborted. Past the depth bound the release is
/// queued instead, and the outermost release runs the queue, so the stack holds at most
/// `MAX_DROP_DEPTH` levels whatever the nesting. Works without a [`scope`].
pub(crate) fn release(ptr: *const (), decref: fn(*const ())) {
    let Ok(depth) = DROP_DEPTH.try_with(Cell::get) else {
        // This thread's locals are being torn down: drop in place, as unpatched.
        return decref(ptr);
    };
    if depth >= MAX_DROP_DEPTH {
        if DEFERRED_DROPS
            .try_with(|q| q.borrow_mut().push((ptr, decref)))
            .is_ok()
        {
            return;
        }
        return decref(ptr);
    }
    DROP_DEPTH.with(|d| d.set(depth + 1));
    decref(ptr);
    DROP_DEPTH.with(|d| d.set(depth));
    if depth == 0 {
        // The outermost release: drop what was queued, each from one level down, so that
        // the drops it causes queue again rather than run this loop recursively.
        DROP_DEPTH.with(|d| d.set(1));
        while let Some((ptr, decref)) = DEFERRED_DROPS.with(|q| q.borrow_mut().pop()) {
            decref(ptr);
        }
        DROP_DEPTH.with(|d| d.set(0));
    }
}

/// How deep printing, serializing, comparing and hashing descend into nested values. JSON
/// read by serde_json is at most 128 levels deep, so every value a record holds fits, with
/// room for what a template wraps around it; a deeper value can only come from a template
/// nesting lists in a loop, where every walk recursed once per level until the stack overflowed.
pub const MAX_NESTING: usize = 256;

thread_local! {
    static DESCENT: Cell<usize> = const { Cell::new(0) };
}

/// One level of a walk into a nested value; leaving it when dropped.
pub(crate) struct Descent(());

impl Drop for Descent {
    fn drop(&mut self) {
        let _ = DESCENT.try_with(|d| d.set(d.get().saturating_sub(1)));
    }
}

/// Enters one more level of a walk into a nested value, or `None` (recording
/// [`Exceeded::Nesting`]) past [`MAX_NESTING`]: the caller must not descend. Works without a
/// [`scope`], since a stack overflow aborts the process wherever it happens.
pub(crate) fn descend() -> Option<Descent> {
    let depth = DESCENT.try_with(|d| {
        let depth = d.get();
        if depth < MAX_NESTING {
            d.set(depth + 1);
        }
        depth
    });
    match depth {
        Ok(depth) if depth < MAX_NESTING => Some(Descent(())),
        _ => {
            let _ = EXCEEDED.try_with(|c| {
                if c.get().is_none() {
                    c.set(Some(Exceeded::Nesting));
                }
            });
            None
        }
    }
}
